package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestStartRunCreatesOnceThenResumes(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	nr := newRun("RBOOK-20260512-demo-a1b2c3d4")
	nr.Bindings = json.RawMessage(`{"version":"1.10"}`)
	nr.EpicID = "T889"
	run, outcome, err := s.StartRun(ctx, nr)
	if err != nil || outcome != Created {
		t.Fatalf("StartRun = %v, %v", outcome, err)
	}
	want := Run{RunID: nr.RunID, PlaybookName: "demo", PlaybookHash: nr.PlaybookHash, Bindings: nr.Bindings,
		Status: RunRunning, IterationCounts: json.RawMessage("{}"), EpicID: "T889", StartedAt: t0,
		SchemaHash8: "a1b2c3d4", TotalSteps: 4, LastCompletedStepIndex: -1, StartedBy: "alice",
		UpdatedAt: run.UpdatedAt, Kind: KindRunbook, Owner: "alice", OwnerIDHash: OwnerIDHash(ownerID),
		LeaseEpoch: 1, LeaseSeconds: 60, LeaseExpiresAt: run.UpdatedAt.Add(DefaultLease)}
	if !reflect.DeepEqual(run, want) {
		t.Fatalf("run = %+v\nwant  %+v", run, want)
	}
	if run.UpdatedAt.IsZero() {
		t.Error("updated_at not set")
	}

	// Resume by the same owner id: the epoch is bumped and the lease renewed; who started the
	// run and when stay.
	again := nr
	again.StartedBy = "mallory"
	got, outcome, err := s.StartRun(ctx, again)
	if err != nil || outcome != Resumed {
		t.Fatalf("second StartRun = %v, %v; want Resumed", outcome, err)
	}
	want = run
	want.LeaseEpoch, want.UpdatedAt, want.LeaseExpiresAt = 2, got.UpdatedAt, got.UpdatedAt.Add(DefaultLease)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("resumed run = %+v, want %+v", got, want)
	}
}

// A resume with --allow-edited-runbook (AdoptPlan) gives the run the new plan digest and
// step count, and closes its pending gates for the old digest in the same commit; a resume
// with the same digest, or of a final run, changes nothing.
func TestStartRunAdoptsPlanOnResume(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	nr := newRun("R1")
	orig := mustStart(t, s, nr)
	mustRecord(t, s, tr("R1", 1))
	mustCreateApproval(t, s, newApproval("a1", "R1", "approve"))
	auto := newApproval("a2", "R1", "policy-gate")
	auto.AutoPassed = true
	mustCreateApproval(t, s, auto)
	got, _ := subscribe(s)

	resume := nr
	resume.PlaybookHash, resume.TotalSteps = hash("edited"), 6
	resume.StartedBy = "mallory" // not adopted: the run keeps who started it
	run, outcome, err := s.StartRun(ctx, resume)
	if err != nil || outcome != Resumed {
		t.Fatalf("resume = %v, %v", outcome, err)
	}
	if run.PlaybookHash != hash("edited") || run.TotalSteps != 6 || run.LastSeq != 1 || run.StartedBy != "alice" ||
		run.Status != RunRunning || !run.StartedAt.Equal(orig.StartedAt) {
		t.Fatalf("resumed run = %+v", run)
	}
	stored, _, err := s.GetRun(ctx, "R1")
	if err != nil || !reflect.DeepEqual(stored, run) {
		t.Fatalf("GetRun after the resume = %+v, %v; want %+v", stored, err, run)
	}
	a1, _ := s.GetApproval(ctx, "a1")
	if a1.Status != ApprovalCancelled || a1.DecidedBySource != SourceSuperseded || a1.Approver != "system" {
		t.Fatalf("the old digest's pending gate = %+v, want cancelled as superseded", a1)
	}
	if a2, _ := s.GetApproval(ctx, "a2"); a2.Status != ApprovalApproved {
		t.Fatalf("a decided gate changed: %+v", a2)
	}
	ch := got.snapshot()
	if len(ch) != 1 || len(ch[0].Runs) != 1 || ch[0].Runs[0].PlaybookHash != hash("edited") ||
		len(ch[0].Approvals) != 1 || ch[0].Approvals[0].ApprovalID != "a1" {
		t.Fatalf("published %+v, want one change with the run and its superseded gate", ch)
	}

	// The same digest again: only the lease moves (epoch 3); no gate is touched.
	again, _, err := s.StartRun(ctx, resume)
	if err != nil || again.LeaseEpoch != 3 || again.PlaybookHash != hash("edited") {
		t.Fatalf("second resume = %+v, %v", again, err)
	}
	if a1, _ := s.GetApproval(ctx, "a1"); a1.Status != ApprovalCancelled {
		t.Fatalf("a1 = %+v", a1)
	}

	// A final run keeps its plan: ErrRunFinal, with the run as stored.
	if _, err := s.CancelRun(ctx, "R1", "carol", "", t0); err != nil {
		t.Fatal(err)
	}
	resume.PlaybookHash = hash("edited again")
	if final, _, err := s.StartRun(ctx, resume); !errors.Is(err, ErrRunFinal) || final.PlaybookHash != hash("edited") {
		t.Fatalf("resume of a cancelled run = %+v, %v; want ErrRunFinal and its plan unchanged", final, err)
	}
}

