package report

import (
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
)

// A confirm step's output is read as a decision object only when it agrees with the step's
// status: an answer typed at a terminal that looks like one stays the answer.
func TestConfirmOutputIsADecisionOnlyWhenItAgreesWithTheStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    engine.Evidence
		want GateRow
	}{
		{"a form's approval", engine.Evidence{StepName: "ok", Type: "confirm", Status: engine.StatusPass,
			Output: `{"approved":true,"by":"alice","via":"control-plane","reason":"go","inputs":{"target":"blue"}}`},
			GateRow{Name: "ok", Status: engine.StatusPass, Verdict: "approved", By: "alice", Via: "control-plane", Reason: "go", Inputs: "target=blue"}},
		{"a typed object that claims an approval of a failed gate", engine.Evidence{StepName: "ok", Type: "confirm", Status: engine.StatusFail,
			Output: `{"approved":true,"by":"mallory"}`},
			GateRow{Name: "ok", Status: engine.StatusFail, Reason: `{"approved":true,"by":"mallory"}`}},
	} {
		if got := GateRows([]engine.Evidence{tc.e}); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: rows = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
