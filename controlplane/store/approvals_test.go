package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCreateApproval(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	na := newApproval("a1", "R1", "approve")
	a := mustCreateApproval(t, s, na)
	want := Approval{ApprovalID: "a1", RunID: "R1", NodeID: "approve", StepIndex: 2, TokenHash: na.TokenHash,
		Status: ApprovalPending, RequestedAt: na.RequestedAt, Deadline: na.Deadline, PlanDigest: na.PlanDigest,
		Prompt: "Deploy to prod?", OnFail: "rollback", ApprovalsRequired: 1, AllowedApprovers: []string{}, Votes: []Vote{}, Iteration: 1}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("approval = %+v\nwant       %+v", a, want)
	}
	byHash, err := s.GetApprovalByTokenHash(ctx, na.TokenHash)
	if err != nil || !reflect.DeepEqual(byHash, a) {
		t.Fatalf("GetApprovalByTokenHash = %+v, %v", byHash, err)
	}
	byID, err := s.GetApproval(ctx, "a1")
	if err != nil || !reflect.DeepEqual(byID, a) {
		t.Fatalf("GetApproval = %+v, %v", byID, err)
	}
	if page, err := s.ListApprovals(ctx, ApprovalFilter{RunID: "R1"}); err != nil || len(page.Approvals) != 1 ||
		page.Approvals[0].OnFail != "rollback" {
		t.Fatalf("ListApprovals = %+v, %v; want a1 with on_fail rollback", page.Approvals, err)
	}

	// A retried request for the same gate and plan finds the open approval.
	retry := newApproval("a1-retry", "R1", "approve")
	got, created, err := s.CreateApproval(ctx, retry)
	if err != nil || created || got.ApprovalID != "a1" {
		t.Fatalf("retry = %+v created=%v %v; want a1, not created", got, created, err)
	}
	if _, err := s.GetApproval(ctx, "a1-retry"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("retry stored a second approval: %v", err)
	}

	// Errors.
	dupToken := newApproval("a3", "R1", "other-gate")
	dupToken.TokenHash = na.TokenHash
	if _, _, err := s.CreateApproval(ctx, dupToken); !errors.Is(err, ErrConflict) {
		t.Errorf("reused token hash: err = %v, want ErrConflict", err)
	}
	dupID := newApproval("a1", "R1", "other-gate")
	if _, _, err := s.CreateApproval(ctx, dupID); !errors.Is(err, ErrConflict) {
		t.Errorf("reused approval id: err = %v, want ErrConflict", err)
	}
	if _, _, err := s.CreateApproval(ctx, newApproval("a4", "nope", "g")); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown run: err = %v, want ErrNotFound", err)
	}
	otherPlan := newApproval("a7", "R1", "g7")
	otherPlan.PlanDigest = hash("another plan")
	if _, _, err := s.CreateApproval(ctx, otherPlan); !errors.Is(err, ErrPlanDigestMismatch) {
		t.Errorf("a plan digest that is not the run's: err = %v, want ErrPlanDigestMismatch", err)
	}
	if _, err := s.GetApproval(ctx, "a7"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused approval was stored: %v", err)
	}
	for name, f := range map[string]func(*NewApproval){
		"raw token, not a hash": func(n *NewApproval) { n.TokenHash = "eyJ2IjoxfQ.c2ln" },
		"upper-case hash":       func(n *NewApproval) { n.TokenHash = strings.ToUpper(n.TokenHash) },
		"no node":               func(n *NewApproval) { n.NodeID = "" },
		"deadline before":       func(n *NewApproval) { n.Deadline = n.RequestedAt },
		"unknown on_fail":       func(n *NewApproval) { n.OnFail = "retry" },
	} {
		bad := newApproval("a5", "R1", "g5")
		f(&bad)
		if _, _, err := s.CreateApproval(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := s.CancelRun(ctx, "R1", "x", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateApproval(ctx, newApproval("a6", "R1", "g6")); !errors.Is(err, ErrRunFinal) {
		t.Errorf("gate on a cancelled run: err = %v, want ErrRunFinal", err)
	}
}

func TestCreateApprovalAutoPassed(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	na := newApproval("a1", "R1", "approve")
	na.AutoPassed, na.Reason = true, "build dist unchanged from last green run"
	a := mustCreateApproval(t, s, na)
	if a.Status != ApprovalApproved || !a.AutoPassed || a.Approver != SourcePolicy || a.DecidedBySource != SourcePolicy ||
		a.Reason != na.Reason || !a.DecidedAt.Equal(na.RequestedAt) {
		t.Fatalf("auto-passed approval = %+v", a)
	}
}

func TestDecideApproval(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	a := mustCreateApproval(t, s, newApproval("a1", "R1", "approve"))
	at := t0.Add(5 * time.Minute)
	got, err := s.DecideApproval(ctx, Decision{ApprovalID: a.ApprovalID, Verdict: ApprovalApproved, Approver: "bob",
		Reason: "LGTM", Source: "rpc", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ApprovalApproved || got.Approver != "bob" || got.Reason != "LGTM" || got.DecidedBySource != "rpc" ||
		!got.DecidedAt.Equal(at) {
		t.Fatalf("decided = %+v", got)
	}
	// A second decision, of any verdict, is refused and reports the standing one.
	for _, v := range []ApprovalStatus{ApprovalApproved, ApprovalRejected, ApprovalCancelled} {
		cur, err := s.DecideApproval(ctx, Decision{ApprovalID: a.ApprovalID, Verdict: v, Approver: "eve", At: at})
		if !errors.Is(err, ErrAlreadyDecided) || cur.Approver != "bob" || cur.Status != ApprovalApproved {
			t.Fatalf("second decision (%s) = %+v, %v; want ErrAlreadyDecided with bob's approval", v, cur, err)
		}
	}
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "nope", Verdict: ApprovalApproved}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown approval: err = %v", err)
	}
	for _, v := range []ApprovalStatus{"", ApprovalPending, "yes"} {
		if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: v}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("verdict %q: err = %v, want ErrInvalidArgument", v, err)
		}
	}
}

