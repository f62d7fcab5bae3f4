package approval_test

import (
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/approval"
)

// A policy approver "group:<name>" or "github:<login>" that no
// auth-file line could ever carry (odd characters, over-long) is refused when the policy
// loads, naming file:line, instead of silently matching nobody; the auth file's syntax passes.
func TestPolicyGroupAndLoginSyntax(t *testing.T) {
	for _, entry := range []string{`"group:sre!"`, `"group:s/re"`, `"group:` + strings.Repeat("g", 65) + `"`,
		`"github:-octo"`, `"github:octo_cat"`, `"github:` + strings.Repeat("o", 40) + `"`, `"github:o.c"`} {
		_, err := approval.ParseGatePolicy([]byte("rules:\n  - approvers:\n      - "+entry+"\n"), "g.yaml")
		if err == nil || !strings.HasPrefix(err.Error(), "g.yaml:3: rules[0].approvers: ") || !strings.Contains(err.Error(), "match nobody") {
			t.Errorf("%s: err = %v, want refused at g.yaml:3", entry, err)
		}
	}
	p, err := approval.ParseGatePolicy([]byte("rules:\n  - approvers: [\"group:sre.db_1-x\", \"github:Octo-Cat9\", alice]\n"), "g.yaml")
	if err != nil || strings.Join(p.Rules[0].Approvers, ",") != "group:sre.db_1-x,github:Octo-Cat9,alice" {
		t.Fatalf("valid entries: %v, %v", p, err)
	}
}
