package cpclient

import (
	"fmt"
	"strings"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// PushBackLine is what a channel says after a rejection that sent a playbook run back
// (Approval.redo_from; docs/push-back.md): "Sent back to 'build' (iteration 1); the run
// re-executes from there and the gate opens again (iteration 2) when it gets back." It is ""
// for any other decision.
func PushBackLine(a *rbookv1.Approval) string {
	if a.GetRedoFrom() == "" || a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED {
		return ""
	}
	it := max(a.GetIteration(), 1)
	return fmt.Sprintf("Sent back to '%s' (iteration %d); the run re-executes from there and the gate opens again (iteration %d) when it gets back.",
		a.GetRedoFrom(), it, it+1)
}

// PushBackHint is what a waiting run says under an open gate that declares rewind targets
// (docs/push-back.md): how a reviewer sends the run back, by approval id (never the token,
// a secret), one line ending in a newline; "" for a gate without rewind targets.
func PushBackHint(a *rbookv1.Approval) string {
	ts := a.GetRewindTargets()
	if len(ts) == 0 {
		return ""
	}
	return fmt.Sprintf("A reviewer may send the run back instead of rejecting it: rbook reject %s --redo-from %s --reason \"<comment its nodes read>\" (rewind targets: %s; docs/push-back.md)\n",
		a.GetApprovalId(), ts[0], strings.Join(ts, ", "))
}
