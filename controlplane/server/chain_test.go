package server_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// execWords are the engine's run status words of the wire statuses an executor sends.
var execWords = map[rbookv1.RunStatus]string{
	rbookv1.RunStatus_RUN_STATUS_RUNNING: "IN_PROGRESS", rbookv1.RunStatus_RUN_STATUS_SUCCEEDED: "COMPLETED",
	rbookv1.RunStatus_RUN_STATUS_FAILED: "FAILED", rbookv1.RunStatus_RUN_STATUS_CANCELLED: "CANCELLED",
}

// seal sets p's prev_hash and hash as an executor seals it after prev (docs/evidence-chain.md)
// and returns the hash.
func seal(p *rbookv1.Transition, prev string) string {
	l := evidencechain.Link{RunID: p.GetRunId(), Seq: p.GetSeq(), Time: p.GetTime().AsTime(), StepIndex: int(p.GetStepIndex()),
		Kind:     strings.ToLower(strings.TrimPrefix(p.GetKind().String(), "TRANSITION_KIND_")),
		StepName: p.GetStepName(), StepType: p.GetStepType(), RunStatus: execWords[p.GetRunStatus()],
		LastDeployName: p.GetLastDeployName(), RollbackFor: p.GetRollbackFor(), Message: p.GetMessage()}
	if e := p.GetEvidence(); e != nil {
		l.Evidence = &evidencechain.Entry{StepName: e.GetStepName(), Type: e.GetType(), Input: e.Input, Output: e.GetOutput(),
			Status: strings.TrimPrefix(e.GetStatus().String(), "STEP_STATUS_"), TimestampUTC: e.GetTimestampUtc(), SourceInput: e.SourceInput}
	}
	evidencechain.Seal(prev, &l)
	p.PrevHash, p.Hash = l.PrevHash, l.Hash
	return l.Hash
}

// sealedRun records transitions 1..n of a new run id, chained, and returns their hashes
// (hashes[seq]).
func sealedRun(t *testing.T, c clients, id string, n int64) []string {
	t.Helper()
	startRun(t, c, id)
	hashes := []string{evidencechain.Genesis}
	for seq := int64(1); seq <= n; seq++ {
		p := transition(id, seq, 0)
		hashes = append(hashes, seal(p, hashes[seq-1]))
		record(t, c, p)
	}
	return hashes
}

func TestControlPlaneRefusesABrokenChain(t *testing.T) {
	c := startInProcess(t)
	tests := []struct {
		name    string
		next    func(id string, hashes []string) *rbookv1.Transition
		because string
	}{
		{"a wrong prev_hash", func(id string, hashes []string) *rbookv1.Transition {
			p := transition(id, 4, 0)
			seal(p, hashes[2])
			return p
		}, "is not the hash"},
		{"a wrong hash", func(id string, hashes []string) *rbookv1.Transition {
			p := transition(id, 4, 0)
			seal(p, hashes[3])
			p.StepName = "edited after sealing"
			return p
		}, "does not match the transition's content"},
		{"a missing hash on a chained run", func(id string, _ []string) *rbookv1.Transition { return transition(id, 4, 0) }, "carries no hash"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "R-chain-" + string(rune('a'+i))
			hashes := sealedRun(t, c, id, 3)
			p := tt.next(id, hashes)
			_, err := c.runs.RecordTransition(context.Background(), &rbookv1.RecordTransitionRequest{Transition: p, OwnerId: testOwner, Epoch: epochOf(t, c, id)})
			wantCode(t, err, connect.CodeFailedPrecondition, "E_CHAIN_BROKEN")
			if msg := err.Error(); !strings.Contains(msg, "seq 4") || !strings.Contains(msg, tt.because) {
				t.Fatalf("RecordTransition: %v; want it to name seq 4 and say %q", err, tt.because)
			}
			_, err = c.runs.RecordTransitions(context.Background(), &rbookv1.RecordTransitionsRequest{Transitions: []*rbookv1.Transition{p}, OwnerId: testOwner, Epoch: epochOf(t, c, id)})
			wantCode(t, err, connect.CodeFailedPrecondition, "E_CHAIN_BROKEN")
			run, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: id})
			if err != nil || run.GetRun().GetLastSeq() != 3 || run.GetRun().GetChainHead() != hashes[3] {
				t.Fatalf("after the refusals: last_seq %d, chain_head %s, %v; want 3, %s", run.GetRun().GetLastSeq(), run.GetRun().GetChainHead(), err, hashes[3])
			}
		})
	}
}

func TestControlPlaneShowsTheChain(t *testing.T) {
	c := startInProcess(t)
	const id = "R-chain-shown"
	hashes := sealedRun(t, c, id, 3) // seq 3 is a step_finished with evidence
	res, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: id})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetRun().GetChainHead() != hashes[3] {
		t.Fatalf("GetRun chain_head = %q, want %s", res.GetRun().GetChainHead(), hashes[3])
	}
	for _, p := range res.GetTransitions() {
		if p.GetPrevHash() != hashes[p.GetSeq()-1] || p.GetHash() != hashes[p.GetSeq()] {
			t.Errorf("transition %d: prev_hash %s, hash %s", p.GetSeq(), p.GetPrevHash(), p.GetHash())
		}
	}
	pack, err := c.runs.GetEvidencePack(context.Background(), &rbookv1.GetEvidencePackRequest{RunId: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(pack.GetEntries()) != 1 || pack.GetEntries()[0].GetTransitionHash() != hashes[3] ||
		!strings.Contains(pack.GetEvidencePackJson(), `"transition_hash": "`+hashes[3]+`"`) {
		t.Fatalf("GetEvidencePack = %v\n%s; want the entry to name transition 3's hash %s", pack.GetEntries(), pack.GetEvidencePackJson(), hashes[3])
	}
}

func TestControlPlaneAcceptsARunWithoutTheChain(t *testing.T) {
	c := startInProcess(t)
	const id = "R-unchained"
	startRun(t, c, id)
	for seq := int64(1); seq <= 3; seq++ {
		record(t, c, transition(id, seq, 0))
	}
	res, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: id})
	if err != nil || res.GetRun().GetChainHead() != "" || res.GetRun().GetLastSeq() != 3 {
		t.Fatalf("GetRun = last_seq %d, chain_head %q, %v; want 3 and none", res.GetRun().GetLastSeq(), res.GetRun().GetChainHead(), err)
	}
}

// TestChainedEvidenceTimeMustBeTheFormTheRecordServes: a chained transition's hash covers
// timestamp_utc as the executor sent it, and the record serves it as UTC with nine fraction
// digits; any other spelling of the same instant is refused, so the served entry and the
// hashed one never differ.
func TestChainedEvidenceTimeMustBeTheFormTheRecordServes(t *testing.T) {
	c := startInProcess(t)
	for i, ts := range []string{"2023-11-14T22:13:23+00:00", "2023-11-15T00:13:23.000000000+02:00", "2023-11-14T22:13:23Z", "2023-11-14T22:13:23.5Z"} {
		id := "R-chain-time-" + string(rune('a'+i))
		hashes := sealedRun(t, c, id, 4)
		p := transition(id, 5, 0)
		p.Evidence.TimestampUtc = ts
		seal(p, hashes[4])
		_, err := c.runs.RecordTransition(context.Background(), &rbookv1.RecordTransitionRequest{Transition: p, OwnerId: testOwner, Epoch: epochOf(t, c, id)})
		wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
		if !strings.Contains(err.Error(), "nine fraction digits") {
			t.Errorf("timestamp_utc %q: %v; want it to say the form", ts, err)
		}
	}
}
