package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// links are ts as the chain sees them.
func links(ts []engine.Transition) []evidencechain.Link {
	out := make([]evidencechain.Link, len(ts))
	for i, t := range ts {
		out[i] = t.Link()
	}
	return out
}

// checkEntries fails t unless every transition of ts that carries an evidence entry names
// its own hash in the entry.
func checkEntries(t *testing.T, ts []engine.Transition) {
	t.Helper()
	entries := 0
	for _, tr := range ts {
		if tr.Evidence == nil {
			continue
		}
		entries++
		if tr.Hash == "" || tr.Evidence.TransitionHash != tr.Hash {
			t.Errorf("seq %d (%s %s): entry's transition_hash %q, transition's hash %q", tr.Seq, tr.Kind, tr.StepName, tr.Evidence.TransitionHash, tr.Hash)
		}
	}
	if entries == 0 {
		t.Fatal("no transition carried an evidence entry")
	}
}

func TestEvidenceEntryNamesItsTransitionHash(t *testing.T) {
	approve := gateFunc(func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Approved, Input: "yes", Source: "terminal"}, nil
	})
	cancel := gateFunc(func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Cancelled, Input: "cancel", Source: "terminal"}, nil
	})
	for _, tc := range []struct {
		name string
		gate engine.Gate
		want engine.RunStatus
	}{{"a completed run", approve, engine.RunCompleted}, {"a cancel's audit entry", cancel, engine.RunCancelled}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &memRecorder{}
			e := newEngine(plan(check("c", "halt"), deploy("d"), confirm("g", "halt"), check("after", "halt")), newScripted(nil), tc.gate, rec)
			e.ConfirmCancel = func(context.Context, string) (bool, error) { return true, nil }
			res, err := e.Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
			if err != nil || res.Status != tc.want {
				t.Fatalf("Run = %s, %v; want %s", res.Status, err, tc.want)
			}
			head, err := evidencechain.Verify(links(rec.ts))
			if err != nil || head != rec.ts[len(rec.ts)-1].Hash {
				t.Fatalf("the run's chain: head %s, %v", head, err)
			}
			if rec.ts[0].PrevHash != evidencechain.Genesis {
				t.Fatalf("seq 1 prev_hash %s, want the genesis", rec.ts[0].PrevHash)
			}
			checkEntries(t, rec.ts)
			if last := rec.ts[len(rec.ts)-1]; tc.want == engine.RunCancelled && (last.Evidence == nil || last.Evidence.StepName != "CANCEL") {
				t.Fatalf("the last transition %s carries %+v; want the CANCEL audit entry", last.Kind, last.Evidence)
			}
		})
	}
}

func TestResumedEngineRunContinuesTheChain(t *testing.T) {
	halt := gateFunc(func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{}, fmt.Errorf("the control plane is gone: %w", engine.ErrGateUnresolved)
	})
	p := plan(check("c", "halt"), confirm("g", "halt"), deploy("d"))
	first := &memRecorder{}
	// The run halts at the gate (the error says so), resumable.
	if res, _ := newEngine(p, newScripted(nil), halt, first).Run(context.Background(), engine.Start{RunID: "R", Fresh: true}); res.Status.Final() {
		t.Fatalf("the first attempt ended %s; want it halted at the gate", res.Status)
	}
	last := first.ts[len(first.ts)-1]
	approve := gateFunc(func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Approved, Input: "yes", Source: "terminal"}, nil
	})
	second := &memRecorder{}
	res, err := newEngine(p, newScripted(nil), approve, second).Run(context.Background(),
		engine.Start{RunID: "R", Seq: last.Seq, ChainHead: last.Hash, Index: 1})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("resumed run = %s, %v", res.Status, err)
	}
	all := append(append([]engine.Transition(nil), first.ts...), second.ts...)
	if _, err := evidencechain.Verify(links(all)); err != nil {
		t.Fatalf("the chain across the resume: %v", err)
	}
	checkEntries(t, all)

	// A run recorded without the chain (no head after seq 0) stays without it.
	legacy := &memRecorder{}
	if _, err := newEngine(p, newScripted(nil), approve, legacy).Run(context.Background(), engine.Start{RunID: "R", Seq: last.Seq, Index: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tr := range legacy.ts {
		if tr.Hash != "" || tr.PrevHash != "" {
			t.Fatalf("seq %d of a run without the chain was sealed (%s)", tr.Seq, tr.Hash)
		}
	}
}