func TestStartRunValidates(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mod := func(f func(*NewRun)) NewRun { nr := newRun("R1"); f(&nr); return nr }
	tests := []struct {
		name string
		nr   NewRun
		want string
	}{
		{"no run id", mod(func(n *NewRun) { n.RunID = "" }), "run_id is required"},
		{"long run id", mod(func(n *NewRun) { n.RunID = strings.Repeat("r", MaxIDBytes+1) }), "run_id is 257 bytes"},
		{"no name", mod(func(n *NewRun) { n.PlaybookName = "" }), "playbook_name is required"},
		{"no hash", mod(func(n *NewRun) { n.PlaybookHash = "" }), "playbook_hash is required"},
		{"bad utf8", mod(func(n *NewRun) { n.StartedBy = "\xff" }), "started_by is not valid UTF-8"},
		{"bad bindings", mod(func(n *NewRun) { n.Bindings = json.RawMessage(`{"a":`) }), "bindings is not valid JSON"},
		{"negative steps", mod(func(n *NewRun) { n.TotalSteps = -1 }), "total_steps is -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.StartRun(context.Background(), tt.nr)
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidArgument containing %q", err, tt.want)
			}
		})
	}
}

// demoTransitions is a run through a confirm gate to success, as the executor reports it.
func demoTransitions(run string) []Transition {
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	in := "query-health"
	return []Transition{
		{RunID: run, Seq: 1, Kind: KindRunStarted, At: at(1), StepIndex: -1, RunStatus: ExecInProgress},
		{RunID: run, Seq: 2, Kind: KindStepStarted, At: at(2), StepIndex: 0, StepName: "health", StepType: "check", RunStatus: ExecInProgress},
		{RunID: run, Seq: 3, Kind: KindStepFinished, At: at(3), StepIndex: 0, StepName: "health", StepType: "check", RunStatus: ExecInProgress,
			Evidence: &Evidence{StepName: "health", Type: "check", Input: &in, Output: `{"ok":true}`, Status: StepPass, At: at(3)}},
		{RunID: run, Seq: 4, Kind: KindStepStarted, At: at(4), StepIndex: 1, StepName: "approve", StepType: "confirm", RunStatus: ExecInProgress},
		{RunID: run, Seq: 5, Kind: KindGateOpened, At: at(5), StepIndex: 1, StepName: "approve", StepType: "confirm", RunStatus: ExecInProgress},
		{RunID: run, Seq: 6, Kind: KindGateDecided, At: at(6), StepIndex: 1, StepName: "approve", StepType: "confirm", RunStatus: ExecInProgress, Message: "approved by bob via rpc"},
		{RunID: run, Seq: 7, Kind: KindStepFinished, At: at(7), StepIndex: 1, StepName: "approve", StepType: "confirm", RunStatus: ExecInProgress,
			Evidence: &Evidence{StepName: "approve", Type: "confirm", Input: strp("user-confirmation"), Output: "yes", Status: StepPass, At: at(7)}},
		{RunID: run, Seq: 8, Kind: KindStepFinished, At: at(8), StepIndex: 2, StepName: "deploy", StepType: "deploy", RunStatus: ExecInProgress,
			LastDeployName: "rbook-deploy-1",
			Evidence:       &Evidence{StepName: "deploy", Type: "deploy", Input: nil, Output: "WOULD DEPLOY", Status: StepPass, At: at(8)}},
		{RunID: run, Seq: 9, Kind: KindRunFinished, At: at(9), StepIndex: -1, RunStatus: ExecCompleted},
	}
}

