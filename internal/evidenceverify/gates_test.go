package evidenceverify

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// resign writes ts as the fixture's journal and pack and signs the attestation again with
// their head, as a control plane would sign whatever record it was sent.
func (f *fixture) resign(t *testing.T, ts []engine.Transition) {
	t.Helper()
	f.transitions = ts
	f.writeJournal(t, ts)
	f.writePack(t, ts)
	f.predicate.ChainHead = ts[len(ts)-1].Hash
	f.sign(t)
}

// withoutGate is ts without the gate_opened and gate_decided transitions of step, renumbered
// and sealed again: a record whose executor skipped the gate.
func withoutGate(ts []engine.Transition, step string) []engine.Transition {
	ts = slices.DeleteFunc(cloneTransitions(ts), func(t engine.Transition) bool {
		return t.StepName == step && (t.Kind == engine.TransitionGateOpened || t.Kind == engine.TransitionGateDecided)
	})
	for i := range ts {
		ts[i].Seq = int64(i + 1)
	}
	return reseal(ts)
}

// seqOf is the seq of the first transition of kind for step.
func seqOf(ts []engine.Transition, kind engine.TransitionKind, step string) int64 {
	for _, t := range ts {
		if t.Kind == kind && t.StepName == step {
			return t.Seq
		}
	}
	return 0
}

func TestEveryGateOfTheChainPairsWithASignedDecision(t *testing.T) {
	cases := []struct {
		name    string
		tamper  func(t *testing.T, f *fixture)
		code    int
		seqKind engine.TransitionKind // the transition the failure names
		why     string
	}{
		{"a gate skipped, its step written passed, nothing signed for it", func(t *testing.T, f *fixture) {
			f.predicate.Gates = nil
			f.resign(t, withoutGate(f.transitions, "approve-rollout"))
		}, ExitFailed, engine.TransitionStepFinished, "the attestation has no such decision"},
		{"a gate skipped while another run's approval is signed for it", func(t *testing.T, f *fixture) {
			f.predicate.Gates[0].Verdict = "rejected"
			f.resign(t, withoutGate(f.transitions, "approve-rollout"))
		}, ExitFailed, engine.TransitionStepFinished, "the attestation gate 'approve-rollout' rejected"},
		{"a gate_decided whose message names no verdict", func(t *testing.T, f *fixture) {
			ts := cloneTransitions(f.transitions)
			for i := range ts {
				if ts[i].Kind == engine.TransitionGateDecided {
					ts[i].Message = "waved through"
				}
			}
			f.resign(t, reseal(ts))
		}, ExitFailed, engine.TransitionGateDecided, "names no verdict rbook writes"},
		{"the chain names another approver than the signed votes", func(t *testing.T, f *fixture) {
			f.resign(t, reseal(renameApprover(cloneTransitions(f.transitions), "github:alice", "github:mallory")))
		}, ExitFailed, engine.TransitionGateDecided, "the attestation's deciding votes are not github:mallory's"},
		{"the approver is a person whose identity voted", func(t *testing.T, f *fixture) {
			f.predicate.Gates[0].DecidedBy = "person:alice"
			f.sign(t)
		}, ExitVerified, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, runA, "github:alice")
			c.tamper(t, f)
			assertReport(t, f.verify(t, Options{}), c.code, CheckGates, seqOf(f.transitions, c.seqKind, "approve-rollout"), "approve-rollout", c.why)
		})
	}
}

// timedOutFixture is the fixture runbook run with a gate whose deadline passed (the engine
// writes no gate_decided, the step TIMED_OUT), attested as the control plane records it:
// rejected through the deadline.
func timedOutFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, runA, "github:alice")
	ts, status := runWithGate(t, runA, gateTimesOut{})
	if status != engine.RunFailed {
		t.Fatalf("the timed-out run ended %s, want %s", status, engine.RunFailed)
	}
	f.predicate.FinalStatus = string(status)
	f.predicate.Gates = []attest.GateDecision{{ApprovalID: "a-1", StepIndex: 1, StepName: "approve-rollout", Verdict: "rejected",
		Channel: channelDeadline, Reason: "timed out after 5s", Policy: attest.GatePolicy{Rule: "default", RequiredApprovals: 1, FourEyes: true}}}
	f.resign(t, ts)
	return f
}

func TestATimedOutGatePairsWithTheDeadlinesRejection(t *testing.T) {
	cases := []struct {
		name   string
		change func(g *attest.GateDecision)
		code   int
		why    string
	}{
		{"rejected through the deadline", func(*attest.GateDecision) {}, ExitVerified, ""},
		{"expired", func(g *attest.GateDecision) { g.Verdict, g.Channel = "expired", "" }, ExitVerified, ""},
		{"rejected by a person", func(g *attest.GateDecision) { g.Channel, g.DecidedBy = "github", "github:alice" }, ExitFailed, "the chain shows gate 'approve-rollout' timed out"},
		{"approved", func(g *attest.GateDecision) { g.Verdict = "approved" }, ExitFailed, "the attestation gate 'approve-rollout' approved"},
		{"still pending when the run ended", func(g *attest.GateDecision) { g.Verdict, g.Channel = "pending", "" }, ExitVerified, ""},
		{"closed as cancelled when the run ended", func(g *attest.GateDecision) { g.Verdict, g.Channel = "cancelled", "rpc" }, ExitVerified, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := timedOutFixture(t)
			c.change(&f.predicate.Gates[0])
			f.sign(t)
			assertReport(t, f.verify(t, Options{}), c.code, CheckGates, seqOf(f.transitions, engine.TransitionStepFinished, "approve-rollout"), "approve-rollout", c.why)
		})
	}
}

// assertReport checks rep's exit code and, when it failed, that its first failure is check's
// at seq and step with why among its words.
func assertReport(t *testing.T, rep *Report, code int, check string, seq int64, step, why string) {
	t.Helper()
	var text bytes.Buffer
	rep.WriteText(&text, false)
	if got := rep.Code(); got != code {
		t.Fatalf("exit code %d, want %d:\n%s", got, code, text.String())
	}
	if code != ExitFailed {
		return
	}
	f1 := rep.First
	if f1 == nil || f1.Check != check || f1.Seq != seq || f1.Step != step || !strings.Contains(f1.Why, why) {
		t.Fatalf("first failure %+v, want check %s at seq %d, step %q, why containing %q:\n%s", f1, check, seq, step, why, text.String())
	}
}

func TestARealRunWhoseGateTimedOutVerifies(t *testing.T) {
	dir := "testdata/timed-out-run"
	in, err := Load(context.Background(), Options{Pack: filepath.Join(dir, realRun+packSuffix), KeyFile: filepath.Join(dir, "embedded-signing.pub.pem")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := Verify(in)
	var text bytes.Buffer
	rep.WriteText(&text, false)
	if rep.Code() != ExitVerified || !strings.Contains(text.String(), "the chain's 1 gate decision(s) are the attestation's") {
		t.Fatalf("exit %d, want %d with the timed-out gate paired:\n%s", rep.Code(), ExitVerified, text.String())
	}
}
