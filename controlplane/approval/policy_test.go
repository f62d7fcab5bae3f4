package approval_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/approval"
)

// The first matching rule applies; no match is the four-eyes default.
func TestGatePolicyMatching(t *testing.T) {
	path := filepath.Join("testdata", "sample.gates.yaml")
	p, err := approval.LoadGatePolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	r := p.For("prod-eu", "confirm-rollout")
	if r.ApprovalsRequired != 2 || strings.Join(r.AllowedApprovers, ",") != "group:sre,alice,github:octocat" || r.StarterMayApprove ||
		r.Rule != path+" rule 1 (line 3)" {
		t.Fatalf("prod gate: %+v", r)
	}
	if r := p.For("staging", "anything"); r.ApprovalsRequired != 1 || len(r.AllowedApprovers) != 0 || !r.StarterMayApprove ||
		r.Rule != path+" rule 2 (line 7)" {
		t.Fatalf("staging gate: %+v", r)
	}
	for _, r := range []approval.GateRequirement{p.For("prod-eu", "deploy"), p.For("dev", "confirm-x"), (*approval.GatePolicy)(nil).For("prod", "confirm-x")} {
		if r.ApprovalsRequired != 1 || len(r.AllowedApprovers) != 0 || r.StarterMayApprove || r.Rule != approval.DefaultRuleName {
			t.Fatalf("unmatched gate: %+v, want the default", r)
		}
	}
}

// Who may vote — identities, github: links, groups; four-eyes against the
// run's starter and its GitHub actor; unverified names are never taken for anyone.
func TestCheckVote(t *testing.T) {
	r := approval.GateRequirement{Rule: "rule 1", ApprovalsRequired: 2, AllowedApprovers: []string{"alice", "group:sre", "github:octocat"}}
	starter := approval.Starter{StartedBy: "ci-bot", GitHubActor: "Bob-GH"}
	for _, c := range []struct {
		name    string
		v       approval.Voter
		approve bool
		want    error
	}{
		{"listed identity", approval.Voter{Identity: "alice", Verified: true}, true, nil},
		{"group member", approval.Voter{Identity: "dan", Verified: true, Groups: []string{"dba", "sre"}}, true, nil},
		{"github link", approval.Voter{Identity: "oc", Verified: true, GitHub: "OctoCat"}, true, nil},
		{"not listed", approval.Voter{Identity: "carol", Verified: true, Groups: []string{"dba"}}, true, approval.ErrNotAllowedApprover},
		{"not listed, reject", approval.Voter{Identity: "carol", Verified: true}, false, approval.ErrNotAllowedApprover},
		{"unverified name of a listed identity", approval.Voter{Identity: "alice"}, true, approval.ErrNotAllowedApprover},
		{"starter's GitHub actor", approval.Voter{Identity: "bob", Verified: true, Groups: []string{"sre"}, GitHub: "bob-gh"}, true, approval.ErrSelfApproval},
		{"starter's GitHub login as identity", approval.Voter{Identity: "github:bob-gh", Verified: true}, true, approval.ErrNotAllowedApprover},
		{"starter's GitHub actor may reject", approval.Voter{Identity: "bob", Verified: true, Groups: []string{"sre"}, GitHub: "bob-gh"}, false, nil},
	} {
		err := approval.CheckVote(r, starter, c.v, c.approve)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if errors.Is(err, approval.ErrNotAllowedApprover) && !strings.Contains(err.Error(), "rule 1 allows only alice, group:sre, github:octocat") {
			t.Errorf("%s: %v does not name the rule and who it allows", c.name, err)
		}
	}
	if err := approval.CheckVote(approval.Default(), starter, approval.Voter{Identity: "github:bob-gh", Verified: true}, true); !errors.Is(err, approval.ErrSelfApproval) {
		t.Errorf("default rule, the run's GitHub actor as github:<login>: %v, want ErrSelfApproval", err)
	}
	open := approval.Default()
	if err := approval.CheckVote(open, starter, approval.Voter{Identity: "ci-bot", Verified: true}, true); !errors.Is(err, approval.ErrSelfApproval) {
		t.Errorf("default rule, starter approves: %v, want ErrSelfApproval (four-eyes)", err)
	}
	if err := approval.CheckVote(open, starter, approval.Voter{Identity: "unverified:ci-bot"}, true); err != nil {
		t.Errorf("default rule, unverified name: %v", err)
	}
	open.StarterMayApprove = true
	if err := approval.CheckVote(open, starter, approval.Voter{Identity: "ci-bot", Verified: true}, true); err != nil {
		t.Errorf("starter_may_approve: %v", err)
	}
}

