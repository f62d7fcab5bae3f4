package serveconfig

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// playbookFlags are rbook serve's auto-pass policy flags (docs/approvals.md, "Auto-pass policy").
type playbookFlags struct {
	policyFile string
	shadow     bool
}

// add registers --playbook-policy and --policy-shadow on fs.
func (pb *playbookFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&pb.policyFile, "playbook-policy", "",
		"YAML auto-pass rules for playbook approval nodes (CEL conditions), evaluated before the default rules")
	fs.BoolVar(&pb.shadow, "policy-shadow", false,
		"record what the auto-pass policy would decide on each playbook gate, but let a human decide every one")
}

// apply loads the auto-pass policy (the --playbook-policy rules, then
// approval.DefaultPolicyRules()) into cfg and sets shadow mode. It returns the words for the
// listening line ("" with the defaults and no shadow mode). Errors: the policy file's, as
// file:line with the rule's name.
func (pb *playbookFlags) apply(cfg *server.Config) (string, error) {
	p, err := approval.LoadPlaybookPolicy(pb.policyFile)
	if err != nil {
		return "", err
	}
	cfg.PlaybookPolicy, cfg.PolicyShadow = p, pb.shadow
	mode := ""
	if pb.policyFile != "" {
		custom := len(p.Rules()) - len(approval.DefaultPolicyRules())
		mode = fmt.Sprintf("playbook policy %s (%s + defaults)", pb.policyFile, yamlerr.Plural(custom, "rule", "rules"))
	}
	if pb.shadow {
		if mode == "" {
			mode = "playbook policy defaults"
		}
		mode += " in shadow mode"
	}
	return mode, nil
}
