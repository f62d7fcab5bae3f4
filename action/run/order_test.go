package run

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// recordingRuns is a control plane that grants every StartRun its lease (epoch 1), takes every
// transition, and notes each call in order: "StartRun RUN_ID" and "RecordTransitions RUN_ID
// seqs FIRST-LAST epoch E".
type recordingRuns struct {
	rbookv1connect.UnimplementedRunServiceHandler
	mu    sync.Mutex
	calls []string
}

func (r *recordingRuns) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *recordingRuns) StartRun(_ context.Context, req *rbookv1.StartRunRequest) (*rbookv1.StartRunResponse, error) {
	r.note("StartRun " + req.GetRunId())
	return &rbookv1.StartRunResponse{Created: true, Run: &rbookv1.Run{RunId: req.GetRunId(), Lease: &rbookv1.RunLease{Owner: req.GetOwnerId(), Epoch: 1}}}, nil
}

func (r *recordingRuns) RecordTransitions(_ context.Context, req *rbookv1.RecordTransitionsRequest) (*rbookv1.RecordTransitionsResponse, error) {
	ts := req.GetTransitions()
	if len(ts) == 0 {
		return &rbookv1.RecordTransitionsResponse{}, nil
	}
	first, last := ts[0], ts[len(ts)-1]
	r.note(fmt.Sprintf("RecordTransitions %s seqs %d-%d epoch %d", first.GetRunId(), first.GetSeq(), last.GetSeq(), req.GetEpoch()))
	return &rbookv1.RecordTransitionsResponse{AckedSeq: last.GetSeq()}, nil
}

// serve starts r on loopback (Connect over h2c, as a control plane serves) until the test ends.
func (r *recordingRuns) serve(t *testing.T) string {
	t.Helper()
	path, h := rbookv1connect.NewRunServiceHandler(r)
	mux := http.NewServeMux()
	mux.Handle(path, h)
	return serveRuns(t, mux)
}

func (r *recordingRuns) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// callsOf are the calls of run runID in calls (each call's second word is its run id).
func callsOf(calls []string, runID string) []string {
	return slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return strings.Fields(c)[1] != runID })
}

// TestFinalRunOutboxIsDeliveredThenTheNewRunStarts: a final run whose last transitions never
// reached its control plane has them delivered first; only then does the new run start on
// that control plane and record its own, and the final run's state is kept beside the new one.
func TestFinalRunOutboxIsDeliveredThenTheNewRunStarts(t *testing.T) {
	cp := &recordingRuns{}
	o, term := testdataOptions(t, "deploy", cp.serve(t))
	const oldID = "RBOOK-20260101-deploy-00000001"
	final := &state.State{
		RunID: oldID, RunbookName: "deploy", RunStatus: engine.RunCompleted, LastCompletedStepIndex: 0, TotalSteps: 1, Seq: 2,
		EvidencePack: []engine.Evidence{}, StartedUTC: "2026-01-01T00:00:00Z", RunbookHash: o.Plan.ContentHash, SchemaHash8: o.Plan.SchemaHash8,
		ControlPlane: o.ControlPlane, OwnerID: state.NewOwnerID(), LeaseEpoch: 1,
		Outbox: []engine.Transition{{RunID: oldID, Seq: 2, Kind: engine.TransitionRunFinished, StepIndex: -1, RunStatus: engine.RunCompleted}},
	}
	if err := state.Write(o.Plan.StateFilePath, final); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), o); err != nil {
		t.Fatalf("Run = %v; want the new run to end", err)
	}
	if term.finished == nil || term.finished.RunStatus != engine.RunCompleted || term.finished.RunID == oldID {
		t.Fatalf("finished %+v; want a new run COMPLETED", term.finished)
	}
	newID := term.finished.RunID
	calls := cp.log()
	want := []string{"RecordTransitions " + oldID + " seqs 2-2 epoch 1", "StartRun " + newID}
	if len(calls) < 3 || !slices.Equal(calls[:2], want) {
		t.Fatalf("calls %q; want %q first, then the new run's transitions", calls, want)
	}
	prev, err := state.Read(o.Plan.StateFilePath + ".prev-" + oldID)
	if err != nil || len(prev.Outbox) != 0 || prev.RunStatus != engine.RunCompleted {
		t.Errorf("the final run's kept state: %+v, %v; want it COMPLETED with its outbox delivered", prev, err)
	}
	if got := callsOf(calls, newID); len(got) < 2 || got[0] != "StartRun "+newID {
		t.Errorf("the new run's calls %q; want StartRun first", got)
	}
}

// TestControlPlaneRecorderJoinsAfterTheLease: on a control plane that grants the lease, the
// run's first call is StartRun, and every transition it records there follows it, in seq
// order from 1, fenced by the granted epoch; the control plane ends up with the state file's
// every transition.
func TestControlPlaneRecorderJoinsAfterTheLease(t *testing.T) {
	cp := &recordingRuns{}
	o, term := testdataOptions(t, "deploy", cp.serve(t))
	if err := Run(context.Background(), o); err != nil {
		t.Fatalf("Run = %v; want the run to end", err)
	}
	if term.finished == nil || term.finished.RunStatus != engine.RunCompleted {
		t.Fatalf("finished %+v; want the run COMPLETED", term.finished)
	}
	calls := cp.log()
	if len(calls) < 2 || calls[0] != "StartRun "+term.finished.RunID {
		t.Fatalf("calls %q; want StartRun of run %s first", calls, term.finished.RunID)
	}
	next := int64(1)
	for _, c := range calls[1:] {
		var id string
		var first, last, epoch int64
		if _, err := fmt.Sscanf(c, "RecordTransitions %s seqs %d-%d epoch %d", &id, &first, &last, &epoch); err != nil {
			t.Fatalf("call %q after StartRun; want only RecordTransitions (%v)", c, err)
		}
		if id != term.finished.RunID || first != next || epoch != 1 {
			t.Errorf("call %q; want run %s from seq %d under epoch 1", c, term.finished.RunID, next)
		}
		next = last + 1
	}
	st, err := state.Read(o.Plan.StateFilePath)
	if err != nil || next-1 != st.Seq || len(st.Outbox) != 0 {
		t.Errorf("the control plane holds seqs 1-%d; the state file: %+v, %v; want every transition delivered", next-1, st, err)
	}
}
