package engine_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// A confirm step that declares an approver-input form opens its gate with the form, so
// every channel collects it, and keeps the values with the decision: the evidence output is
// the decision object and the report's gate row lists the values (docs/approver-inputs.md,
// "Runbook confirm steps"). A rejection carries no values and fails the step (on_fail).
func TestConfirmStepFormValuesAreKeptWithTheDecision(t *testing.T) {
	form := []gateinputs.Field{
		{Name: "target", Type: gateinputs.TypeEnum, Options: []string{"blue", "green"}, Required: true},
		{Name: "ticket", Type: gateinputs.TypeString},
	}
	for _, tc := range []struct {
		name     string
		decision engine.Decision
		status   engine.RunStatus
		output   string
		row      report.GateRow
	}{
		{"approved", engine.Decision{Verdict: engine.Approved, By: "alice", Reason: "go", Source: "control-plane", InputValues: map[string]string{"target": "blue"}},
			engine.RunCompleted,
			`{"approved":true,"by":"alice","inputs":{"target":"blue","ticket":""},"reason":"go","via":"control-plane"}`,
			report.GateRow{Name: "ok", Status: engine.StatusPass, Verdict: "approved", By: "alice", Via: "control-plane", Reason: "go", Inputs: "target=blue, ticket="}},
		{"rejected", engine.Decision{Verdict: engine.Rejected, By: "bob", Reason: "not now", Source: "terminal"},
			engine.RunFailed,
			`{"approved":false,"by":"bob","reason":"not now","via":"terminal"}`,
			report.GateRow{Name: "ok", Status: engine.StatusFail, Verdict: "rejected", By: "bob", Via: "terminal", Reason: "not now"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step := confirm("ok", runbook.OnFailHalt)
			step.Form = form
			var got []gateinputs.Field
			g := gateFunc(func(_ context.Context, req engine.GateRequest) (engine.Decision, error) {
				got = req.Inputs
				return tc.decision, nil
			})
			rec := &memRecorder{}
			res, err := newEngine(plan(step), newScripted(nil), g, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
			if err != nil || res.Status != tc.status {
				t.Fatalf("Run = %+v, %v; want %s", res, err, tc.status)
			}
			if !reflect.DeepEqual(got, form) {
				t.Errorf("the gate was asked for %+v, want the step's form %+v", got, form)
			}
			ev := rec.evidence()
			if len(ev) != 1 || ev[0].Output != tc.output || ev[0].Input == nil || *ev[0].Input != "user-confirmation" {
				t.Fatalf("evidence = %+v\nwant output %s", ev, tc.output)
			}
			if rows := report.GateRows(ev); len(rows) != 1 || rows[0] != tc.row {
				t.Errorf("gate rows = %+v\nwant %+v", rows, tc.row)
			}
		})
	}
}

// A confirm step without a form keeps the evidence of docs/spec/runbooks.md, "confirm": the
// answer typed, not an object.
func TestConfirmStepWithoutFormKeepsTheAnswerAsOutput(t *testing.T) {
	rec := &memRecorder{}
	res, err := newEngine(plan(confirm("ok", runbook.OnFailHalt)), newScripted(nil), approve, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if ev := rec.evidence(); len(ev) != 1 || ev[0].Output != "yes" {
		t.Fatalf("evidence = %+v, want output \"yes\"", ev)
	}
}
