package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// servePlaybook holds rbook serve's auto-pass policy flags (docs/approvals.md, "Auto-pass policy").
var servePlaybook struct {
	policyFile string
	shadow     bool
}

// addServePlaybookFlags registers --playbook-policy and --policy-shadow on cmd.
func addServePlaybookFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&servePlaybook.policyFile, "playbook-policy", "",
		"YAML auto-pass rules for playbook approval nodes (CEL conditions), evaluated before the default rules")
	fs.BoolVar(&servePlaybook.shadow, "policy-shadow", false,
		"record what the auto-pass policy would decide on each playbook gate, but let a human decide every one")
}

// applyServePlaybook loads the auto-pass policy (the --playbook-policy rules, then
// approval.DefaultPolicyRules()) into cfg and sets shadow mode. It returns the words for the
// listening line ("" with the defaults and no shadow mode). Errors: the policy file's, as
// file:line with the rule's name.
func applyServePlaybook(cfg *server.Config) (string, error) {
	p, err := approval.LoadPlaybookPolicy(servePlaybook.policyFile)
	if err != nil {
		return "", err
	}
	cfg.PlaybookPolicy, cfg.PolicyShadow = p, servePlaybook.shadow
	mode := ""
	if servePlaybook.policyFile != "" {
		custom := len(p.Rules()) - len(approval.DefaultPolicyRules())
		mode = fmt.Sprintf("playbook policy %s (%s + defaults)", servePlaybook.policyFile, yamlerr.Plural(custom, "rule", "rules"))
	}
	if servePlaybook.shadow {
		if mode == "" {
			mode = "playbook policy defaults"
		}
		mode += " in shadow mode"
	}
	return mode, nil
}
