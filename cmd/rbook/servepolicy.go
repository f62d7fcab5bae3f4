package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// policyWarnings checks a gate policy against the auth file at `rbook serve` start (a new-user
// review found `approvers: [nobody]` accepted without a word): an approver entry that no
// approver line of the auth file can ever match, and a rule that needs more distinct approvers
// than its entries can supply, so its gates could only time out. `github:<login>` entries are
// not checked: a GitHub reviewer may be that login without an auth-file line; nor are the
// other channel identities (slack:, oidc:, email:), a "person:<id>" the people directory dir
// has, or a "group:<name>" it defines (docs/people.md): people sign in or vote through
// channels outside the auth file. A "person:<id>" dir does not have is named. It returns one
// message per problem, naming the rule; nil when all is well or either file is absent.
func policyWarnings(p *approval.GatePolicy, a *server.Authenticator, authFile string, dir *people.Directory) []string {
	if p == nil || a == nil {
		return nil
	}
	approvers := a.Approvers()
	var out []string
	for i, r := range p.Rules {
		if len(r.Approvers) == 0 {
			continue
		}
		rule := fmt.Sprintf("%s rule %d (line %d)", p.File, i+1, r.Line)
		who := map[string]bool{} // distinct identities the entries can match
		open := false            // a github: entry: reviewers outside the auth file may count
		for _, entry := range r.Approvers {
			var matched []string
			switch {
			case strings.HasPrefix(entry, "person:"):
				if _, ok := dir.ByID(strings.TrimPrefix(entry, "person:")); !ok {
					out = append(out, fmt.Sprintf("%s: approver %q is not a person of the people directory (--people), so it can never decide a gate", rule, entry))
				}
				open = true
				continue
			case strings.HasPrefix(entry, "github:"), strings.HasPrefix(entry, "slack:"), strings.HasPrefix(entry, "oidc:"),
				strings.HasPrefix(entry, "email:"), strings.HasPrefix(entry, "group:") && dir.HasGroup(strings.TrimPrefix(entry, "group:")):
				open = true
				continue
			case strings.HasPrefix(entry, "group:"):
				g := strings.TrimPrefix(entry, "group:")
				for _, c := range approvers {
					if slices.Contains(c.Groups, g) {
						matched = append(matched, c.Identity)
					}
				}
			default:
				for _, c := range approvers {
					if c.Identity == entry {
						matched = append(matched, c.Identity)
					}
				}
			}
			if len(matched) == 0 {
				out = append(out, fmt.Sprintf("%s: approver %q matches no approver line of %s, so it can never decide a gate", rule, entry, authFile))
			}
			for _, m := range matched {
				who[m] = true
			}
		}
		if !open && len(who) < r.Approvals {
			out = append(out, fmt.Sprintf("%s needs %d distinct approvers, but only %s of %s may approve its gates: they can only time out",
				rule, r.Approvals, yamlerr.Plural(len(who), "identity", "identities"), authFile))
		}
	}
	return out
}
