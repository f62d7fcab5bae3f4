package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/internal/cpview"
)

// TestRejectHelpIsItsOwn: `rbook reject --help` documents rejecting (its exit
// codes, its examples), not approve's tally.
func TestRejectHelpIsItsOwn(t *testing.T) {
	skipShort(t)
	out, code := run(t, t.TempDir(), "", "reject", "--help")
	if code != 0 || !strings.Contains(out, "Exit codes: 0 rejected, 1 refused") || !strings.Contains(out, "rbook reject a-5wbvol5fcc25vsfvgyhmosr26e --reason \"error rate up") {
		t.Fatalf("reject --help (exit %d):\n%s", code, out)
	}
	for _, bad := range []string{"1 of 2 approvals", "waits for more", "checked the canary", "rbook approve a-"} {
		if strings.Contains(out, bad) {
			t.Errorf("reject --help contains %q:\n%s", bad, out)
		}
	}
	out, _ = run(t, t.TempDir(), "", "approve", "--help")
	if !strings.Contains(out, "Exit codes: 0 approved (or your approval was counted and the gate waits for more)") {
		t.Errorf("approve --help:\n%s", out)
	}
}

// TestMalformedApprovalIDRefusedLocally: an argument that starts with "a-" but
// is not an approval id is refused before any request (exit 2, a message saying why and how
// to list the waiting gates), never sent as a token; a well-formed id the control plane does
// not know gets E_APPROVAL_NOT_FOUND with the same pointer.
func TestMalformedApprovalIDRefusedLocally(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	for _, tc := range []struct{ arg, why string }{
		{"a-6j3d6cechx4pbocwkuiszjqaz", `it has 25 characters after "a-"`},
		{"a-3k2m…", `'…' is not one of a-z, 2-7`},
		{"A-6J3D6CECHX4PBOCWKUISZJQAZE", `'J' is not one of a-z, 2-7`},
	} {
		for _, verb := range []string{"approve", "reject"} {
			// Nothing listens on port 1: only a local refusal can give this message.
			_, stderr, code := runSplit(t, dir, []string{"RBOOK_TOKEN="}, verb, tc.arg, "--control-plane", "http://127.0.0.1:1")
			want := "rbook: \"" + tc.arg + "\" is not an approval id (" + tc.why + "): an approval id is \"a-\" and 26 characters a-z, 2-7, as the run's log prints it. " +
				"Copy it whole, or list the waiting gates: rbook approvals --pending --control-plane URL\n"
			if code != 2 || stderr != want {
				t.Errorf("rbook %s %s: exit %d\n%s\nwant\n%s", verb, tc.arg, code, stderr, want)
			}
		}
	}
	url := gatesServe(t, dir)
	out, code := runAs(t, dir, gatesAliceToken, "approve", "a-aaaaaaaaaaaaaaaaaaaaaaaaaa", "--control-plane", url)
	want := "rbook: E_APPROVAL_NOT_FOUND: no approval has approval_id \"a-aaaaaaaaaaaaaaaaaaaaaaaaaa\" (not_found)\n" +
		"List the gates still waiting, with their approval ids: rbook approvals --pending --control-plane " + url + "\n"
	if code != 1 || out != want {
		t.Fatalf("approve unknown id: exit %d\n%s\nwant\n%s", code, out, want)
	}
}

