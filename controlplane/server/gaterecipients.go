package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// gateRecipients fills an email channel's recipients of a gate event m from the gate's
// policy (docs/notifications.md, "Who a gate's policy notifies"): ApproverEmails from the
// approvers captured on the gate's row when it opened, NotifyEmails from the notify list of
// the gate-policy rule that matches the gate now (the policy this control plane started
// with), and for a gate.escalated event the escalation step's notify list. All go through
// the people directory (emailsOf). A row that cannot be read leaves the approvers out,
// logged: the mail still goes to everyone else.
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
	if step := n.escalationStep(*m); step != nil {
		m.NotifyEmails = append(m.NotifyEmails, n.s.emailsOf(step.Notify)...) // each address is mailed once (notify.Email)
	}
}

// escalationStep is the escalation step a gate.escalated message reports, as the route its
// gate's gate.opened takes under this control plane's config; nil for another message or a
// step the config no longer has. Its notify list is mailed by the step's email channels
// (docs/notifications.md, "Escalation").
func (n *notifier) escalationStep(m notify.Message) *notify.EscalationStep {
	g := m.Data.Gate
	if m.Kind != store.EventGateEscalated || g == nil || g.Escalation == nil {
		return nil
	}
	r := n.cfg.RouteFor(store.EventGateOpened, m.Data)
	if r == nil || g.Escalation.Step < 1 || g.Escalation.Step > len(r.Escalate) {
		return nil
	}
	return &r.Escalate[g.Escalation.Step-1]
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

// NotifyListWarnings names the gate-policy notify entries that can reach nobody by mail
// (docs/notifications.md, "Who a gate's policy notifies"): a "person:<id>" the people
// directory dir does not have or whose person has no email: identity, a "group:<name>" it
// does not define or none of whose members has one. rbook serve logs them at start; nil
// when every entry has an address (or p is nil).
func NotifyListWarnings(p *approval.GatePolicy, dir *people.Directory) []string {
	if p == nil {
		return nil
	}
	var out []string
	for i, r := range p.Rules {
		for _, e := range r.Notify {
			if why := unreachable(e, dir); why != "" {
				out = append(out, fmt.Sprintf("%s rule %d (line %d): notify %q %s, so it is mailed nothing", p.File, i+1, r.Line, e, why))
			}
		}
	}
	return out
}

// EscalationNotifyWarnings names the entries of escalation steps' notify lists that can
// reach nobody by mail, as NotifyListWarnings does for a gate policy's (docs/notifications.md,
// "Escalation"). rbook serve logs them at start; nil when every entry has an address (or c
// is nil).
func EscalationNotifyWarnings(c *notify.Config, dir *people.Directory) []string {
	if c == nil {
		return nil
	}
	routes := slices.Clone(c.Routes)
	if c.Default != nil {
		routes = append(routes, *c.Default)
	}
	var out []string
	for _, r := range routes {
		for i, step := range r.Escalate {
			for _, e := range step.Notify {
				if why := unreachable(e, dir); why != "" {
					out = append(out, fmt.Sprintf("%s:%d: escalation step %d: notify %q %s, so it is mailed nothing", c.File, step.NotifyLine, i+1, e, why))
				}
			}
		}
	}
	return out
}

// unreachable says why notify entry e reaches nobody by mail under the people directory dir
// ("" when it reaches someone, and for an "email:" entry).
func unreachable(e string, dir *people.Directory) string {
	kind, name, _ := strings.Cut(e, ":")
	switch kind {
	case "person":
		if per, ok := dir.ByID(name); !ok {
			return "is not a person of the people directory (--people)"
		} else if per.Email() == "" {
			return "has no email: identity in the people directory"
		}
	case "group":
		if !slices.ContainsFunc(dir.GroupMembers(name), func(per people.Person) bool { return per.Email() != "" }) {
			return "is no group of the people directory (--people) with a member who has an email: identity"
		}
	}
	return ""
}
