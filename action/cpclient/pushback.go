package cpclient

import (
	"fmt"

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
