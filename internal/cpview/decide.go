package cpview

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// IsApprovalID reports whether arg names a gate by approval id ("a-" and 26 lowercase base32
// characters, controlplane/server newApprovalID) rather than by token: `rbook approve ARG`
// takes an ARG of this shape for an approval id, anything else for a token.
func IsApprovalID(arg string) bool { return approvalIDRE.MatchString(arg) }

// Decision is one `rbook approve/reject` (and `rbook playbook approve/reject`): the approval by
// Token or ApprovalID, the approver's Reason and Approver identity, the approver-input Inputs
// (approve only, docs/approver-inputs.md) and RedoFrom (reject only, docs/push-back.md).
type Decision struct {
	Approve                                       bool
	Token, ApprovalID, Reason, Approver, RedoFrom string
	Inputs                                        map[string]string
}

// Decide sends d to the control plane through c and writes what happened to out: the
// approval as proto JSON when asJSON, else the M-of-N tally of a gate still pending
// (TallyLine), or "<noun> '<gate>' of run <id> approved|rejected by <who>." followed by the
// approver-input values and the push-back line when there are any. noun names what was
// decided ("Gate", "Approval node"). rpcErr is the control plane's refusal (nothing is
// written then); err is a failure to write out.
func Decide(ctx context.Context, c *cpclient.Client, out io.Writer, d Decision, asJSON bool, noun string) (rpcErr, err error) {
	var a *rbookv1.Approval
	past := "rejected"
	if d.Approve {
		past = "approved"
		resp, err := c.Approvals.Approve(ctx, &rbookv1.ApproveRequest{Token: d.Token, ApprovalId: d.ApprovalID, Reason: d.Reason, Approver: d.Approver, Inputs: d.Inputs})
		if err != nil {
			return err, nil
		}
		a = resp.GetApproval()
	} else {
		resp, err := c.Approvals.Reject(ctx, &rbookv1.RejectRequest{Token: d.Token, ApprovalId: d.ApprovalID, Reason: d.Reason, Approver: d.Approver, RedoFrom: d.RedoFrom})
		if err != nil {
			return err, nil
		}
		a = resp.GetApproval()
	}
	if asJSON {
		return nil, PrintJSON(out, a)
	}
	if a.GetStatus() == rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		fmt.Fprintln(out, TallyLine(a))
		return nil, nil
	}
	fmt.Fprintf(out, "%s '%s' of run %s %s by %s.\n", noun, a.GetStepName(), a.GetRunId(), past, a.GetApprover())
	for _, line := range []string{InputValuesLine(a), cpclient.PushBackLine(a)} {
		if line != "" {
			fmt.Fprintln(out, line)
		}
	}
	return nil, nil
}

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

// TallyLine says where a pending M-of-N gate stands after a vote, e.g.
// "approval a-…: 1 of 2 approvals (alice); waiting for 1 more".
func TallyLine(a *rbookv1.Approval) string {
	by := approvedBy(a)
	need := max(int(a.GetApprovalsRequired()), 1)
	who := ""
	if len(by) > 0 {
		who = " (" + strings.Join(by, ", ") + ")"
	}
	return fmt.Sprintf("approval %s: %d of %d approvals%s; waiting for %d more", a.GetApprovalId(), len(by), need, who, need-len(by))
}
