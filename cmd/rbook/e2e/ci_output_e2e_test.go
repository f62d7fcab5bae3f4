package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rbookhq/rbook-action/action/github/ghtest"
)

// hostileRows is what the hostile MCP server answers for the demo's owner-tag check: rows
// that carry workflow commands, at a line start (v2 syntax) and mid-line (v1 ##[…]).
const hostileRows = `{"count":1,"data":[{"name":"##[add-mask]y"}]}` + "\n::add-mask::x\n::error::pwned\n"

// hostileMCP serves validate_query and execute_query over streamable HTTP; execute_query
// answers hostileRows for the owner-tag query and no rows otherwise. It returns the MCP
// config file.
func hostileMCP(t *testing.T, dir string) string {
	t.Helper()
	type in struct {
		Query         string   `json:"query"`
		Subscriptions []string `json:"subscriptions,omitempty"`
	}
	newServer := func(*http.Request) *sdk.Server {
		s := sdk.NewServer(&sdk.Implementation{Name: "hostile", Version: "1"}, nil)
		sdk.AddTool(s, &sdk.Tool{Name: "validate_query"}, func(context.Context, *sdk.CallToolRequest, in) (*sdk.CallToolResult, map[string]bool, error) {
			return nil, map[string]bool{"valid": true}, nil
		})
		sdk.AddTool(s, &sdk.Tool{Name: "execute_query"}, func(_ context.Context, _ *sdk.CallToolRequest, q in) (*sdk.CallToolResult, any, error) {
			text := `{"count":0,"data":[]}`
			if strings.Contains(q.Query, "tags.owner") {
				text = hostileRows
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
		})
		return s
	}
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(newServer, nil))
	t.Cleanup(srv.Close)
	cfg := filepath.Join(dir, "hostile.mcp.json")
	os.WriteFile(cfg, []byte(`{"mcpServers": {"hostile": {"url": "`+srv.URL+`"}}}`), 0o644)
	return cfg
}

// actedCommands is the runner's processing of a job log (ghtest.ActedCommands).
func actedCommands(log string) ([]string, []int) { return ghtest.ActedCommands(log) }

// parseOutputs reads a $GITHUB_OUTPUT file with GitHub's grammar; a malformed file fails the test.
func parseOutputs(t *testing.T, text string) map[string]string {
	t.Helper()
	out, err := ghtest.ParseFileCommands(text)
	if err != nil {
		t.Fatalf("%v in\n%s", err, text)
	}
	return out
}

