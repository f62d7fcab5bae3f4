package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// everyCommand lists the command tree below root, without cobra's own help and completion.
func everyCommand(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			out = append(out, sub)
			walk(sub)
		}
	}
	walk(root)
	return out
}

// TestEveryCommandHasExamplesAndExitCodes: every subcommand's --help has an
// Examples section (exactly one: run and status once printed two different ones, found trying
// the README as a new user) and documents its exit codes, in the tree and in the built binary.
func TestEveryCommandHasExamplesAndExitCodes(t *testing.T) {
	cmds := everyCommand(newRootCmd())
	if len(cmds) < 15 {
		t.Fatalf("only %d commands found", len(cmds))
	}
	for _, c := range cmds {
		path := strings.Fields(c.CommandPath())[1:]
		out, code := run(t, t.TempDir(), "", append(path, "--help")...)
		if code != 0 || !strings.Contains(out, "\nExamples:\n  ") || !strings.Contains(out, "Exit codes:") || !strings.Contains(out, "Usage:\n  "+c.CommandPath()) {
			t.Errorf("%s --help (exit %d) lacks examples, exit codes or usage:\n%s", c.CommandPath(), code, out)
		}
		if n := strings.Count(out, "Examples:\n"); n != 1 {
			t.Errorf("%s --help has %d Examples sections, want 1:\n%s", c.CommandPath(), n, out)
		}
	}
}

// TestArgumentErrorsPrintUsage: a wrong argument count, an unknown flag or an
// unknown command prints the error, the usage line and where to read more, and exits 2.
func TestArgumentErrorsPrintUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get"}, "rbook: accepts 1 arg(s), received 0\nUsage: rbook get RUN_ID [flags]\nSee 'rbook get --help' for examples and exit codes.\n"},
		{[]string{"runs", "--bogus"}, "rbook: unknown flag: --bogus\nUsage: rbook runs [flags]\nSee 'rbook runs --help' for examples and exit codes.\n"},
		{[]string{"status", "a", "b"}, "rbook: accepts at most 1 arg(s), received 2\nUsage: rbook status [RUNBOOK] [flags]\nSee 'rbook status --help' for examples and exit codes.\n"},
		{[]string{"approve"}, "rbook: accepts 1 arg(s), received 0\nUsage: rbook approve APPROVAL_ID|TOKEN [flags]\nSee 'rbook approve --help' for examples and exit codes.\n"},
		{[]string{"serve", "extra"}, "rbook: unknown command \"extra\" for \"rbook serve\"\nUsage: rbook serve [flags]\nSee 'rbook serve --help' for examples and exit codes.\n"},
		{[]string{"rn", "demo"}, "rbook: unknown command \"rn\" for \"rbook\"; did you mean run or runs?\nUsage: rbook COMMAND [flags]\nSee 'rbook --help' for examples and exit codes.\n"},
		{[]string{"mcp", "nope"}, "rbook: unknown command \"nope\" for \"rbook mcp\"\nUsage: rbook mcp COMMAND [flags]\nSee 'rbook mcp --help' for examples and exit codes.\n"},
		{[]string{"run", "--step-index", "x"}, "rbook: invalid argument \"x\" for \"--step-index\" flag: strconv.ParseInt: parsing \"x\": invalid syntax\nUsage: rbook run [RUNBOOK] [flags]\nSee 'rbook run --help' for examples and exit codes.\n"},
	} {
		stdout, stderr, code := runSplit(t, t.TempDir(), nil, tc.args...)
		if code != 2 || stderr != tc.want || stdout != "" {
			t.Errorf("rbook %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant stderr:\n%s", strings.Join(tc.args, " "), code, stdout, stderr, tc.want)
		}
	}
}

// TestVersion: `rbook version` shows what the binary's build info holds (as `go
// version -m` reads it): its module version and VCS revision, or that the revision is
// unknown for a build without VCS information (CI builds with -buildvcs=false).
func TestVersion(t *testing.T) {
	info, err := exec.Command("go", "version", "-m", rbookBin).Output()
	if err != nil {
		t.Fatal(err)
	}
	modVersion := regexp.MustCompile(`(?m)^\tmod\t\S+\t(\S+)`).FindSubmatch(info)
	revision := regexp.MustCompile(`(?m)^\tbuild\tvcs\.revision=(\S+)`).FindSubmatch(info)
	if modVersion == nil {
		t.Fatalf("go version -m:\n%s", info)
	}
	stdout, _, code := runSplit(t, t.TempDir(), nil, "version")
	want := "rbook " + string(modVersion[1]) + " (module github.com/rbookhq/rbook-action)\n"
	if revision != nil {
		want += "revision " + string(revision[1])
	} else {
		want += "revision unknown: built without VCS information"
	}
	if code != 0 || !strings.HasPrefix(stdout, want) || !strings.Contains(stdout, "built with go1.") {
		t.Fatalf("rbook version: exit %d\n%s\nwant it to start with:\n%s\n(go version -m:\n%s)", code, stdout, want, info)
	}
	short, _, _ := runSplit(t, t.TempDir(), nil, "--version")
	if !strings.HasPrefix(short, "rbook "+string(modVersion[1])) || strings.Count(short, "\n") != 1 {
		t.Fatalf("rbook --version: %q", short)
	}
}

// portRE finds host:port pairs and :port suffixes of URLs in text.
var portRE = regexp.MustCompile(`(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):(\d+)`)

// TestOneDefaultPort: the README and docs/, the clients' docs and messages, the example
// workflows and every --help name the same port, rbook serve's default.
func TestOneDefaultPort(t *testing.T) {
	if defaultServeAddr != "127.0.0.1:7070" {
		t.Fatalf("defaultServeAddr = %s", defaultServeAddr)
	}
	texts := map[string]string{}
	for _, f := range []string{"README.md", "docs/action.md", "docs/approvals.md", "docs/cli.md", "docs/control-plane.md",
		"docs/development.md", "docs/playbooks.md", "docs/runbooks.md", "clients/ts/README.md", "clients/ts/smoke.ts", "tools/README.md"} {
		texts[f] = readFile(t, filepath.Join("..", "..", f))
	}
	workflows, _ := filepath.Glob(filepath.Join("..", "..", "examples", "workflows", "*.yml"))
	for _, f := range workflows {
		texts[f] = readFile(t, f)
	}
	for _, c := range append(everyCommand(newRootCmd()), newRootCmd()) {
		help := c.Long + "\n" + c.Example
		c.Flags().VisitAll(func(f *pflag.Flag) { help += "\n" + f.Usage + " " + f.DefValue })
		texts[c.CommandPath()+" --help"] = help
	}
	seen := 0
	for where, text := range texts {
		for _, m := range portRE.FindAllStringSubmatch(text, -1) {
			seen++
			if m[1] != defaultServePort {
				t.Errorf("%s names %s; the one default port is %s (rbook serve --addr)", where, m[0], defaultServePort)
			}
		}
	}
	if seen < 5 {
		t.Fatalf("only %d addresses found; is the scan reading the files?", seen)
	}
}