// A gate policy is read as strictly as every rbook YAML file; errors name
// file:line and the field.
func TestGatePolicyErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"", "g.yaml: empty gate policy"},
		{"rules: []\nextra: 1\n", `g.yaml:2: unknown field "extra"`},
		{"rules:\n  - gate: a\n    gate: b\n", `g.yaml:3: duplicate key "gate" (first on line 2)`},
		{"rules:\n  - gate: a\n    approvers: [x]\n    aprovals: 2\n", `g.yaml:4: rules[0]: unknown field "aprovals"`},
		{"rules:\n  - approvals: 0\n", "g.yaml:2: rules[0].approvals: 0 is not in 1..10"},
		{"rules:\n  - approvals: 11\n", "g.yaml:2: rules[0].approvals: 11 is not in 1..10"},
		{"rules:\n  - approvals: two\n", "g.yaml:2: rules[0].approvals: want a whole number 1..10"},
		{"rules:\n  - gate: \"[a\"\n", `g.yaml:2: rules[0].gate: "[a" is not a glob`},
		{"rules:\n  - runbook: 7\n", "g.yaml:2: rules[0].runbook: want a string"},
		{"rules:\n  - starter_may_approve: yes\n", "g.yaml:2: rules[0].starter_may_approve: want true or false"},
		{"rules:\n  - approvers: alice\n", "g.yaml:2: rules[0].approvers: want a list"},
		{"rules:\n  - approvers: [a, a]\n", `g.yaml:2: rules[0].approvers: "a" is listed twice`},
		{"rules:\n  - approvers: [\"a b\"]\n", `g.yaml:2: rules[0].approvers: "a b" is not an identity`},
		{"rules:\n  - approvals: 3\n    approvers: [a, b]\n", "g.yaml:2: rules[0]: approvals is 3 but only 2 approvers are listed, so no gate could ever open"},
		{"rules:\n  - &r {gate: a}\n  - *r\n", "g.yaml:2: anchors and aliases are not allowed"},
		{"rules:\n  - gate: !!binary YQ==\n", "g.yaml:2: tag !!binary is not allowed"},
		{"rules: x\n", "g.yaml:1: rules: want a list of rules"},
		{"rules:\n  - gate: [\n", "g.yaml:3: did not find expected node content"},
		{"rules: []\n---\nrules: []\n", "g.yaml:2: a gate policy is exactly one YAML document"},
		{"- a\n", `g.yaml:1: a gate policy is a mapping with the key "rules"`},
	} {
		_, err := approval.ParseGatePolicy([]byte(c.body), "g.yaml")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.body, err, c.want)
		}
	}
	if _, err := approval.ParseGatePolicy(make([]byte, approval.MaxPolicyFileBytes+1), "g.yaml"); err == nil ||
		!strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Errorf("oversized policy: %v", err)
	}
	if p, err := approval.ParseGatePolicy([]byte("rules:\n  - approvals: 10\n    approvers: [\"group:sre\"]\n"), "g.yaml"); err != nil ||
		p.Rules[0].Approvals != approval.MaxGateApprovals {
		t.Errorf("the documented maximum: %+v, %v", p, err)
	}
}

// The sample gate policy of docs/approvals.md (section "Gate policy") loads and means what it says.
func TestDocsSampleGatePolicyLoads(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "approvals.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n# gates.yaml")
	body, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/approvals.md has no gates.yaml sample")
	}
	p, err := approval.ParseGatePolicy([]byte("# gates.yaml"+body), "docs/approvals.md gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r := p.For("prod-eu", "confirm-rollout"); r.ApprovalsRequired != 2 || len(r.AllowedApprovers) != 3 || r.StarterMayApprove {
		t.Fatalf("prod gate: %+v", r)
	}
	if r := p.For("staging", "confirm-rollout"); r.ApprovalsRequired != 1 || !r.StarterMayApprove {
		t.Fatalf("staging gate: %+v", r)
	}
}
