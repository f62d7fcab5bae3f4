package main

import (
	"fmt"
	"strings"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// approvalIDRE is the shape of an approval id (controlplane/server newApprovalID: "a-" and 26
// lowercase base32 characters). `rbook approve ARG` takes an ARG of this shape for an
// approval id, anything else for a token.
var approvalIDRE = lazyregexp.New(`^a-[a-z2-7]{26}$`)

// isApprovalID reports whether arg names a gate by approval id rather than by token.
func isApprovalID(arg string) bool { return approvalIDRE.MatchString(arg) }

// approvedBy lists the identities that approved a, in vote order.
func approvedBy(a *rbookv1.Approval) []string {
	var out []string
	for _, v := range a.GetVotes() {
		if v.GetVerdict() == rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
			out = append(out, v.GetApprover())
		}
	}
	return out
}

// tallyLine says where a pending M-of-N gate stands after a vote, e.g.
// "approval a-…: 1 of 2 approvals (alice); waiting for 1 more".
func tallyLine(a *rbookv1.Approval) string {
	by := approvedBy(a)
	need := max(int(a.GetApprovalsRequired()), 1)
	who := ""
	if len(by) > 0 {
		who = " (" + strings.Join(by, ", ") + ")"
	}
	return fmt.Sprintf("approval %s: %d of %d approvals%s; waiting for %d more", a.GetApprovalId(), len(by), need, who, need-len(by))
}
