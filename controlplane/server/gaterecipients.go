package server

import (
	"context"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/controlplane/notify"
)

// gateRecipients fills an email channel's recipients of a gate event m from the gate's
// policy (docs/notifications.md, "Who a gate's policy notifies"): ApproverEmails from the
// approvers captured on the gate's row when it opened, NotifyEmails from the notify list of
// the gate-policy rule that matches the gate now (the policy this control plane started
// with). Both go through the people directory (emailsOf). A row that cannot be read leaves
// the approvers out, logged: the mail still goes to everyone else.
func (n *notifier) gateRecipients(ctx context.Context, m *notify.Message) {
	g := m.Data.Gate
	if g == nil || !notify.IsGateEvent(m.Kind) {
		return
	}
	if a, err := n.s.st.GetApproval(ctx, g.ApprovalID); err != nil {
		n.log.Warn("reading a gate's approvers for its mail failed; mailing the others", "event", m.ID, "err", err)
	} else {
		m.ApproverEmails = n.s.emailsOf(a.AllowedApprovers)
	}
	m.NotifyEmails = n.s.emailsOf(n.s.opts.GatePolicy.For(m.Data.Runbook, g.Node).Notify)
}

// emailsOf is the email addresses of gate-policy entries, each once, in order:
// "person:<id>" is that person's email identity, "group:<name>" each member's of that
// people-directory group, "email:<address>" that address, any other entry an identity,
// mailed at its person's address or at itself when it is one (RequesterEmail). Entries with no address (an auth-file group, an
// identity with no person and no address) reach nobody by mail.
func (s *Server) emailsOf(entries []string) []string {
	var out []string
	add := func(a string) {
		if a != "" && !slices.ContainsFunc(out, func(x string) bool { return strings.EqualFold(x, a) }) {
			out = append(out, a)
		}
	}
	for _, e := range entries {
		switch kind, name, _ := strings.Cut(e, ":"); kind {
		case "person":
			if p, ok := s.people.ByID(name); ok {
				add(p.Email())
			}
		case "group":
			for _, p := range s.people.GroupMembers(name) {
				add(p.Email())
			}
		case "email":
			add(RequesterEmailOf(e)) // that address, not another of its person's
		default:
			add(s.RequesterEmail(e))
		}
	}
	return out
}