// TestRunnerNativeOutputOfTheDemo runs the demo as a GitHub job would see it
// (GITHUB_ACTIONS, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_STATE set; one log stream),
// its checks answered by an MCP server whose rows carry workflow commands, and the gate
// answered at stdin (an embedded control plane without auth: the terminal's user is recorded
// "unverified:octocat"): the outputs parse with GitHub's grammar and hold the run's values; the
// summary has the gate's announcement, the report and a Mermaid graph; the log has one
// group per step, the gate's announcement outside any group, an error annotation on the
// failing step's line, the secret value and the approval token masked before use, and no
// command from the MCP rows acts.
func TestRunnerNativeOutputOfTheDemo(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	values := filepath.Join(dir, "runbooks", "demo.values.yaml")
	v := readFile(t, values)
	os.WriteFile(values, []byte(v+"\napi_token: tok-very-secret-123\n"), 0o644)
	cfg := hostileMCP(t, dir)
	files := map[string]string{}
	for _, k := range []string{"GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_STATE"} {
		files[k] = filepath.Join(dir, strings.ToLower(k))
	}
	cmd := exec.Command(rbookBin, "run", "demo", "--mcp-config", cfg, "--report", "report.md")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("yes\n")
	cmd.Env = append(os.Environ(), "RBOOK_CONTROL_PLANE=", "GITHUB_ACTIONS=true", "GITHUB_ACTOR=octocat", "GITHUB_WORKSPACE="+dir,
		"GITHUB_OUTPUT="+files["GITHUB_OUTPUT"], "GITHUB_STEP_SUMMARY="+files["GITHUB_STEP_SUMMARY"], "GITHUB_STATE="+files["GITHUB_STATE"])
	outb, err := cmd.CombinedOutput() // one stream, as the runner reads it
	log := string(outb)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	st := readState(t, dir)

	// Outputs.
	outs := parseOutputs(t, readFile(t, files["GITHUB_OUTPUT"]))
	ids := regexp.MustCompile(`Approval id +(\S+)`).FindStringSubmatch(log)
	if ids == nil {
		t.Fatalf("no approval id in the log:\n%s", log)
	}
	want := map[string]string{
		"run-id": st.RunID, "status": "COMPLETED", "report-path": "report.md",
		"evidence-path":    filepath.Join(".rbook", st.RunID+".evidence.json"),
		"attestation-path": filepath.Join(".rbook", st.RunID+".attestation.json"),
		"approval-id":      ids[1], "approved-by": "unverified:octocat", "approval-comment": "answered at the executor's terminal: yes",
		"approval-status": "approved",
	}
	if h := outs["chain-head"]; len(h) == len("sha256:")+64 && strings.HasPrefix(h, "sha256:") {
		want["chain-head"] = h // the run's head (docs/evidence-chain.md)
	}
	for k, w := range want {
		if outs[k] != w {
			t.Errorf("output %s = %q, want %q", k, outs[k], w)
		}
	}
	if len(outs) != len(want) {
		t.Errorf("outputs %q", outs)
	}
	if _, err := os.Stat(filepath.Join(dir, outs["evidence-path"])); err != nil {
		t.Errorf("evidence-path: %v", err)
	}
	if s, _ := os.ReadFile(files["GITHUB_STATE"]); len(s) != 0 {
		t.Errorf("GITHUB_STATE written: %q", s)
	}

	// Summary: the report (which replaced the gate's announcement), the graph, the gate's vote.
	sum := readFile(t, files["GITHUB_STEP_SUMMARY"])
	if !strings.HasPrefix(sum, "# Runbook Execution Report\n") || strings.Contains(sum, "waits for a decision") ||
		!strings.Contains(sum, "| 5 | `confirm-rollout` | "+ids[1]+" | approved | unverified:octocat | answered at the executor's terminal: yes |") ||
		!strings.Contains(sum, "| `confirm-rollout` | unverified:octocat | approve | answered at the executor's terminal: yes | no |") ||
		strings.Count(sum, "## Steps") != 1 || !strings.Contains(sum, "```mermaid\nflowchart TD\n") ||
		!strings.Contains(sum, "class s1 fail") || !strings.Contains(sum, "decided by unverified:octocat") || !strings.Contains(sum, st.RunID) {
		t.Errorf("job summary:\n%s", sum)
	}
	if !strings.Contains(sum, "- Attestation: "+want["attestation-path"]+", signed by key `") {
		t.Errorf("the job summary does not link the attestation and its key id:\n%s", sum)
	}

	// The gate's announcement: the commands an approver runs, what the gate needs, and no
	// terminal prompt (stdin is not a terminal: nobody types into a CI log).
	for _, w := range []string{"  Approve        RBOOK_TOKEN=<your approver token> rbook approve " + ids[1] + " --control-plane http://127.0.0.1:",
		"  Needs          1 approval from anyone with the approver role; not from whoever started the run\n"} {
		if !strings.Contains(log, w) {
			t.Errorf("the log lacks %q:\n%s", w, log)
		}
	}
	if strings.Contains(log, "Type yes") {
		t.Errorf("the terminal prompt is in the CI log:\n%s", log)
	}

	// The log as the runner processes it.
	acted, at := actedCommands(log)
	lines := strings.Split(log, "\n")
	var groups []string
	depth, maskedSecret, annotated := 0, -1, false
	tokenMask := ""
	for i, c := range acted {
		switch {
		case strings.HasPrefix(c, "add-mask::x") || strings.HasPrefix(c, "add-mask::y") || strings.HasPrefix(c, "error::pwned"):
			t.Errorf("a command from the MCP rows acted: %q (log line %d)", c, at[i]+1)
		case strings.HasPrefix(c, "group::"):
			if depth != 0 {
				t.Errorf("nested group %q", c)
			}
			depth++
			groups = append(groups, strings.TrimPrefix(c, "group::"))
		case c == "endgroup::":
			depth--
		case c == "add-mask::tok-very-secret-123":
			maskedSecret = at[i]
		case strings.HasPrefix(c, "add-mask::"):
			tokenMask = strings.TrimPrefix(c, "add-mask::")
		case strings.HasPrefix(c, "error file=runbooks/demo.yaml,line=18,title=rbook%3A step 'resources-have-owner-tag' FAIL::"):
			annotated = true
		case strings.HasPrefix(c, "notice "):
		default:
			t.Errorf("unexpected command acted: %q", c)
		}
	}
	wantGroups := []string{"step 1/6 · check 'web-apps-enforce-https'", "step 2/6 · check 'resources-have-owner-tag'",
		"step 3/6 · deploy 'deploy-app-config'", "step 4/6 · rollback 'rollback-app-config'", "step 5/6 · confirm 'confirm-rollout'",
		"step 6/6 · check 'app-running-after-rollout'"}
	if strings.Join(groups, "\n") != strings.Join(wantGroups, "\n") || depth != 0 {
		t.Errorf("groups (depth %d):\n%s", depth, strings.Join(groups, "\n"))
	}
	if maskedSecret < 0 || !annotated || tokenMask == "" {
		t.Errorf("secret masked at line %d, annotated %v, token mask %q", maskedSecret, annotated, tokenMask)
	}
	if n := strings.Count(log, tokenMask); n != 1 {
		t.Errorf("the approval token occurs %d times in the log (only its ::add-mask:: may hold it)", n)
	}
	// The hostile rows are in the log (so the check is real), and none of them acted.
	for _, s := range []string{"::add-mask::x", "::error::pwned", "##[add-mask]y"} {
		if !strings.Contains(log, s) {
			t.Errorf("the log lacks %q", s)
		}
	}
	// The gate's announcement is outside any group.
	inGroup := false
	for i, l := range lines {
		for j, n := range at {
			if n == i {
				if strings.HasPrefix(acted[j], "group::") {
					inGroup = true
				} else if acted[j] == "endgroup::" {
					inGroup = false
				}
			}
		}
		if strings.HasPrefix(l, "  Approval id ") && inGroup {
			t.Errorf("the gate's announcement (line %d) is inside a group", i+1)
		}
	}
}

