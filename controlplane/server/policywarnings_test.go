package server

import (
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/approval"
)

// A gate policy naming an approver no auth-file line can be, or needing more distinct approvers
// than its entries can supply, is reported at `rbook serve` start; github: entries and rules open
// to every approver are not.
func TestPolicyApproversNobodyCanBe(t *testing.T) {
	a, err := ParseAuth(strings.NewReader(
		"ci-bot executor exec-token-0123456789\nalice approver alice-token-0123456789 groups=sre\n"+
			"bob approver bob-token-0123456789 groups=sre,dba\nalice approver alice-token2-0123456789 groups=sre\n"), "auth.txt")
	if err != nil {
		t.Fatal(err)
	}
	p, err := approval.ParseGatePolicy([]byte("rules:\n"+
		"  - runbook: prod\n    approvals: 2\n    approvers: [nobody, \"group:sre\"]\n"+ // rule 1: nobody is unknown; sre has 2: ok
		"  - runbook: db\n    approvals: 2\n    approvers: [\"group:dba\", ci-bot]\n"+ // rule 2: ci-bot is no approver; 1 < 2
		"  - runbook: web\n    approvals: 3\n    approvers: [\"group:sre\", \"github:octocat\"]\n"+ // rule 3: github: may add reviewers
		"  - runbook: any\n    approvals: 2\n"), "gates.yaml") // rule 4: anyone
	if err != nil {
		t.Fatal(err)
	}
	got := PolicyWarnings(p, a, "auth.txt", nil)
	want := []string{
		`gates.yaml rule 1 (line 2): approver "nobody" matches no approver line of auth.txt, so it can never decide a gate`,
		`gates.yaml rule 2 (line 5): approver "ci-bot" matches no approver line of auth.txt, so it can never decide a gate`,
		`gates.yaml rule 2 (line 5) needs 2 distinct approvers, but only 1 identity of auth.txt may approve its gates: they can only time out`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w := PolicyWarnings(p, nil, "", nil); w != nil {
		t.Errorf("without an auth file: %q", w)
	}
}
