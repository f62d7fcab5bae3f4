package store

import (
	"context"
	"testing"
	"time"
)

// twoOfTwoGate opens gate a1 of run R1 needing two approvals, on a fresh store.
func twoOfTwoGate(t *testing.T) (*Store, context.Context) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	twoOfN(t, s, "a1", 2)
	return s, context.Background()
}

// docs/people.md, "Counting": a gate's M-of-N counts distinct people; one person approving
// through two identities counts once, and the decided gate names identities and people.
func TestOnePersonApprovingThroughTwoIdentitiesCountsOnce(t *testing.T) {
	s, ctx := twoOfTwoGate(t)
	at := t0.Add(2 * time.Minute)
	vote := func(approver, person string) Approval {
		t.Helper()
		at = at.Add(time.Second)
		a, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: approver, Person: person,
			Source: "rpc", At: at, Verified: true})
		if err != nil {
			t.Fatalf("approve by %s: %v", approver, err)
		}
		return a
	}
	first := vote("github:alice-gh", "alice")
	if first.Status != ApprovalPending || len(first.Votes) != 1 || first.Votes[0].Person != "alice" || first.Person != "" {
		t.Fatalf("alice's first approval = %+v; want pending, her vote recorded with her person", first)
	}
	again := vote("alice", "alice")
	if again.Status != ApprovalPending || len(again.Votes) != 1 || len(again.ApprovedPeople()) != 1 {
		t.Fatalf("alice through her auth-file identity = %+v; want still one vote, pending", again)
	}
	done := vote("github:carol", "")
	if done.Status != ApprovalApproved || done.Approver != "github:alice-gh, github:carol" || done.Person != "alice, github:carol" {
		t.Fatalf("second person = %+v; want approved by github:alice-gh, github:carol (people alice, github:carol)", done)
	}
	got, err := s.GetApproval(ctx, "a1")
	if err != nil || got.Person != "alice, github:carol" || got.Votes[1].Person != "" || got.Votes[1].Key() != "github:carol" {
		t.Fatalf("GetApproval = %+v, %v; want the people stored", got, err)
	}
}

// docs/people.md, "Counting": an identity with no person counts as itself, so two such
// identities are two approvals.
func TestIdentitiesWithoutAPersonCountAsThemselves(t *testing.T) {
	s, ctx := twoOfTwoGate(t)
	at := t0.Add(2 * time.Minute)
	for i, who := range []string{"bob", "github:bob"} {
		a, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: who, At: at, Verified: true})
		if want := []ApprovalStatus{ApprovalPending, ApprovalApproved}[i]; err != nil || a.Status != want {
			t.Fatalf("approve by %s = %s, %v; want %s", who, a.Status, err, want)
		}
		if i == 1 && a.Person != "bob, github:bob" {
			t.Fatalf("person = %q, want each identity as its own person", a.Person)
		}
	}
}

// A reject records its person on the gate.
func TestRejectRecordsThePerson(t *testing.T) {
	s, ctx := twoOfTwoGate(t)
	r, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalRejected, Approver: "slack:T1/U1",
		Person: "alice", Reason: "no", At: t0.Add(time.Minute), Verified: true})
	if err != nil || r.Status != ApprovalRejected || r.Person != "alice" || r.Votes[0].Person != "alice" {
		t.Fatalf("reject = %+v, %v; want rejected by person alice", r, err)
	}
}
