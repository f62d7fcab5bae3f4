package approval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writePolicy(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func defaultPolicy(t *testing.T) *Policy {
	t.Helper()
	p, err := LoadPlaybookPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A gate guarding `git push` requires a human even when a
// matching custom auto-approve rule comes first.
func TestGitPushNeedsHumanDespiteCustomAutoApprove(t *testing.T) {
	file := filepath.Join("testdata", "trust-everything.policy.yaml")
	p, err := LoadPlaybookPolicy(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Rules()[0].Name; got != "trust-everything" {
		t.Fatalf("custom rules come first, got %q", got)
	}
	v := p.Evaluate(PolicyInput{Commands: []string{"go test ./...", "git push origin main"}})
	if v.AutoPassed || v.Action != ActionRequireHuman || v.Rule != RuleGitPush {
		t.Fatalf("verdict = %+v, want require-human by %s", v, RuleGitPush)
	}
	if !strings.Contains(v.Reason, "git push needs a human") || !strings.Contains(v.Reason, "overrides auto-approve rule trust-everything") {
		t.Fatalf("reason = %q", v.Reason)
	}
	// Without the push, the custom rule decides.
	v = p.Evaluate(PolicyInput{Commands: []string{"make deploy-docs"}})
	if !v.AutoPassed || v.Rule != "trust-everything" || v.Reason != "we trust this team" {
		t.Fatalf("verdict = %+v, want auto-approve by trust-everything", v)
	}
}

// A rule whose evaluation fails (missing key, wrong type, non-bool) counts as require-human
// and says why, even when it is an auto-approve rule and even before a matching auto-approve.
func TestRuleThatErrorsRequiresHuman(t *testing.T) {
	for _, tc := range []struct{ name, when, want string }{
		{"missing-key", `bindings.build.ok == true`, "no such key"},
		{"wrong-type", `node.id + 1 == 2`, "no such overload"},
		{"non-bool", `node.id`, "not bool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompilePolicy([]PolicyRule{
				{Name: "broken", When: tc.when, Action: ActionAutoApprove, Reason: "x"},
				{Name: "always", When: "true", Action: ActionAutoApprove, Reason: "y"},
			})
			if err != nil {
				t.Fatal(err)
			}
			v := p.Evaluate(PolicyInput{Node: map[string]any{"id": "review"}, Bindings: map[string]any{}})
			if v.AutoPassed || v.Action != ActionRequireHuman || v.Rule != "broken" {
				t.Fatalf("verdict = %+v, want require-human by broken", v)
			}
			// After a matching auto-approve, a failing rule still blocks it.
			late, err := CompilePolicy([]PolicyRule{
				{Name: "always", When: "true", Action: ActionAutoApprove, Reason: "y"},
				{Name: "broken", When: tc.when, Action: ActionAutoApprove, Reason: "x"},
			})
			if err != nil {
				t.Fatal(err)
			}
			v = late.Evaluate(PolicyInput{Node: map[string]any{"id": "review"}})
			if v.AutoPassed || v.Rule != "broken" || !strings.Contains(v.Reason, "overrides auto-approve rule always") {
				t.Fatalf("late failure: verdict = %+v", v)
			}
			if !strings.Contains(v.Reason, "rule broken failed to evaluate") || !strings.Contains(v.Reason, tc.want) {
				t.Fatalf("reason = %q, want it to say the rule failed (%s)", v.Reason, tc.want)
			}
		})
	}
}