func TestDecideApprovalRefusesRunStarter(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1")) // started by alice
	mustCreateApproval(t, s, newApproval("a1", "R1", "approve"))
	var seen RunStarter
	d := Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "alice", Authorize: func(a Approval, st RunStarter) error {
		seen = st
		if st.StartedBy == "alice" && a.Status == ApprovalPending {
			return ErrSelfApproval
		}
		return nil
	}}
	if _, err := s.DecideApproval(ctx, d); !errors.Is(err, ErrSelfApproval) {
		t.Fatalf("self-approval = %v, want ErrSelfApproval", err)
	}
	if seen.StartedBy != "alice" {
		t.Fatalf("Authorize saw the starter %+v, want started_by alice", seen)
	}
	if a, _ := s.GetApproval(ctx, "a1"); a.Status != ApprovalPending {
		t.Fatalf("refused self-approval changed the gate to %s", a.Status)
	}
	// Without the refusal, it is allowed.
	d.Authorize = nil
	d.Verdict = ApprovalRejected
	if a, err := s.DecideApproval(ctx, d); err != nil || a.Status != ApprovalRejected {
		t.Fatalf("self-rejection = %+v, %v", a, err)
	}
}

func TestDecideApprovalAfterDeadlineExpiresIt(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	na := newApproval("a1", "R1", "approve")
	mustCreateApproval(t, s, na)
	got, _ := subscribe(s)
	a, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: na.Deadline})
	if !errors.Is(err, ErrExpired) || !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("approve at the deadline = %v, want ErrExpired (an ErrAlreadyDecided)", err)
	}
	// Issue 7, item 4: an expired gate is decided rejected, "timed out after …".
	want := "timed out after " + na.Deadline.Sub(na.RequestedAt).String()
	if a.Status != ApprovalRejected || a.DecidedBySource != SourceDeadline || !a.DecidedAt.Equal(na.Deadline) ||
		a.Approver != "system" || a.Reason != want || len(a.Votes) != 0 {
		t.Fatalf("approval = %+v, want rejected at its deadline, %q, no vote", a, want)
	}
	if ch := got.snapshot(); len(ch) != 1 || ch[0].Approvals[0].Status != ApprovalRejected {
		t.Fatalf("published %+v, want the expiry", ch)
	}
}

func TestExpireDueApprovalsAndNextDeadline(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	if _, ok, err := s.NextDeadline(ctx); err != nil || ok {
		t.Fatalf("NextDeadline with no gates = %v, %v", ok, err)
	}
	for i, d := range []time.Duration{10 * time.Minute, 20 * time.Minute, 0} {
		run := fmt.Sprintf("R%d", i)
		mustStart(t, s, newRun(run))
		na := newApproval(fmt.Sprintf("a%d", i), run, "approve")
		na.Deadline = time.Time{}
		if d > 0 {
			na.Deadline = t0.Add(d)
		}
		mustCreateApproval(t, s, na)
	}
	next, ok, err := s.NextDeadline(ctx)
	if err != nil || !ok || !next.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("NextDeadline = %v %v %v, want t0+10m", next, ok, err)
	}
	expired, err := s.ExpireDueApprovals(ctx, t0.Add(15*time.Minute))
	if err != nil || len(expired) != 1 || expired[0].ApprovalID != "a0" || expired[0].Status != ApprovalRejected ||
		expired[0].Reason != "timed out after 9m0s" {
		t.Fatalf("ExpireDueApprovals(t0+15m) = %+v, %v; want a0 rejected, timed out after 9m0s", expired, err)
	}
	if next, _, _ := s.NextDeadline(ctx); !next.Equal(t0.Add(20 * time.Minute)) {
		t.Fatalf("NextDeadline after expiry = %v", next)
	}
	if again, err := s.ExpireDueApprovals(ctx, t0.Add(15*time.Minute)); err != nil || len(again) != 0 {
		t.Fatalf("second sweep = %+v, %v; want nothing", again, err)
	}
	expired, err = s.ExpireDueApprovals(ctx, t0.Add(100*time.Hour))
	if err != nil || len(expired) != 1 || expired[0].ApprovalID != "a1" {
		t.Fatalf("late sweep = %+v, %v; want a1 only (a2 has no deadline)", expired, err)
	}
}

