package steps

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// After "yes" the terminal asks for each input field; Enter takes the default, an invalid
// value is explained and asked again, and the decision carries the validated values.
func TestTerminalGateAsksForEachInputAfterYes(t *testing.T) {
	lines := NewLines(strings.NewReader("yes\nred\nblue\n\nmaybe\ntrue\n"))
	var out strings.Builder
	g := &TerminalGate{In: lines, Out: &out, Who: "ann"}
	req := engine.GateRequest{StepName: "review", Deadline: time.Now().Add(time.Hour), Inputs: []gateinputs.Field{
		{Name: "target", Type: gateinputs.TypeEnum, Options: []string{"blue", "green"}, Required: true, Description: "which slot"},
		{Name: "replicas", Type: gateinputs.TypeNumber, HasDefault: true, Default: "3"},
		{Name: "dry_run", Type: gateinputs.TypeBoolean},
	}}
	d, err := g.Await(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"target": "blue", "replicas": "3", "dry_run": "true"}
	if d.Verdict != engine.Approved || !maps.Equal(d.InputValues, want) {
		t.Fatalf("decision = %+v; want approved with %v", d, want)
	}
	for _, s := range []string{
		"target (one of blue, green; required) — which slot: ",
		`must be one of blue, green, got "red"`,
		"replicas (a number) [3]: ",
		"dry_run (true or false): ",
		`must be true or false, got "maybe"`,
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("terminal output lacks %q:\n%s", s, out.String())
		}
	}
}

// A rejection asks for no input.
func TestTerminalGateRejectionAsksForNoInput(t *testing.T) {
	lines := NewLines(strings.NewReader("no\n"))
	var out strings.Builder
	g := &TerminalGate{In: lines, Out: &out, Who: "ann"}
	d, err := g.Await(context.Background(), engine.GateRequest{StepName: "review", Deadline: time.Now().Add(time.Hour),
		Inputs: []gateinputs.Field{{Name: "target", Type: gateinputs.TypeString, Required: true}}})
	if err != nil || d.Verdict != engine.Rejected || d.InputValues != nil || strings.Contains(out.String(), "target") {
		t.Fatalf("decision = %+v, %v, output %q; want a rejection without inputs", d, err, out.String())
	}
}
