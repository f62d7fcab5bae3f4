package engine

import "testing"

// TestPolicyNoteIsOneSentence: what gate_decided's message says about the policy
// when a person decides: one clause naming the rule and its reason, or that no rule matched;
// a rule that failed to evaluate says so once. Auto-pass and shadow auto-approve are as before.
func TestPolicyNoteIsOneSentence(t *testing.T) {
	for _, tc := range []struct {
		p    *PolicyDecision
		want string
	}{
		{nil, ""},
		{&PolicyDecision{Action: "require-human", Reason: "no auto-pass rule matched: a human decides"}, "; policy: a person decides (no auto-pass rule matched)"},
		{&PolicyDecision{Rule: "git-push", Action: "require-human", Reason: "git push needs a human"}, "; policy: a person decides (rule git-push: git push needs a human)"},
		{&PolicyDecision{Rule: "bad", Action: "require-human", Reason: "rule bad failed to evaluate, so a human decides: no such key: x"}, "; policy: a person decides (rule bad failed to evaluate: no such key: x)"},
		{&PolicyDecision{Action: "require-human", Reason: "no auto-pass rule matched: a human decides", Shadow: true}, "; policy (shadow): would leave it to a person (no auto-pass rule matched)"},
		{&PolicyDecision{Rule: "qa", Action: "auto-approve", Reason: "read-only", Shadow: true}, "; policy (shadow) would auto-approve by rule qa: read-only"},
		{&PolicyDecision{Rule: "qa", Action: "auto-approve", Reason: "read-only", AutoPassed: true}, "; auto-passed by policy rule qa: read-only"},
	} {
		if got := policyNote(tc.p); got != tc.want {
			t.Errorf("policyNote(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}
