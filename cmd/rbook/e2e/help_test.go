package e2e

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// binaryCommands lists the command tree the built binary's --help shows below args (the
// "Available Commands:" section of each help, walked), without cobra's own help and completion.
func binaryCommands(t *testing.T, args ...string) [][]string {
	t.Helper()
	out, code := run(t, t.TempDir(), "", append(args, "--help")...)
	if code != 0 {
		t.Fatalf("rbook %s --help: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	_, list, ok := strings.Cut(out, "\nAvailable Commands:\n")
	if !ok {
		return nil
	}
	list, _, _ = strings.Cut(list, "\n\n")
	var cmds [][]string
	for _, line := range strings.Split(list, "\n") {
		name := strings.Fields(line)[0]
		if name == "help" || name == "completion" {
			continue
		}
		path := append(append([]string(nil), args...), name)
		cmds = append(cmds, path)
		cmds = append(cmds, binaryCommands(t, path...)...)
	}
	return cmds
}

// TestEveryCommandHasExamplesAndExitCodes: every subcommand's --help has an
// Examples section (exactly one: run and status once printed two different ones, found trying
// the README as a new user) and documents its exit codes, in the built binary (the command
// tree is walked through the binary's own help).
func TestEveryCommandHasExamplesAndExitCodes(t *testing.T) {
	skipShort(t)
	cmds := binaryCommands(t)
	if len(cmds) < 15 {
		t.Fatalf("only %d commands found", len(cmds))
	}
	for _, path := range cmds {
		commandPath := "rbook " + strings.Join(path, " ")
		out, code := run(t, t.TempDir(), "", append(path, "--help")...)
		if code != 0 || !strings.Contains(out, "\nExamples:\n  ") || !strings.Contains(out, "Exit codes:") || !strings.Contains(out, "Usage:\n  "+commandPath) {
			t.Errorf("%s --help (exit %d) lacks examples, exit codes or usage:\n%s", commandPath, code, out)
		}
		if n := strings.Count(out, "Examples:\n"); n != 1 {
			t.Errorf("%s --help has %d Examples sections, want 1:\n%s", commandPath, n, out)
		}
	}
}

// TestRunHelpShowsTheControlPlaneAuthValueName: the built binary's `rbook run --help` prints
// --control-plane-auth with the value name "string" and its default quoted, not the default
// as the value name (the line once read "--control-plane-auth permissions: id-token: write").
func TestRunHelpShowsTheControlPlaneAuthValueName(t *testing.T) {
	skipShort(t)
	out, code := run(t, t.TempDir(), "", "run", "--help")
	if code != 0 || !strings.Contains(out, "--control-plane-auth string") || !strings.Contains(out, `"permissions: id-token: write"`) {
		t.Fatalf("rbook run --help (exit %d):\n%s", code, out)
	}
}

// TestArgumentErrorsPrintUsage: a wrong argument count, an unknown flag or an
// unknown command prints the error, the usage line and where to read more, and exits 2.
func TestArgumentErrorsPrintUsage(t *testing.T) {
	skipShort(t)
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
	skipShort(t)
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