// ciJob starts `rbook run demo --control-plane url` as a GitHub job step would (GITHUB_ACTIONS,
// GITHUB_OUTPUT, GITHUB_STEP_SUMMARY set; one log stream), with the summary file already
// holding an earlier step's text, and extra environment. It returns the process and the
// output and summary paths.
func ciJob(t *testing.T, dir, url string, extra ...string) (*proc, string, string) {
	t.Helper()
	outPath, sumPath := filepath.Join(dir, "github_output"), filepath.Join(dir, "summary.md")
	os.WriteFile(sumPath, []byte("written before rbook started\n"), 0o644)
	for _, kv := range append([]string{"GITHUB_ACTIONS=true", "GITHUB_OUTPUT=" + outPath, "GITHUB_STEP_SUMMARY=" + sumPath,
		"GITHUB_WORKSPACE=" + dir, "RBOOK_TOKEN=", "RBOOK_SHOW_TOKEN=", "RBOOK_CONTROL_PLANE_AUTH="}, extra...) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return start(t, dir, "run", "demo", "--control-plane", url), outPath, sumPath
}

// checkFinalSummary: the final summary keeps what was there before rbook, has no stale gate
// block, one "## Steps" heading, and the Gates row want.
func checkFinalSummary(t *testing.T, sum, wantRow string) {
	t.Helper()
	if !strings.HasPrefix(sum, "written before rbook started\n") || strings.Contains(sum, "waits for a decision") ||
		strings.Count(sum, "## Steps") != 1 || !strings.Contains(sum, "\n## Step graph\n") || !strings.Contains(sum, wantRow) {
		t.Errorf("final job summary (want the earlier text kept, no gate block, one ## Steps, row %q):\n%s", wantRow, sum)
	}
}

