package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// PolicyWarnings checks a gate policy against the auth file at `rbook serve` start, so that
// an entry such as `approvers: [nobody]` is not accepted without a word: an approver entry that no
// approver line of the auth file can ever match, and a rule that needs more distinct approvers
// than its entries can supply, so its gates could only time out. `github:<login>` entries are
// not checked: a GitHub reviewer may be that login without an auth-file line; nor are the
// other channel identities (slack:, oidc:, email:), a "person:<id>" the people directory dir
// has, or a "group:<name>" it defines (docs/people.md): people sign in or vote through
// channels outside the auth file. A "person:<id>" dir does not have is named. It returns one
// message per problem, naming the rule; nil when all is well or either file is absent.
func PolicyWarnings(p *approval.GatePolicy, a *Authenticator, authFile string, dir *people.Directory) []string {
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

// ModeLine is the part of rbook serve's address line that says what is on: auth (authFile),
// the OIDC words oidc, the gate policy (policyFile; its warnings, PolicyWarnings and
// NotifyListWarnings, are logged to cfg.Logger), the notifications (notifyFile; its
// EscalationNotifyWarnings too), then the
// words of the other optional features that are on (extra; "" entries are off).
func ModeLine(cfg *Config, authFile, policyFile, notifyFile, oidc string, extra ...string) string {
	mode := "no auth"
	if cfg.Auth != nil {
		mode = "auth file " + authFile
	}
	if oidc != "" && cfg.Auth != nil {
		mode += ", " + oidc
	} else if oidc != "" {
		mode = oidc
	}
	if cfg.GatePolicy != nil {
		mode += fmt.Sprintf(", gate policy %s (%s)", policyFile, yamlerr.Plural(len(cfg.GatePolicy.Rules), "rule", "rules"))
		if authFile == "" {
			cfg.Logger.Warn("gate policy without --auth-file: approver names are unverified, so only the number of approvals applies")
		}
		for _, w := range PolicyWarnings(cfg.GatePolicy, cfg.Auth, authFile, cfg.People) {
			cfg.Logger.Warn(w)
		}
		for _, w := range NotifyListWarnings(cfg.GatePolicy, cfg.People) {
			cfg.Logger.Warn(w)
		}
	}
	if cfg.Notify != nil {
		mode += fmt.Sprintf(", notifications %s (%s, %s)", notifyFile, yamlerr.Plural(len(cfg.Notify.Config.Names), "channel", "channels"),
			yamlerr.Plural(len(cfg.Notify.Config.Routes), "route", "routes"))
		for _, w := range EscalationNotifyWarnings(cfg.Notify.Config, cfg.People) {
			cfg.Logger.Warn(w)
		}
	}
	for _, on := range extra {
		if on != "" {
			mode += ", " + on
		}
	}
	return mode
}