func TestRecordTransitionFollowsTheRun(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	ts := demoTransitions("R1")
	type state struct {
		status      RunStatus
		node        string
		lastDone    int
		completedAt time.Time
	}
	want := []state{
		{RunRunning, "", -1, time.Time{}},
		{RunRunning, "health", -1, time.Time{}},
		{RunRunning, "health", 0, time.Time{}},
		{RunRunning, "approve", 0, time.Time{}},
		{RunPaused, "approve", 0, time.Time{}}, // a gate is open
		{RunRunning, "approve", 0, time.Time{}},
		{RunRunning, "approve", 1, time.Time{}},
		{RunRunning, "deploy", 2, time.Time{}},
		{RunSucceeded, "", 2, ts[8].At},
	}
	for i, x := range ts {
		res := mustRecord(t, s, x)
		got := state{res.Progress.Status, res.Progress.CurrentNode, res.Progress.LastCompletedStepIndex, res.Progress.CompletedAt}
		if res.Duplicate || got != want[i] || res.Progress.LastSeq != x.Seq {
			t.Fatalf("after seq %d (%s): %+v dup=%v last_seq=%d, want %+v", x.Seq, x.Kind, got, res.Duplicate, res.Progress.LastSeq, want[i])
		}
	}
	run, stored, err := s.GetRun(ctx, "R1")
	if err != nil {
		t.Fatal(err)
	}
	if run.LastDeployName != "rbook-deploy-1" || run.Status != RunSucceeded || run.ErrorContext != nil ||
		run.CurrentNode != "" || !run.CompletedAt.Equal(ts[8].At) || run.LastSeq != 9 || run.LastCompletedStepIndex != 2 {
		t.Errorf("run = %+v", run)
	}
	// recorded_at is the store's clock in the committing transaction: set, increasing, and the
	// last one is the run's updated_at.
	if last := stored[len(stored)-1].RecordedAt; !run.UpdatedAt.Equal(last) {
		t.Errorf("run updated_at %v, want the last transition's recorded_at %v", run.UpdatedAt, last)
	}
	for i := len(stored) - 1; i >= 0; i-- {
		if i > 0 && !stored[i].RecordedAt.After(stored[i-1].RecordedAt) {
			t.Errorf("recorded_at of #%d (%v) is not after #%d's (%v)", i+1, stored[i].RecordedAt, i, stored[i-1].RecordedAt)
		}
		stored[i] = sent(t, stored[i])
	}
	if !reflect.DeepEqual(stored, ts) {
		t.Fatalf("stored transitions differ from recorded ones:\n got %+v\nwant %+v", stored, ts)
	}
}

