package e2e

// A gate's page on the console (Approval.approval_url; docs/console-links.md) as the real
// binary prints it: the laptop run's terminal, a GitHub job's log, summary and outputs, a
// paused job's outputs, rbook approvals, and rbook serve's --public-url check.

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pageLine is the terminal's line with a gate's page.
var pageLine = regexp.MustCompile(`Open in a browser: (\S+)`)

// TestLaptopRunPrintsTheGatePageOnLoopback: `rbook run demo` on a laptop (embedded control
// plane, no runner) prints, at its gate, the gate's page on the embedded control plane's
// loopback address; the id in that URL is the open approval `rbook approvals` lists, whose
// PAGE column and -o json approval_url give the same URL.
func TestLaptopRunPrintsTheGatePageOnLoopback(t *testing.T) {
	skipShort(t)
	t.Setenv("GITHUB_ACTIONS", "") // a laptop, also when the tests run in a GitHub job
	dir := workdir(t)
	p := start(t, dir, "run", "demo")
	id := approvalIDFrom(t, p)
	p.waitFor(t, "Open in a browser: ")
	m := pageLine.FindStringSubmatch(p.output())
	page, err := url.Parse(m[1])
	if err != nil {
		t.Fatalf("printed page %q: %v", m[1], err)
	}
	if page.Scheme != "http" || page.Hostname() != "127.0.0.1" || page.Port() == "" || page.Path != "/approvals/"+id || page.RawQuery != "" {
		t.Fatalf("printed page %q, want http://127.0.0.1:PORT/approvals/%s", m[1], id)
	}

	out, code := run(t, dir, "", "approvals", "--pending")
	if code != 0 {
		t.Fatalf("rbook approvals: exit %d\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "  PAGE") || !strings.HasPrefix(lines[1], id+" ") || !strings.HasSuffix(lines[1], "  "+m[1]) {
		t.Errorf("rbook approvals --pending, want a PAGE column and the row of %s ending with %s:\n%s", id, m[1], out)
	}
	out, code = run(t, dir, "", "approvals", "--pending", "-o", "json")
	var listed struct {
		Approvals []struct{ ApprovalID, ApprovalURL string }
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed.Approvals) != 1 ||
		listed.Approvals[0].ApprovalID != id || listed.Approvals[0].ApprovalURL != m[1] {
		t.Errorf("rbook approvals -o json: exit %d (%v), want approvalUrl %s:\n%s", code, err, m[1], out)
	}

	if out, code := run(t, dir, "", "approve", id, "--approver", "alice", "--reason", "seen on the page"); code != 0 {
		t.Fatalf("approve %s: exit %d\n%s", id, code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
}

// TestGitHubJobCarriesTheGatePage: a job reporting to `rbook serve --public-url` (trailing
// slash given) names the gate's page in the log's gate announcement and its notice, in the
// live job summary and, as soon as the gate opens, in the step output approval-url; the
// approval token is in none of them but the log's add-mask command. Once an approver decides
// with the token, the final outputs keep approval-url and the final summary's links list it.
func TestGitHubJobCarriesTheGatePage(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	cp := serveCP(t, dir, "--public-url", "https://rbook.example.com/")
	p, outPath, sumPath := ciJob(t, dir, cp)
	p.waitFor(t, "  Note ")
	id := approvalIDFrom(t, p)
	page := "https://rbook.example.com/approvals/" + id
	log := p.output()
	if !strings.Contains(log, "  Approval id    "+id+"\n  Page           "+page+"\n") {
		t.Errorf("the gate's announcement lacks the page line %q:\n%s", page, log)
	}
	if !strings.Contains(log, "; page: "+page) {
		t.Errorf("the gate's notice lacks the page:\n%s", log)
	}
	if live := readFile(t, sumPath); !strings.Contains(live, "| Page | "+page+" |\n") {
		t.Errorf("live job summary lacks the page row:\n%s", live)
	}
	outs := parseOutputs(t, readFile(t, outPath))
	if outs["approval-url"] != page || len(outs) != 1 {
		t.Errorf("outputs while the gate waits %q, want only approval-url=%s", outs, page)
	}
	masks := regexp.MustCompile(`::add-mask::(\S+)`).FindAllStringSubmatch(log, -1)
	token := ""
	for _, mk := range masks {
		if strings.Count(log, mk[1]) == 1 && len(mk[1]) > 100 {
			token = mk[1]
		}
	}
	if token == "" {
		t.Fatalf("no approval token masked in the log:\n%s", log)
	}
	for what, text := range map[string]string{"summary": readFile(t, sumPath), "outputs": readFile(t, outPath)} {
		if strings.Contains(text, token) {
			t.Errorf("the %s carries the approval token", what)
		}
	}

	if out, code := runAs(t, dir, "", "approve", token, "--control-plane", cp, "--approver", "alice", "--reason", "page checked"); code != 0 {
		t.Fatalf("approve with the token: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("job exit %d\n%s", code, p.output())
	}
	outs = parseOutputs(t, readFile(t, outPath))
	if outs["approval-url"] != page || outs["approval-id"] != id || outs["approval-status"] != "approved" {
		t.Errorf("final outputs %q, want approval-url %s, approval-id %s, approved", outs, page, id)
	}
	sum := readFile(t, sumPath)
	if !strings.Contains(sum, "\n- Gate `confirm-rollout`: "+page+"\n") || strings.Contains(sum, token) {
		t.Errorf("final job summary lacks the gate's page %s in its links (or carries the token):\n%s", page, sum)
	}
}

// TestPausedJobOutputsTheGatePage: a job in pause mode against `rbook serve --public-url`
// ends at the gate with the output approval-url next to approval-id, and says where the page is.
func TestPausedJobOutputsTheGatePage(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth.txt")
	os.WriteFile(auth, []byte("ci-bot executor "+pauseExecToken+"\nalice approver "+pauseAliceToken+"\n"), 0o600)
	cp := serveCP(t, dir, "--auth-file", auth, "--public-url", "https://ops.example.com/rbook")
	dirA := workdir(t)
	env, outputs := runnerEnv(t, dirA, "1")
	out, code := rbookIn(t, dirA, env, "run", "demo", "--control-plane", cp, "--gate-mode", "pause")
	if code != 0 {
		t.Fatalf("pause-mode run: exit %d\n%s", code, out)
	}
	outs := parseOutputs(t, readFile(t, outputs))
	page := "https://ops.example.com/rbook/approvals/" + outs["approval-id"]
	if outs["paused"] != "true" || outs["approval-url"] != page {
		t.Errorf("outputs %q, want paused=true and approval-url %s", outs, page)
	}
	if !strings.Contains(out, "The gate's page: "+page) {
		t.Errorf("the paused run does not name the gate's page %s:\n%s", page, out)
	}
}

// TestServeRefusesAPublicURLALinkCannotCarry: rbook serve refuses a --public-url with
// another scheme, a query or user information, exit 2, with an error naming the flag; the
// user information is not repeated.
func TestServeRefusesAPublicURLALinkCannotCarry(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	for _, c := range []struct{ name, publicURL, want string }{
		{"bad scheme", "ftp://rbook.example.com", `rbook serve: --public-url "ftp://rbook.example.com" is not a control plane URL: give its scheme (http:// or https://) and host`},
		{"query", "https://rbook.example.com/?team=sre", `rbook serve: --public-url "https://rbook.example.com/?team=sre" has a query (?…): give the address without it`},
		{"fragment", "https://rbook.example.com/#x", `rbook serve: --public-url "https://rbook.example.com/#x" has a fragment (#…)`},
		{"user information", "https://ann:hunter2@rbook.example.com", `rbook serve: --public-url "https://rbook.example.com" carries a user name or password (user@)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runSplit(t, dir, []string{"RBOOK_APPROVAL_SECRET=" + testSecret}, "serve", "--addr", "127.0.0.1:0",
				"--db", filepath.Join(dir, "cp.db"), "--public-url", c.publicURL)
			if code != 2 || !strings.HasPrefix(stderr, c.want) || strings.Contains(stderr, "hunter2") {
				t.Errorf("exit %d, stderr\n%s\nwant exit 2 and a message starting with\n%s", code, stderr, c.want)
			}
		})
	}
}