// TestGateOnAnUnauthenticatedControlPlane: a job
// whose executor sends no credentials to a control plane without --auth-file. The gate's
// announcement says that deciding by approval id cannot work there and how to decide
// instead (RBOOK_SHOW_TOKEN=1, --auth-file), needs and who may approve, prefixes the commands
// with RBOOK_TOKEN=…, and prints no terminal prompt; the live summary holds the gate block.
// Interrupted at the gate, the outputs hold the gate's approval id and approval-status
// withdrawn (no approved-by), and the final summary replaces the gate block and shows the
// gate withdrawn. With RBOOK_SHOW_TOKEN=1 the printed token command decides the gate: a
// reject gives approval-status rejected, approved-by the rejecter, and the vote in the summary.
func TestGateOnAnUnauthenticatedControlPlane(t *testing.T) {
	skipShort(t)
	t.Run("withdrawn", func(t *testing.T) {
		dir := workdir(t)
		url := serveCP(t, dir)
		p, outPath, sumPath := ciJob(t, dir, url)
		p.waitFor(t, "  Note ")
		id := approvalIDFrom(t, p)
		log := p.output()
		for _, w := range []string{
			"  Needs          1 approval from anyone with the approver role; not from whoever started the run\n",
			"  Approve        RBOOK_TOKEN=<your approver token> rbook approve " + id + " --control-plane " + url + "\n",
			"  Note           this run sends the control plane no credentials, so it very likely runs without --auth-file, and there a gate cannot be decided by its approval id",
			"set RBOOK_SHOW_TOKEN=1 for the job (only where its log is private)",
		} {
			if !strings.Contains(log, w) {
				t.Errorf("the gate's announcement lacks %q:\n%s", w, log)
			}
		}
		if strings.Contains(log, "Type yes") || strings.Contains(log, "\n> ") {
			t.Errorf("the terminal prompt is in the CI log:\n%s", log)
		}
		if live := readFile(t, sumPath); !strings.HasPrefix(live, "written before rbook started\n") ||
			!strings.Contains(live, "waits for a decision") || !strings.Contains(live, "RBOOK_SHOW_TOKEN=1") {
			t.Errorf("live job summary:\n%s", live)
		}
		p.cmd.Process.Signal(os.Interrupt)
		p.wait(t)
		outs := parseOutputs(t, readFile(t, outPath))
		if outs["approval-id"] != id || outs["approval-status"] != "withdrawn" || outs["approved-by"] != "" || outs["status"] != "IN_PROGRESS" {
			t.Errorf("outputs %q; want approval-id %s, approval-status withdrawn, no approved-by", outs, id)
		}
		if _, ok := outs["approved-by"]; ok {
			t.Errorf("approved-by set for a withdrawn gate: %q", outs)
		}
		sum := readFile(t, sumPath)
		checkFinalSummary(t, sum, "| 5 | `confirm-rollout` | "+id+" | withdrawn |  |  |")
		if !strings.Contains(sum, "confirm · withdrawn (run interrupted)") || !strings.Contains(sum, "class s4 withdrawn") {
			t.Errorf("the graph does not show the gate withdrawn:\n%s", sum)
		}
	})
	t.Run("rejected with the shown token", func(t *testing.T) {
		dir := workdir(t)
		url := serveCP(t, dir)
		p, outPath, sumPath := ciJob(t, dir, url, "RBOOK_SHOW_TOKEN=1")
		p.waitFor(t, "  Approve        rbook approve ")
		m := regexp.MustCompile(`  Approve        rbook approve (\S+) --control-plane`).FindStringSubmatch(p.output())
		if m == nil || strings.HasPrefix(m[1], "a-") {
			t.Fatalf("no token command:\n%s", p.output())
		}
		if strings.Contains(p.output(), "::add-mask::"+m[1]) {
			t.Errorf("the shown token is masked (the runner would print ***):\n%s", p.output())
		}
		if out, code := runAs(t, dir, "", "reject", m[1], "--control-plane", url, "--approver", "alice", "--reason", "mine | <b>x</b>"); code != 0 {
			t.Fatalf("reject with the token: exit %d\n%s", code, out)
		}
		p.wait(t)
		outs := parseOutputs(t, readFile(t, outPath))
		id := approvalIDFrom(t, p)
		if outs["approval-id"] != id || outs["approval-status"] != "rejected" || outs["approved-by"] != "unverified:alice" || outs["approval-comment"] != "mine | <b>x</b>" {
			t.Errorf("outputs %q", outs)
		}
		sum := readFile(t, sumPath)
		checkFinalSummary(t, sum, "| 5 | `confirm-rollout` | "+id+" | rejected | unverified:alice | mine \\| &lt;b&gt;x&lt;/b&gt; |")
		if !strings.Contains(sum, "| `confirm-rollout` | unverified:alice | reject | mine \\| &lt;b&gt;x&lt;/b&gt; | no |") {
			t.Errorf("the summary lacks the vote:\n%s", sum)
		}
	})
}
