package run

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
)

// fakeRunner is the runner output's part in the gate chain: it wraps what it is given in
// marked gates, so the chain shows where the pipeline placed them.
type fakeRunner struct {
	// cp is the control plane's gate Gate was told about.
	cp *cpclient.Gate
}

type runnerLocal struct{ next engine.Gate }
type runnerGate struct{ next engine.Gate }

func (runnerLocal) Await(_ context.Context, _ engine.GateRequest) (engine.Decision, error) {
	return engine.Decision{}, nil
}
func (runnerGate) Await(_ context.Context, _ engine.GateRequest) (engine.Decision, error) {
	return engine.Decision{}, nil
}

func (r *fakeRunner) Local(_ *steps.TerminalGate, g engine.Gate, _ bool, _ string) engine.Gate {
	return runnerLocal{next: g}
}

func (r *fakeRunner) Gate(g engine.Gate, cp *cpclient.Gate, _ string, _ bool) engine.Gate {
	r.cp = cp
	return runnerGate{next: g}
}

// chainOf names the gates of a run's chain, outermost first, following each decorator to the
// gate it wraps (a control plane's gate to its local source).
func chainOf(g engine.Gate) []string {
	var names []string
	for g != nil {
		switch x := g.(type) {
		case tracedGate:
			names, g = append(names, "trace span"), x.next
		case runnerGate:
			names, g = append(names, "runner output"), x.next
		case *cpclient.DecidedGate:
			names, g = append(names, "resumed decision"), x.Next
		case *cpclient.HumanNoticeGate:
			names, g = append(names, "human notice"), x.CP
		case *cpclient.Gate:
			names, g = append(names, "control plane"), x.Local
		case runnerLocal:
			names, g = append(names, "runner local"), x.next
		case *steps.PolicyGate:
			names, g = append(names, "auto-pass policy"), x.Next
		case *steps.TerminalGate:
			names, g = append(names, "terminal"), nil
		default:
			names, g = append(names, fmt.Sprintf("%T", g)), nil
		}
	}
	return names
}

// TestGateChainIsComposedInOneOrder: composeGates builds every run's gate chain in one
// order, outermost first: the trace's gate span, the runner output's wrapper, a resumed run's
// decided gate (rbook resume, a runbook's), then the control plane's gate (a playbook's behind its human notice) with the
// terminal as its local source, or without a control plane the terminal alone (a playbook's
// behind its auto-pass policy). Outside a runner the runner output's gates are left out.
func TestGateChainIsComposedInOneOrder(t *testing.T) {
	for _, tc := range []struct {
		controlPlane, playbook, resumed bool
		want                            []string
	}{
		{false, false, false, []string{"trace span", "runner output", "terminal"}},
		{false, false, true, []string{"trace span", "runner output", "resumed decision", "terminal"}},
		{false, true, false, []string{"trace span", "runner output", "auto-pass policy", "terminal"}},
		{false, true, true, []string{"trace span", "runner output", "auto-pass policy", "terminal"}},
		{true, false, false, []string{"trace span", "runner output", "control plane", "runner local", "terminal"}},
		{true, false, true, []string{"trace span", "runner output", "resumed decision", "control plane", "runner local", "terminal"}},
		{true, true, false, []string{"trace span", "runner output", "human notice", "control plane", "runner local", "terminal"}},
		{true, true, true, []string{"trace span", "runner output", "human notice", "control plane", "runner local", "terminal"}},
	} {
		for _, inRunner := range []bool{true, false} {
			name := fmt.Sprintf("control plane %v, playbook %v, resumed %v, in a runner %v", tc.controlPlane, tc.playbook, tc.resumed, inRunner)
			t.Run(name, func(t *testing.T) {
				term := &fakeTerminal{}
				if inRunner {
					term.runner = &fakeRunner{}
				}
				_, noInput, _, _, tg := term.TerminalGate()
				a := &attempt{Options: Options{Terminal: term, Err: io.Discard}, tg: tg, noInput: noInput, trace: &runTrace{}}
				if tc.playbook {
					a.Playbook = &Playbook{}
				}
				a.opened = &state.Opened{Resumed: tc.resumed}
				if tc.resumed && !tc.playbook {
					// rbook resume: the paused gate's decision (playbook runs resume from
					// their state file only).
					a.resumed = &cpclient.DecidedGate{StepIndex: 1}
				}
				if tc.controlPlane {
					a.cpURL = "http://127.0.0.1:7070"
					a.cpc = cpclient.New(a.cpURL, "")
					a.cpRec = &cpclient.Recorder{C: a.cpc}
				}
				a.composeGates()
				want := tc.want
				if !inRunner {
					want = slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "runner output" || s == "runner local" })
				}
				if got := chainOf(a.gate); !slices.Equal(got, want) {
					t.Fatalf("chain %q; want %q", got, want)
				}
				if inRunner && (term.runner.cp != nil) != tc.controlPlane {
					t.Errorf("the runner output was told of control-plane gate %v; want one exactly when the run has a control plane", term.runner.cp)
				}
				if wantNoAnswer := map[bool]string{false: noInput, true: ""}[tc.controlPlane]; tg.NoAnswer != wantNoAnswer {
					t.Errorf("terminal gate NoAnswer %q; want %q (it says why it cannot answer only when it is the only source)", tg.NoAnswer, wantNoAnswer)
				}
			})
		}
	}
}