// TestMissingTokenSaysWhatToDo: a command or a run that sent no credentials to
// a control plane with an auth file is told to set RBOOK_TOKEN (or, in the Action, the
// control-plane-token input or OIDC), after the server's own message; in a runner the run
// that cannot start also writes an ::error:: annotation. With a wrong token no such hint
// appears (credentials were sent).
func TestMissingTokenSaysWhatToDo(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := gatesServe(t, dir)
	server := `E_UNAUTHENTICATED: this control plane needs one "Authorization: Bearer <token>" header, with a token from its auth file and no other spaces (unauthenticated)`
	for _, args := range [][]string{{"approvals"}, {"approve", "a-aaaaaaaaaaaaaaaaaaaaaaaaaa"}} {
		out, code := runAs(t, dir, "", append(args, "--control-plane", url)...)
		want := "rbook: " + server + "\n" + cpview.NoCredentialsHint() + "\n"
		if code != 1 || out != want {
			t.Errorf("rbook %s: exit %d\n%s\nwant\n%s", args[0], code, out, want)
		}
	}
	if out, code := runAs(t, dir, "wrong-token-0123456789", "approvals", "--control-plane", url); code != 1 || strings.Contains(out, "RBOOK_TOKEN") {
		t.Errorf("approvals with a wrong token: exit %d\n%s", code, out)
	}

	summary := filepath.Join(dir, "summary.md")
	cmd := exec.Command(rbookBin, "run", "demo", "--control-plane", url)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RBOOK_TOKEN=", "RBOOK_CONTROL_PLANE=", "ACTIONS_ID_TOKEN_REQUEST_URL=", "ACTIONS_ID_TOKEN_REQUEST_TOKEN=",
		"GITHUB_ACTIONS=true", "GITHUB_WORKSPACE="+dir, "GITHUB_STEP_SUMMARY="+summary,
		"GITHUB_OUTPUT="+filepath.Join(dir, "out"), "GITHUB_STATE="+filepath.Join(dir, "state"))
	b, _ := cmd.CombinedOutput()
	log := string(b)
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(log, "RBOOK_TOKEN to your token") {
		t.Fatalf("run without credentials: exit %d\n%s", cmd.ProcessState.ExitCode(), log)
	}
	ann := regexp.MustCompile(`(?m)^::error title=rbook%3A the control plane refused the run \(E_UNAUTHENTICATED\)::No credentials were sent: set RBOOK_TOKEN .*control-plane-token input.*id-token: write.*$`)
	if !ann.MatchString(log) {
		t.Fatalf("no ::error:: annotation in the runner log:\n%s", log)
	}
}

// TestResumeWithControlPlaneOffWarns: a run interrupted while reporting to a
// control plane, resumed with the control plane off, is warned that the control plane's
// record will not get this run's transitions, with its URL and the command that resumes
// with it; a run that never reported to one is not.
func TestResumeWithControlPlaneOffWarns(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	p.waitFor(t, "Approval a-")
	p.cmd.Process.Signal(os.Interrupt)
	if code := p.wait(t); code == 0 {
		t.Fatalf("interrupted run exited 0:\n%s", p.output())
	}
	if st := readState(t, dir); st.ControlPlane != url || st.Interrupted == nil {
		t.Fatalf("state after the interrupt: control plane %q, interrupted %v", st.ControlPlane, st.Interrupted)
	}
	_, stderr, _ := runSplit(t, dir, []string{"RBOOK_CONTROL_PLANE=off"}, "run", "demo")
	want := "Warning: run " + readState(t, dir).RunID + " reports to the control plane " + url + ", but this resume runs with the control plane off: " +
		"its record there will not get this run's transitions and keeps the run in progress. To keep it in step, stop now (Ctrl-C) and resume with: rbook run demo --control-plane " + url + "\n"
	if !strings.Contains(stderr, want) {
		t.Fatalf("resume with the control plane off:\n%s\nwant\n%s", stderr, want)
	}

	fresh := workdir(t)
	_, stderr, _ = runSplit(t, fresh, nil, "run", "demo", "--control-plane", "off")
	if strings.Contains(stderr, "Warning: run") {
		t.Fatalf("a run without a control plane was warned:\n%s", stderr)
	}
}

// TestServeConfigErrors: `rbook serve` refuses --public-url without a scheme
// (no token's audience could match it) and reports a gate-policy YAML error on line 1 as
// file:1.
func TestServeConfigErrors(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	_, stderr, code := runSplit(t, dir, []string{"RBOOK_APPROVAL_SECRET=" + testSecret}, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "cp.db"), "--public-url", "127.0.0.1:7070")
	want := "rbook serve: --public-url \"127.0.0.1:7070\" is not a control plane URL: give its scheme (http:// or https://) and host, as in http://127.0.0.1:7070\n"
	if code != 2 || stderr != want {
		t.Errorf("--public-url without a scheme: exit %d\n%s\nwant\n%s", code, stderr, want)
	}
	policy := filepath.Join(dir, "gp6.yaml")
	os.WriteFile(policy, []byte("\trules: []\n"), 0o600)
	_, stderr, code = runSplit(t, dir, []string{"RBOOK_APPROVAL_SECRET=" + testSecret}, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "cp.db"), "--gate-policy", policy)
	want = "rbook serve: " + policy + ":1: found character that cannot start any token (indent YAML with spaces, not tabs)\n"
	if code != 2 || stderr != want {
		t.Errorf("tab in the gate policy: exit %d\n%s\nwant\n%s", code, stderr, want)
	}
}
