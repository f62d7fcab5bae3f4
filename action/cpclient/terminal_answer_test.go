package cpclient

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// typedGate answers at once with verdict v and the typed input.
type typedGate struct {
	v     engine.Verdict
	input string
}

func (l typedGate) Await(context.Context, engine.GateRequest) (engine.Decision, error) {
	return engine.Decision{Verdict: l.v, Input: l.input, Source: "terminal"}, nil
}

// The control plane refuses control characters in a reason,
// so a terminal answer with an ESC sequence or a tab (an arrow key at the prompt) is sent with
// them replaced, and the gate is still decided instead of halting the run.
func TestTerminalAnswerWithControlCharacters(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	g := &Gate{C: c, Local: typedGate{v: engine.Rejected, input: "ye\x1b[Ds\tno\u202e"}, Who: "ann", Announce: func(*rbookv1.Approval, string) {}}
	d, err := g.Await(t.Context(), engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	want := "answered at the executor's terminal: ye\uFFFD[Ds\uFFFDno\uFFFD"
	if d.Verdict != engine.Rejected || d.Reason != want || strings.ContainsAny(d.Reason, "\x1b\t\u202e") {
		t.Fatalf("decision %+v, want reason %q", d, want)
	}
}

// A terminal answer that the control plane records first carries the policy verdict the gate
// opened with, exactly as the watch's copy of the decision does: the step's evidence names the
// rule whichever of the two reports the decision first.
func TestTerminalAnswerCarriesTheGatesPolicyVerdict(t *testing.T) {
	f := newFake()
	f.policy = &rbookv1.PolicyDecision{Rule: "node-policy", Action: "require-human", Reason: "the node says policy: require-human"}
	c := serve(t, f)
	if _, err := c.Approvals.RequestApproval(t.Context(), &rbookv1.RequestApprovalRequest{RunId: "R", StepName: "g"}); err != nil {
		t.Fatal(err)
	}
	g := &Gate{C: c, Who: "ann"}
	d, err := g.decideLocally(t.Context(), "tok-1", engine.Decision{Verdict: engine.Approved, Input: "yes", Source: "terminal"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Policy == nil || d.Policy.Rule != "node-policy" || d.Policy.AutoPassed || d.Policy.Action != "require-human" {
		t.Fatalf("decision's policy %+v, want rule node-policy, require-human, not auto-passed", d.Policy)
	}
	if d.By != "ann" || d.Reason != "answered at the executor's terminal: yes" {
		t.Fatalf("decision %+v", d)
	}
}
