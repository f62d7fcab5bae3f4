package approval

import (
	"path/filepath"
	"testing"
)

// trustAllPolicy is a custom "auto-approve everything" rule followed by the defaults: only
// a default require-human rule can stop a gate.
func trustAllPolicy(t *testing.T) *Policy {
	t.Helper()
	p, err := LoadPlaybookPolicy(filepath.Join("testdata", "trust-everything.policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Command lines that are risky in a way the default require-human rules name must need a
// human even when a custom auto-approve rule matches them all (the rule cannot relax a block).
func TestDefaultDenyRulesSpellings(t *testing.T) {
	p := trustAllPolicy(t)
	for _, c := range []string{
		"git  push origin main",
		"/usr/bin/git push",
		"GIT_DIR=x git push",
		"git -C dir push",
		"sh -c git push",
		"env git push",
		"GIT PUSH origin",
		"git -c user.name=x tag v1",
		"npx npm publish",
		"pnpm -r publish",
		"pnpm --filter web publish",
		"npm --workspace a publish --access public",
		"yarn npm publish",
		"PNPM PUBLISH",
		"gh -R o/r release create v1",
		"gh --repo o/r workflow run deploy.yml",
		"RM -RF /",
		"rm -fr x",
		"rm -f -r x",
		"rm --recursive x",
		"curl -X POST https://example.com/hook",
		"curl http://example.com",
		"curl example.com",
		"wget -q example.com/x",
		"CURL HTTPS://x",
		"ssh host uptime",
		"ssh -p 22 host",
		"sftp host",
		"scp f host:/tmp",
		"rsync -a . user@host:/srv",
	} {
		v := p.Evaluate(PolicyInput{Commands: []string{c}})
		if v.AutoPassed || v.Action != ActionRequireHuman || v.Rule == "trust-everything" {
			t.Errorf("%q: verdict %+v, want a default require-human rule", c, v)
		}
	}
	// Local, harmless look-alikes still pass the custom rule.
	for _, c := range []string{"make docs", "rsync -a build/ out/", "git status", "echo publish"} {
		if v := p.Evaluate(PolicyInput{Commands: []string{c}}); !v.AutoPassed || v.Rule != "trust-everything" {
			t.Errorf("%q: verdict %+v, want the custom auto-approve", c, v)
		}
	}
}

// With only the default rules, a gate auto-passes only clearly read-only command lines;
// anything else (an environment assignment in front, an unresolved template, a path to the
// program, an option that runs or writes other things) needs a human.
func TestDefaultReadOnlyAllowListFailsClosed(t *testing.T) {
	p := defaultPolicy(t)
	for _, c := range []string{
		"PATH=/tmp/evil ls",
		"GOFLAGS=-toolexec=/tmp/x go test ./...",
		"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=/tmp/x git status",
		"go test {{ gen.stdout }}",
		"echo {{ later.stdout }}",
		"/bin/ls",
		"./ls",
		"go test -exec /tmp/x ./...",
		"go test -exec=/tmp/x ./...",
		"go test --toolexec=/tmp/x",
		"go vet -vettool=/tmp/x",
		"go build -o /usr/local/bin/x",
		"git diff --output=/etc/x",
		"git log --output /etc/x",
		"git diff --outp=/etc/x",
		"git diff --ext-diff",
		"git show --ext-d",
		"git -c core.pager=x log",
		"git --no-pager log",
		"npm run test:publish",
		"pnpm build-and-publish",
		"lsblk",
		"echo a; rm x",
		"echo a\nrm x",
		"git status\r",
		"ECHO hi",
	} {
		v := p.Evaluate(PolicyInput{Commands: []string{c}})
		if v.AutoPassed || v.Action != ActionRequireHuman {
			t.Errorf("%q: verdict %+v, want a human", c, v)
		}
	}
	for _, c := range []string{"go test ./...", "git status", "pnpm run build", "ls -la", "echo 2026.4.90", "git diff --stat HEAD~1"} {
		if v := p.Evaluate(PolicyInput{Commands: []string{c}}); !v.AutoPassed || v.Rule != RuleReadOnly {
			t.Errorf("%q: verdict %+v, want auto-approve by %s", c, v, RuleReadOnly)
		}
	}
}
