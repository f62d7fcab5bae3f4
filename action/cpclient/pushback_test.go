package cpclient

import (
	"testing"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// A rejected approval with redo_from becomes the engine's push-back decision (the node and the
// iteration), and the channels' lines say where the run went and how to send it back; a plain
// rejection and a gate without rewind targets say nothing of it (docs/push-back.md).
func TestPushBackDecisionAndLines(t *testing.T) {
	sent := &rbookv1.Approval{ApprovalId: "a-1", Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED, Approver: "bob",
		Reason: "add a test", RedoFrom: "build", Iteration: 2, RewindTargets: []string{"build", "test"}}
	d, err := decisionOf(sent)
	if err != nil || d.RedoFrom != "build" || d.Iteration != 2 || d.Reason != "add a test" || d.By != "bob" {
		t.Fatalf("decisionOf = %+v, %v; want a rejection sent back to build at iteration 2", d, err)
	}
	for _, tc := range []struct {
		name       string
		a          *rbookv1.Approval
		line, hint string
	}{
		{"sent back", sent,
			"Sent back to 'build' (iteration 2); the run re-executes from there and the gate opens again (iteration 3) when it gets back.",
			"A reviewer may send the run back instead of rejecting it: rbook reject a-1 --redo-from build --reason \"<comment its nodes read>\" (rewind targets: build, test; docs/push-back.md)\n"},
		{"plain rejection", &rbookv1.Approval{ApprovalId: "a-2", Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED}, "", ""},
	} {
		if got := PushBackLine(tc.a); got != tc.line {
			t.Errorf("%s: PushBackLine = %q, want %q", tc.name, got, tc.line)
		}
		if got := PushBackHint(tc.a); got != tc.hint {
			t.Errorf("%s: PushBackHint = %q, want %q", tc.name, got, tc.hint)
		}
	}
}
