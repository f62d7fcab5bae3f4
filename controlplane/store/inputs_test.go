package store

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

var targetForm = []gateinputs.Field{
	{Name: "target", Type: gateinputs.TypeEnum, Required: true, Options: []string{"blue", "green"}},
	{Name: "note", Type: gateinputs.TypeString, HasDefault: true, Default: "none"},
}

// The form is stored with the gate; an approve with invalid values is refused in the deciding
// transaction with the field named and writes nothing; a valid one keeps the validated values
// on the vote and on the decided gate (docs/approver-inputs.md).
func TestApproverInputsAreValidatedWithTheVoteAndKept(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	na := newApproval("a1", "R1", "review")
	na.Inputs = targetForm
	a := mustCreateApproval(t, s, na)
	if len(a.Inputs) != 2 || a.Inputs[0].Options[1] != "green" || !a.Inputs[1].HasDefault || a.InputValues != nil {
		t.Fatalf("opened gate inputs = %+v, values %v; want the form and no values", a.Inputs, a.InputValues)
	}
	at := t0.Add(2 * time.Minute)
	bad, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: at,
		InputValues: map[string]string{"target": "red"}})
	var ie *gateinputs.Error
	if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &ie) || ie.Field != "target" || bad.Status != ApprovalPending {
		t.Fatalf("invalid approve = %+v, %v; want ErrInvalidArgument naming target, gate pending", bad, err)
	}
	if got, err := s.GetApproval(ctx, "a1"); err != nil || got.Status != ApprovalPending || len(got.Votes) != 0 {
		t.Fatalf("after the refusal = %+v, %v; want pending with no vote", got, err)
	}
	done, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: at,
		InputValues: map[string]string{"target": "blue"}})
	want := map[string]string{"target": "blue", "note": "none"}
	if err != nil || done.Status != ApprovalApproved || !maps.Equal(done.InputValues, want) ||
		len(done.Votes) != 1 || !maps.Equal(done.Votes[0].InputValues, want) {
		t.Fatalf("valid approve = %+v, %v; want approved with %v on the gate and the vote", done, err, want)
	}
	if got, err := s.GetApproval(ctx, "a1"); err != nil || !maps.Equal(got.InputValues, want) {
		t.Fatalf("GetApproval values = %v, %v; want %v", got.InputValues, err, want)
	}
}

// A gate without a form refuses values, and a rejection needs none.
func TestApproverInputsOnAGateWithoutAFormAreRefused(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustCreateApproval(t, s, newApproval("a1", "R1", "gate"))
	_, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: t0.Add(time.Minute),
		InputValues: map[string]string{"x": "1"}})
	var ie *gateinputs.Error
	if !errors.As(err, &ie) || ie.Field != "x" {
		t.Fatalf("approve with a value = %v; want the field x refused", err)
	}
	na := newApproval("a2", "R1", "review")
	na.Inputs = targetForm
	mustCreateApproval(t, s, na)
	r, err := s.DecideApproval(ctx, Decision{ApprovalID: "a2", Verdict: ApprovalRejected, Approver: "bob", At: t0.Add(time.Minute)})
	if err != nil || r.Status != ApprovalRejected || r.InputValues != nil {
		t.Fatalf("reject = %+v, %v; want rejected with no values", r, err)
	}
}

// A form that gateinputs.Check refuses is not stored.
func TestApproverInputsInvalidFormIsRefusedAtCreate(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	na := newApproval("a1", "R1", "review")
	na.Inputs = []gateinputs.Field{{Name: "Bad", Type: gateinputs.TypeString}}
	if _, _, err := s.CreateApproval(context.Background(), na); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("CreateApproval = %v; want ErrInvalidArgument", err)
	}
}
