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