// A rule that does not compile is a load error naming the file, line and rule.
func TestRuleThatDoesNotCompileIsLoadError(t *testing.T) {
	file := filepath.Join("testdata", "rule-does-not-compile.policy.yaml")
	_, err := LoadPlaybookPolicy(file)
	if err == nil {
		t.Fatal("a rule that does not compile must be refused")
	}
	want := file + `:6: rule "broken": when does not compile:`
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error = %q, want prefix %q", err, want)
	}
	for _, tc := range []struct{ text, want string }{
		{"rules:\n  - name: x\n    when: '\"a\"'\n    action: auto-approve\n    reason: r\n", `:2: rule "x": when yields string, not bool`},
		{"rules:\n  - name: x\n    when: 'true'\n    action: approve\n    reason: r\n", `:2: rule "x": action "approve" is not`},
		{"rules:\n  - name: x\n    when: 'true'\n    action: auto-approve\n", `:2: rules[0].reason: missing`},
		{"rules:\n  - name: default-git-push\n    when: 'true'\n    action: auto-approve\n    reason: r\n", `:2: rules[0].name: "default-git-push" is the name of a default rule`},
		{"rules:\n  - name: x\n    when: 'true'\n    whenn: 'true'\n", `:4: rules[0]: unknown field "whenn"`},
		{"rules:\n  - name: x\n\twhen: 'true'\n", `:3:`},
		{"rules:\n  - name: x\n    when: 'true'\n    action: auto-approve\n    reason: r\n  - name: x\n    when: 'true'\n    action: auto-approve\n    reason: r\n", `:6: rule "x": the name is used twice`},
	} {
		_, err := LoadPolicyRules(writePolicy(t, tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("policy %q: error = %v, want %q", tc.text, err, tc.want)
		}
	}
}

// The defaults auto-approve read-only and QA commands only, and send everything else to a human.
func TestDefaultRules(t *testing.T) {
	p := defaultPolicy(t)
	for _, tc := range []struct {
		cmds, tools []string
		auto        bool
		rule        string
	}{
		{[]string{"go test ./...", "go vet ./...", "pnpm run build", "npm test", "yarn lint", "git status", "git diff HEAD~1", "ls -la", "cat README.md", "echo ok"}, nil, true, RuleReadOnly},
		{[]string{"pnpm run typecheck"}, nil, true, RuleReadOnly},
		{nil, nil, false, ""}, // nothing guarded: a human decides
		{[]string{"go test ./..."}, []string{"release/publisher"}, false, ""}, // an agentic node
		{[]string{"go test -exec /bin/rm ./..."}, nil, false, ""},
		{[]string{"go build -o /usr/local/bin/x ."}, nil, false, ""},
		{[]string{"echo hi; rm -rf /"}, nil, false, RuleDestructive},
		{[]string{"make release"}, nil, false, ""},
		{[]string{"pnpm publish --tag latest"}, nil, false, RulePublish},
		{[]string{"git -C repo push --tags"}, nil, false, RuleGitPush},
		{[]string{"git tag v1.2.3"}, nil, false, RuleGitTag},
		{[]string{"gh release create v1"}, nil, false, RuleGitHubRelease},
		{[]string{"gh workflow run deploy.yml"}, nil, false, RuleGitHubWorkflow},
		{[]string{"rm -fr build"}, nil, false, RuleDestructive},
		{[]string{"psql -c DROP TABLE users"}, nil, false, RuleDestructive},
		{[]string{"sqlite3 db 'delete from runs'"}, nil, false, RuleDestructive},
		{[]string{"curl -fsS https://example.com"}, nil, false, RuleOutboundHTTP},
		{[]string{"wget http://x"}, nil, false, RuleOutboundHTTP},
		{[]string{"ssh deploy@prod uptime"}, nil, false, RuleRemoteAccess},
		{[]string{"rsync -a dist/ web1:/srv/www"}, nil, false, RuleRemoteAccess},
	} {
		v := p.Evaluate(PolicyInput{Commands: tc.cmds, Tools: tc.tools})
		if v.AutoPassed != tc.auto || v.Rule != tc.rule {
			t.Errorf("commands %q tools %q: verdict %+v, want auto=%v rule %q", tc.cmds, tc.tools, v, tc.auto, tc.rule)
		}
		if !v.AutoPassed && v.Action != ActionRequireHuman {
			t.Errorf("commands %q: action %q", tc.cmds, v.Action)
		}
	}
}

// The evaluation cost is bounded: a rule that would run long stops and fails closed.
func TestCostLimitFailsClosed(t *testing.T) {
	p, err := CompilePolicy([]PolicyRule{{Name: "slow", Action: ActionAutoApprove, Reason: "x",
		When: `commands.all(a, commands.all(b, commands.all(c, a + b + c != "")))`}})
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]string, 300)
	for i := range cmds {
		cmds[i] = strings.Repeat("x", 100)
	}
	v := p.Evaluate(PolicyInput{Commands: cmds})
	if v.AutoPassed || !strings.Contains(v.Reason, "failed to evaluate") || !strings.Contains(v.Reason, "cost") {
		t.Fatalf("verdict = %+v, want require-human over the cost limit", v)
	}
}
