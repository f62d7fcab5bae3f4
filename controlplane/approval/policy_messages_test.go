package approval_test

import (
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/approval"
)

// TestGatePolicyMessages: a YAML syntax error in the gate policy names
// file:line even on line 1 (yaml.v3 leaves that line out) and points at a tab in the
// indentation; messages carry no internal identifiers and count in the right number.
func TestGatePolicyMessages(t *testing.T) {
	many := "rules:\n  - approvers: [" + strings.Repeat("a,", approval.MaxPolicyApprovers) + "z]\n"
	for _, c := range []struct{ body, want string }{
		{"\trules:\n", "gp6.yaml:1: found character that cannot start any token (indent YAML with spaces, not tabs)"},
		{"rules:\n\t- gate: x\n", "gp6.yaml:2: found character that cannot start any token (indent YAML with spaces, not tabs)"},
		{"rules:\n  - gate: x\n\tapprovals: 2\n", "gp6.yaml:3: found a tab character that violates indentation (indent YAML with spaces, not tabs)"},
		{"rules: b: c\n", "gp6.yaml:1: mapping values are not allowed in this context"},
		{"rules:\n  - approvals: 11\n", "gp6.yaml:2: rules[0].approvals: 11 is not in 1..10"},
		{"rules:\n  - approvals: 2\n    approvers: [alice]\n", "gp6.yaml:2: rules[0]: approvals is 2 but only 1 approver is listed, so no gate could ever open"},
		{many, "gp6.yaml:2: rules[0].approvers: 101 entries, over the limit of 100"},
	} {
		_, err := approval.ParseGatePolicy([]byte(c.body), "gp6.yaml")
		if err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.body, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "(Max") || strings.Contains(err.Error(), "yaml: ")) {
			t.Errorf("%q: internal wording in %q", c.body, err)
		}
	}
	if approval.MaxPolicyApprovers != 100 {
		t.Fatalf("MaxPolicyApprovers = %d: update the expected message", approval.MaxPolicyApprovers)
	}
}