func TestRecordTransitionIdempotencyAndOrder(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	ts := demoTransitions("R1")
	for _, x := range ts[:3] {
		mustRecord(t, s, x)
	}
	// The same transition again (a retry after a lost response): duplicate, no change; it
	// keeps the time it was first recorded.
	_, before, err := s.GetRun(ctx, "R1")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.RecordTransition(ctx, ts[2], fence1)
	if err != nil || !res.Duplicate || res.Progress.LastSeq != 3 {
		t.Fatalf("retry of seq 3 = %+v, %v; want duplicate at last_seq 3", res, err)
	}
	if _, after, err := s.GetRun(ctx, "R1"); err != nil || !after[2].RecordedAt.Equal(before[2].RecordedAt) {
		t.Fatalf("recorded_at of #3 after a replay = %v (%v), want %v", after[2].RecordedAt, err, before[2].RecordedAt)
	}
	// Times in another zone are the same instant.
	local := ts[1]
	local.At = local.At.In(time.FixedZone("X", 3600))
	if res, err := s.RecordTransition(ctx, local, fence1); err != nil || !res.Duplicate {
		t.Fatalf("retry in another time zone = %+v, %v", res, err)
	}
	conflicts := map[string]func(*Transition){
		"message":        func(x *Transition) { x.Message = "different" },
		"time":           func(x *Transition) { x.At = x.At.Add(time.Nanosecond) },
		"evidence":       func(x *Transition) { x.Evidence.Output = "changed" },
		"no evidence":    func(x *Transition) { x.Evidence = nil },
		"input nil":      func(x *Transition) { x.Evidence.Input = nil },
		"evidence input": func(x *Transition) { x.Evidence.Input = strp("other") },
		"run status":     func(x *Transition) { x.RunStatus = ExecFailed },
	}
	for name, change := range conflicts {
		x := ts[2]
		ev := *x.Evidence
		x.Evidence = &ev
		change(&x)
		if _, err := s.RecordTransition(ctx, x, fence1); !errors.Is(err, ErrConflict) {
			t.Errorf("seq 3 with different %s: err = %v, want ErrConflict", name, err)
		}
	}
	for _, seq := range []int64{5, 100} {
		_, err := s.RecordTransition(ctx, tr("R1", seq), fence1)
		if !errors.Is(err, ErrOutOfOrder) || !strings.Contains(err.Error(), "expects seq 4") {
			t.Errorf("seq %d after 3: err = %v, want ErrOutOfOrder expecting 4", seq, err)
		}
	}
	run, stored, err := s.GetRun(ctx, "R1")
	if err != nil || run.LastSeq != 3 || len(stored) != 3 {
		t.Fatalf("after refused writes: last_seq %d, %d transitions, %v; want 3, 3", run.LastSeq, len(stored), err)
	}
}

func TestRecordTransitionValidates(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	mod := func(f func(*Transition)) Transition {
		x := tr("R1", 1)
		x.Evidence = &Evidence{StepName: "s", Type: "check", Output: "o", Status: StepPass, At: t0}
		f(&x)
		return x
	}
	tests := []struct {
		name string
		x    Transition
		want string
	}{
		{"seq 0", mod(func(x *Transition) { x.Seq = 0 }), "seq is 0"},
		{"no kind", mod(func(x *Transition) { x.Kind = "" }), "kind is required"},
		{"no time", mod(func(x *Transition) { x.At = time.Time{} }), "at (transition time) is required"},
		{"step index", mod(func(x *Transition) { x.StepIndex = -2 }), "step_index is -2"},
		{"run status", mod(func(x *Transition) { x.RunStatus = "DONE" }), `run_status "DONE"`},
		{"step status", mod(func(x *Transition) { x.Evidence.Status = "OK" }), `evidence status "OK"`},
		{"huge output", mod(func(x *Transition) { x.Evidence.Output = strings.Repeat("x", MaxTextBytes+1) }), "evidence output is 1048577 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.RecordTransition(context.Background(), tt.x, fence1)
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidArgument containing %q", err, tt.want)
			}
		})
	}
}

func TestRecordTransitionFailedSetsErrorContext(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	mustRecord(t, s, tr("R1", 1))
	fail := Transition{RunID: "R1", Seq: 2, Kind: KindStepFinished, At: t0.Add(time.Minute), StepIndex: 0,
		StepName: "health", StepType: "check", RunStatus: ExecFailed, Message: "on_fail: halt",
		Evidence: &Evidence{StepName: "health", Type: "check", Output: "timeout", Status: StepTimedOut, At: t0.Add(time.Minute)}}
	res := mustRecord(t, s, fail)
	if res.Progress.Status != RunFailed || !res.Progress.CompletedAt.Equal(fail.At) || res.Progress.CurrentNode != "" {
		t.Fatalf("run = %+v", res.Progress)
	}
	run, _, err := s.GetRun(context.Background(), "R1")
	if err != nil || run.Status != RunFailed || !run.CompletedAt.Equal(fail.At) {
		t.Fatalf("GetRun = %+v, %v", run, err)
	}
	var ec map[string]any
	if err := json.Unmarshal(run.ErrorContext, &ec); err != nil {
		t.Fatalf("error_context %q: %v", run.ErrorContext, err)
	}
	if ec["step_name"] != "health" || ec["step_status"] != "TIMED_OUT" || ec["message"] != "on_fail: halt" || ec["seq"] != 2.0 {
		t.Fatalf("error_context = %v", ec)
	}
	// One final status: a later transition may not claim another one.
	done := tr("R1", 3)
	done.Kind, done.RunStatus = KindRunFinished, ExecCompleted
	if _, err := s.RecordTransition(context.Background(), done, fence1); !errors.Is(err, ErrRunFinal) {
		t.Fatalf("COMPLETED after FAILED = %v, want ErrRunFinal", err)
	}
}

