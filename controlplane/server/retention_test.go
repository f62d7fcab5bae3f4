package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// finishedRun starts run id in st, records a step and ends it with status at end; with
// gate it also opens a gate that bob approves before the end.
func finishedRun(t *testing.T, st *store.Store, id string, status store.ExecStatus, end time.Time, gate bool) {
	t.Helper()
	ctx := context.Background()
	fence := store.Fence{OwnerIDHash: store.OwnerIDHash(testOwner), Epoch: 1}
	if _, _, err := st.StartRun(ctx, store.NewRun{RunID: id, PlaybookName: "deploy", PlaybookHash: digest(id), TotalSteps: 2,
		StartedBy: "alice", StartedAt: end.Add(-time.Minute), OwnerIDHash: fence.OwnerIDHash, Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordTransition(ctx, store.Transition{RunID: id, Seq: 1, Kind: store.KindStepStarted, At: end.Add(-time.Minute),
		StepName: "check", StepType: "check", RunStatus: store.ExecInProgress}, fence); err != nil {
		t.Fatal(err)
	}
	if gate {
		if _, _, err := st.CreateApproval(ctx, store.NewApproval{ApprovalID: "gate-" + id, RunID: id, NodeID: "confirm", StepIndex: 1,
			TokenHash: digest("token-" + id), RequestedAt: end.Add(-time.Minute), PlanDigest: digest(id), Prompt: "Ship it?"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.DecideApproval(ctx, store.Decision{ApprovalID: "gate-" + id, Verdict: store.ApprovalApproved, Approver: "bob",
			Reason: "looks good", At: end.Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.RecordTransition(ctx, store.Transition{RunID: id, Seq: 2, Kind: store.KindRunFinished, At: end, StepIndex: -1,
		RunStatus: status}, fence); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionExportsThenPrunesOldRunsAndKeepsOnesItCouldNotExport(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	finishedRun(t, st, "old-approved", store.ExecCompleted, now.Add(-48*time.Hour), true)
	finishedRun(t, st, "old-unexportable", store.ExecFailed, now.Add(-48*time.Hour), false)
	finishedRun(t, st, "recent", store.ExecCompleted, now.Add(-time.Hour), false)
	dir := t.TempDir()
	// A folder where the file should go: the export's rename fails, so the run must stay.
	if err := os.Mkdir(filepath.Join(dir, server.ExportFileName("old-unexportable")), 0o700); err != nil {
		t.Fatal(err)
	}
	passes := make(chan int, 1)
	defer server.SetPrunePassHook(func(n int) { passes <- n })()
	s, err := server.New(st, server.Options{Secret: []byte(testSecret),
		Retention: &server.RetentionOptions{Age: 24 * time.Hour, ExportDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := <-passes; n != 1 {
		t.Fatalf("the first pass pruned %d runs, want 1", n)
	}
	var left []string
	page, err := st.ListRuns(context.Background(), store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Runs {
		left = append(left, r.RunID)
	}
	slices.Sort(left)
	if want := []string{"old-unexportable", "recent"}; !slices.Equal(left, want) {
		t.Errorf("runs left %v, want %v", left, want)
	}
	body, err := os.ReadFile(filepath.Join(dir, "old-approved.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Format string `json:"format"`
		Run    struct {
			RunID  string `json:"run_id"`
			Status string `json:"status"`
		} `json:"run"`
		Transitions []struct {
			Seq  string `json:"seq"`
			Kind string `json:"kind"`
		} `json:"transitions"`
		Approvals []struct {
			ApprovalID string `json:"approval_id"`
			Status     string `json:"status"`
			Votes      []struct {
				Approver string `json:"approver"`
				Reason   string `json:"reason"`
			} `json:"votes"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("export file: %v\n%s", err, body)
	}
	if got.Format != server.ExportFormat || got.Run.RunID != "old-approved" || got.Run.Status != "RUN_STATUS_SUCCEEDED" {
		t.Errorf("export header %q run %q %q", got.Format, got.Run.RunID, got.Run.Status)
	}
	if len(got.Transitions) != 2 || got.Transitions[0].Seq != "1" || got.Transitions[1].Kind != "TRANSITION_KIND_RUN_FINISHED" {
		t.Errorf("exported transitions %+v, want seq 1 and a run_finished", got.Transitions)
	}
	if len(got.Approvals) != 1 || got.Approvals[0].ApprovalID != "gate-old-approved" || got.Approvals[0].Status != "APPROVAL_STATUS_APPROVED" ||
		len(got.Approvals[0].Votes) != 1 || got.Approvals[0].Votes[0].Approver != "bob" || got.Approvals[0].Votes[0].Reason != "looks good" {
		t.Errorf("exported approvals %+v, want gate-old-approved approved by bob", got.Approvals)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"old-approved.json", "old-unexportable.json"}; !slices.Equal(names, want) {
		t.Errorf("export folder holds %v, want %v (no temporary file left)", names, want)
	}
}

func TestExportFileNameStaysInsideTheFolder(t *testing.T) {
	for id, want := range map[string]string{
		"run-1_a.b": "run-1_a.b.json",
		"../x":      "%2E.%2Fx.json",
		".hidden":   "%2Ehidden.json",
		`a\b:c`:     "a%5Cb%3Ac.json",
	} {
		if got := server.ExportFileName(id); got != want {
			t.Errorf("ExportFileName(%q) = %q, want %q", id, got, want)
		}
	}
}
