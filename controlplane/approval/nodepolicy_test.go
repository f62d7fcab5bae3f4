package approval

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNodePinnedToAPersonIsNeverAutoPassed: an approval node whose policy is require-human is
// decided by a person under every policy (the built-in rules, a custom rule that approves
// everything, none at all), and a node policy that is not understood fails closed the same
// way; a node without one is still passed by the rules.
func TestNodePinnedToAPersonIsNeverAutoPassed(t *testing.T) {
	trustAll, err := LoadPlaybookPolicy(filepath.Join("testdata", "trust-all.policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	echo := []string{"echo deploying 1.2.3"} // the built-in read-only rule passes echo
	tests := []struct {
		name       string
		policy     *Policy
		node       map[string]any
		wantPassed bool
		wantRule   string
		wantReason string
	}{
		{"built-in rules, pinned", defaultPolicy(t), map[string]any{"id": "go-live", "policy": "require-human"}, false, NodePolicyRule,
			"the playbook pins this approval node to a person (policy: require-human); no auto-pass rule applies"},
		{"custom auto-approve everything, pinned", trustAll, map[string]any{"id": "go-live", "policy": "require-human"}, false, NodePolicyRule,
			"the playbook pins this approval node to a person (policy: require-human); no auto-pass rule applies"},
		{"no policy, pinned", nil, map[string]any{"policy": "require-human"}, false, NodePolicyRule,
			"the playbook pins this approval node to a person (policy: require-human); no auto-pass rule applies"},
		{"a node policy not understood fails closed", trustAll, map[string]any{"policy": "auto"}, false, NodePolicyRule,
			`the approval node's policy "auto" is not understood here, so a person decides (fail closed)`},
		{"built-in rules, not pinned", defaultPolicy(t), map[string]any{"id": "go-live"}, true, RuleReadOnly, "only read-only or QA commands, no agentic node"},
		{"an empty node policy is no pin", trustAll, map[string]any{"policy": ""}, true, "trust-all", "everything is fine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.policy.Evaluate(PolicyInput{Node: tt.node, Commands: echo})
			wantAction := ActionRequireHuman
			if tt.wantPassed {
				wantAction = ActionAutoApprove
			}
			if v.AutoPassed != tt.wantPassed || v.Rule != tt.wantRule || v.Action != wantAction || v.Reason != tt.wantReason {
				t.Errorf("verdict %+v, want auto_passed=%v rule %q action %q reason %q", v, tt.wantPassed, tt.wantRule, wantAction, tt.wantReason)
			}
		})
	}
}

// TestCustomRuleCannotTakeTheNodePolicyName: verdicts name a node's own pin "node-policy", so
// a --playbook-policy rule of that name is refused with its file and line.
func TestCustomRuleCannotTakeTheNodePolicyName(t *testing.T) {
	file := filepath.Join("testdata", "named-node-policy.policy.yaml")
	_, err := LoadPlaybookPolicy(file)
	if err == nil || !strings.Contains(err.Error(), file+":2:") || !strings.Contains(err.Error(), `rules[0].name: "node-policy" names a node's own policy`) {
		t.Fatalf("err = %v", err)
	}
}