func TestTransitionsFromSeq(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustStart(t, s, newRun("R2"))
	for seq := int64(1); seq <= 5; seq++ {
		mustRecord(t, s, tr("R1", seq))
	}
	seqs := func(ts []Transition) (out []int64) {
		for _, x := range ts {
			out = append(out, x.Seq)
		}
		return out
	}
	for _, tc := range []struct {
		from  int64
		limit int
		want  []int64
	}{{1, 0, []int64{1, 2, 3, 4, 5}}, {3, 0, []int64{3, 4, 5}}, {2, 2, []int64{2, 3}}, {6, 0, nil}} {
		ts, err := s.Transitions(ctx, "R1", tc.from, tc.limit)
		if err != nil || !reflect.DeepEqual(seqs(ts), tc.want) {
			t.Errorf("Transitions(from %d, limit %d) = %v, %v; want %v", tc.from, tc.limit, seqs(ts), err, tc.want)
		}
	}
	if ts, err := s.Transitions(ctx, "R2", 1, 0); err != nil || len(ts) != 0 {
		t.Errorf("run without transitions = %v, %v", ts, err)
	}
}

func TestListRunsFiltersAndPages(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	// 7 runs: started one minute apart; r2 and r3 share a start time (ties break on run_id).
	for i := 0; i < 7; i++ {
		nr := newRun(fmt.Sprintf("r%d", i))
		nr.StartedAt = t0.Add(time.Duration(i) * time.Minute)
		if i == 3 {
			nr.StartedAt = t0.Add(2 * time.Minute)
		}
		if i%2 == 1 {
			nr.PlaybookName = "prod"
		}
		mustStart(t, s, nr)
	}
	if _, err := s.CancelRun(ctx, "r5", "bob", "", t0); err != nil {
		t.Fatal(err)
	}
	ids := func(rs []Run) (out []string) {
		for _, r := range rs {
			out = append(out, r.RunID)
		}
		return out
	}
	all := func(f RunFilter) []string {
		var out []string
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("paging does not end")
			}
			p, err := s.ListRuns(ctx, f)
			if err != nil {
				t.Fatalf("ListRuns(%+v): %v", f, err)
			}
			if len(p.Runs) > f.PageSize && f.PageSize > 0 {
				t.Fatalf("page of %d runs, size %d", len(p.Runs), f.PageSize)
			}
			out = append(out, ids(p.Runs)...)
			if p.NextPageToken == "" {
				return out
			}
			f.PageToken = p.NextPageToken
		}
	}
	for _, tc := range []struct {
		f    RunFilter
		want []string
	}{
		{RunFilter{}, []string{"r6", "r5", "r4", "r3", "r2", "r1", "r0"}},
		{RunFilter{PageSize: 3}, []string{"r6", "r5", "r4", "r3", "r2", "r1", "r0"}},
		{RunFilter{PageSize: 1}, []string{"r6", "r5", "r4", "r3", "r2", "r1", "r0"}},
		{RunFilter{PlaybookName: "prod", PageSize: 2}, []string{"r5", "r3", "r1"}},
		{RunFilter{Status: RunCancelled}, []string{"r5"}},
		{RunFilter{Status: RunRunning, PlaybookName: "demo", PageSize: 2}, []string{"r6", "r4", "r2", "r0"}},
	} {
		if got := all(tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ListRuns(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
	first, err := s.ListRuns(ctx, RunFilter{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]RunFilter{
		"garbage token":      {PageToken: "not-a-token"},
		"other filter token": {PageToken: first.NextPageToken, Status: RunRunning},
		"huge token":         {PageToken: strings.Repeat("A", 5000)},
		"bad status":         {Status: "done"},
	} {
		if _, err := s.ListRuns(ctx, f); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
	if pageSize(0) != DefaultPageSize || pageSize(10_000) != MaxPageSize || pageSize(7) != 7 {
		t.Errorf("pageSize clamps wrong: %d %d %d", pageSize(0), pageSize(10_000), pageSize(7))
	}
}

func TestCancelRunClosesGatesAndIsFinal(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustStart(t, s, newRun("R2"))
	mustRecord(t, s, tr("R1", 1))
	gate := mustCreateApproval(t, s, newApproval("a1", "R1", "approve"))
	other := mustCreateApproval(t, s, newApproval("a2", "R2", "approve"))
	got, _ := subscribe(s)

	run, err := s.CancelRun(ctx, "R1", "carol", "wrong window", t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != RunCancelled || run.CancelledBy != "carol" || run.CancelReason != "wrong window" ||
		!run.CompletedAt.Equal(t0.Add(2*time.Minute)) || run.CurrentNode != "" {
		t.Fatalf("cancelled run = %+v", run)
	}
	a, err := s.GetApproval(ctx, gate.ApprovalID)
	if err != nil || a.Status != ApprovalCancelled || a.DecidedBySource != SourceCancelRun || a.Approver != "carol" {
		t.Fatalf("gate after cancel = %+v, %v", a, err)
	}
	if b, _ := s.GetApproval(ctx, other.ApprovalID); b.Status != ApprovalPending {
		t.Fatalf("another run's gate = %s, want pending", b.Status)
	}
	changes := got.snapshot()
	if len(changes) != 1 || len(changes[0].Runs) != 1 || len(changes[0].Approvals) != 1 ||
		changes[0].Approvals[0].Status != ApprovalCancelled {
		t.Fatalf("published %+v, want one change with the run and its cancelled gate", changes)
	}
	if _, err := s.CancelRun(ctx, "R1", "dave", "", time.Time{}); !errors.Is(err, ErrRunFinal) {
		t.Fatalf("second CancelRun = %v, want ErrRunFinal", err)
	}
	// The executor winds down after the cancel: its transitions are stored, the status stays.
	wind := tr("R1", 2)
	wind.Kind = KindGateDecided
	if res := mustRecord(t, s, wind); res.Progress.Status != RunCancelled {
		t.Fatalf("status after a late IN_PROGRESS transition = %s", res.Progress.Status)
	}
	audit := Transition{RunID: "R1", Seq: 3, Kind: KindRunFinished, At: t0.Add(3 * time.Minute), StepIndex: -1,
		RunStatus: ExecCancelled, Evidence: &Evidence{StepName: "CANCEL", Type: "cancel", Input: strp("rbook-deploy-1"),
			Output: "Cancel confirmed by user.", Status: StepPass, At: t0.Add(3 * time.Minute)}}
	if res := mustRecord(t, s, audit); res.Progress.Status != RunCancelled || !res.Progress.CompletedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("after the CANCEL audit: %+v", res.Progress)
	}
	done := tr("R1", 4)
	done.RunStatus = ExecCompleted
	if _, err := s.RecordTransition(ctx, done, fence1); !errors.Is(err, ErrRunFinal) {
		t.Fatalf("COMPLETED after cancel = %v, want ErrRunFinal", err)
	}
}

// A failed run's error_context keeps at most MaxErrorContextMessage bytes of the message, so
// a ListRuns page of failed runs stays small; the transition keeps it all.
func TestErrorContextMessageIsCapped(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	fail := tr("R1", 1)
	fail.Kind, fail.RunStatus, fail.StepIndex, fail.Message = KindRunFinished, ExecFailed, -1, strings.Repeat("é", 5000)
	mustRecord(t, s, fail)
	run, ts, err := s.GetRun(ctx, "R1")
	if err != nil {
		t.Fatal(err)
	}
	var ec struct{ Message string }
	if err := json.Unmarshal(run.ErrorContext, &ec); err != nil || len(ec.Message) > MaxErrorContextMessage+len("…") ||
		!strings.HasPrefix(ts[0].Message, ec.Message[:MaxErrorContextMessage-2]) || len(ts[0].Message) != 10000 {
		t.Fatalf("error_context message %d bytes (%v), transition message %d bytes", len(ec.Message), err, len(ts[0].Message))
	}
}