func TestListApprovals(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustStart(t, s, newRun("R2"))
	for i := 0; i < 5; i++ {
		run := "R1"
		if i >= 3 {
			run = "R2"
		}
		na := newApproval(fmt.Sprintf("a%d", i), run, fmt.Sprintf("gate-%d", i))
		na.RequestedAt = t0.Add(time.Duration(i) * time.Minute)
		mustCreateApproval(t, s, na)
	}
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalRejected, At: t0}); err != nil {
		t.Fatal(err)
	}
	list := func(f ApprovalFilter) []string {
		var out []string
		for {
			p, err := s.ListApprovals(ctx, f)
			if err != nil {
				t.Fatalf("ListApprovals(%+v): %v", f, err)
			}
			for _, a := range p.Approvals {
				out = append(out, a.ApprovalID)
			}
			if p.NextPageToken == "" {
				return out
			}
			f.PageToken = p.NextPageToken
		}
	}
	for _, tc := range []struct {
		f    ApprovalFilter
		want []string
	}{
		{ApprovalFilter{}, []string{"a4", "a3", "a2", "a1", "a0"}},
		{ApprovalFilter{PageSize: 2}, []string{"a4", "a3", "a2", "a1", "a0"}},
		{ApprovalFilter{Status: ApprovalPending, PageSize: 1}, []string{"a4", "a3", "a2", "a0"}},
		{ApprovalFilter{RunID: "R1", Status: ApprovalPending}, []string{"a2", "a0"}},
		{ApprovalFilter{Status: ApprovalRejected}, []string{"a1"}},
	} {
		if got := list(tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ListApprovals(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
	p, _ := s.ListApprovals(ctx, ApprovalFilter{PageSize: 2})
	if _, err := s.ListApprovals(ctx, ApprovalFilter{PageToken: p.NextPageToken, RunID: "R2"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("token from another filter: err = %v", err)
	}
	if _, err := s.ListApprovals(ctx, ApprovalFilter{Status: "TIMED_OUT"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad status: err = %v", err)
	}
}

// An approve of a gate bound to a plan digest the run no longer executes (a gate that
// outlived its plan, e.g. from before migration 0002) does not decide it: the gate is closed
// as superseded and the call says why. A rejection is still taken.
func TestDecideApprovalRefusesAStalePlanDigest(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustCreateApproval(t, s, newApproval("a1", "R1", "approve"))
	mustCreateApproval(t, s, newApproval("a2", "R1", "other"))
	// The run moved to another plan without its gates being closed.
	if _, err := s.writer.ExecContext(ctx, "UPDATE playbook_runs SET playbook_hash = ? WHERE run_id = 'R1'", hash("plan v2")); err != nil {
		t.Fatal(err)
	}
	got, _ := subscribe(s)
	a, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: t0.Add(2 * time.Minute)})
	if !errors.Is(err, ErrPlanDigestMismatch) {
		t.Fatalf("approve of a stale gate = %v, want ErrPlanDigestMismatch", err)
	}
	if a.Status != ApprovalCancelled || a.DecidedBySource != SourceSuperseded || a.Approver != "system" {
		t.Fatalf("stale gate after the refused approve = %+v, want cancelled as superseded", a)
	}
	if ch := got.snapshot(); len(ch) != 1 || len(ch[0].Approvals) != 1 || ch[0].Approvals[0].ApprovalID != "a1" {
		t.Fatalf("published %+v, want the superseded gate", ch)
	}
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob"}); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("second approve = %v, want ErrAlreadyDecided", err)
	}
	if b, err := s.DecideApproval(ctx, Decision{ApprovalID: "a2", Verdict: ApprovalRejected, Approver: "bob", At: t0.Add(2 * time.Minute)}); err != nil ||
		b.Status != ApprovalRejected {
		t.Fatalf("reject of a stale gate = %+v, %v; want rejected", b, err)
	}
}
