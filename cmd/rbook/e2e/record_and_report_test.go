package e2e

// What the record, the report and the messages say is what happened.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rbookhq/rbook-action/action/mcp/demoinventory"
)

// toolCall is one tools/call request as the MCP server received it.
type toolCall struct {
	Tool, Query string
}

// recordingMCP serves the demo inventory over streamable HTTP and records the arguments of
// every tools/call exactly as they arrived on the wire. It returns the server's MCP config
// file and a func that returns the calls so far.
func recordingMCP(t *testing.T, dir string) (string, func() []toolCall) {
	t.Helper()
	var mu sync.Mutex
	var calls []toolCall
	inner := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return demoinventory.NewServer() }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name      string `json:"name"`
				Arguments struct {
					Query string `json:"query"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
			mu.Lock()
			calls = append(calls, toolCall{msg.Params.Name, msg.Params.Arguments.Query})
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := filepath.Join(dir, "recording.mcp.json")
	os.WriteFile(cfg, []byte(`{"mcpServers": {"rec": {"url": "`+srv.URL+`"}}}`), 0o644)
	return cfg, func() []toolCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]toolCall(nil), calls...)
	}
}

// A check's input in the state file, the evidence pack JSON, the step
// status output and the control plane's record is, byte for byte, the query the MCP server
// received in validate_query and execute_query (the scope filter injected); the runbook's
// text is kept as source_input.
func TestEvidenceHoldsTheQueryThatRan(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	cfg, calls := recordingMCP(t, dir)
	out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", url, "--mcp-config", cfg)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	got := calls()
	if len(got) != 6 {
		t.Fatalf("the MCP server received %d tool calls, want 6 (validate and execute for 3 checks): %v", len(got), got)
	}
	raw := readFile(t, filepath.Join(dir, ".rbook", "demo.state.json"))
	var st struct {
		RunID        string `json:"run_id"`
		EvidencePack []struct {
			StepName    string  `json:"step_name"`
			Type        string  `json:"type"`
			Input       *string `json:"input"`
			SourceInput *string `json:"source_input"`
		} `json:"evidence_pack"`
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	source := map[string]string{
		"web-apps-enforce-https":    "Resources | where resourceGroup == 'rg-web-prod' and type =~ 'microsoft.web/sites' and properties.httpsOnly == false | project name, resourceGroup",
		"resources-have-owner-tag":  "Resources | where isempty(tags.owner) | project name, type, resourceGroup",
		"app-running-after-rollout": "Resources | where type =~ 'microsoft.web/sites' and name == 'app-checkout' and properties.state != 'Running' | project name, properties.state",
	}
	var checks []string
	for _, e := range st.EvidencePack {
		if e.Type != "check" {
			if e.SourceInput != nil {
				t.Errorf("%s (%s) has source_input %q", e.StepName, e.Type, *e.SourceInput)
			}
			continue
		}
		if e.Input == nil || e.SourceInput == nil {
			t.Fatalf("check %s: input %v, source_input %v", e.StepName, e.Input, e.SourceInput)
		}
		if *e.SourceInput != source[e.StepName] {
			t.Errorf("check %s: source_input %q, want the runbook's text %q", e.StepName, *e.SourceInput, source[e.StepName])
		}
		if !strings.Contains(*e.Input, "| where subscriptionId in~ ('sub-demo-prod') | project") {
			t.Errorf("check %s: input %q has no injected scope filter", e.StepName, *e.Input)
		}
		checks = append(checks, *e.Input)
	}
	if len(checks) != 3 {
		t.Fatalf("%d check entries", len(checks))
	}
	for i, q := range checks {
		v, x := got[2*i], got[2*i+1]
		if v.Tool != "validate_query" || x.Tool != "execute_query" || v.Query != q || x.Query != q {
			t.Errorf("check %d: the server received %q / %q, the evidence says %q", i, v.Query, x.Query, q)
		}
		// The piped step status shows the same input as inline code.
		if !strings.Contains(out, "- Input: `"+q+"`") {
			t.Errorf("the step status output does not show input %q", q)
		}
	}
	var pack []struct {
		Type  string  `json:"type"`
		Input *string `json:"input"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".rbook", st.RunID+".evidence.json"))), &pack); err != nil {
		t.Fatal(err)
	}
	var inPack []string
	for _, e := range pack {
		if e.Type == "check" {
			inPack = append(inPack, *e.Input)
		}
	}
	if strings.Join(inPack, "\n") != strings.Join(checks, "\n") {
		t.Errorf("evidence pack inputs %q, want %q", inPack, checks)
	}
	var onCP []string
	for _, tr := range getRun(t, url, st.RunID).GetTransitions() {
		if e := tr.GetEvidence(); e != nil && e.GetType() == "check" {
			onCP = append(onCP, e.GetInput())
			if e.GetSourceInput() != source[e.GetStepName()] {
				t.Errorf("control plane: check %s has source_input %q, want the runbook's text", e.GetStepName(), e.GetSourceInput())
			}
		}
	}
	if strings.Join(onCP, "\n") != strings.Join(checks, "\n") {
		t.Errorf("control plane inputs %q, want %q", onCP, checks)
	}
}

// reportSteps returns the step table rows of a Markdown report as "n|name|status" (icon
// dropped) and its "Steps" header cell.
func reportSteps(t *testing.T, md string) (string, []string) {
	t.Helper()
	var header string
	var rows []string
	inTable := false
	for _, line := range strings.Split(md, "\n") {
		if v, ok := strings.CutPrefix(line, "| Steps | "); ok {
			header = strings.TrimSuffix(v, " |")
		}
		if line == "|---|---|---|---|---|" {
			inTable = true
			continue
		}
		if inTable {
			if !strings.HasPrefix(line, "| ") {
				break
			}
			c := strings.Split(line, "|")[1:]
			for i := range c {
				c[i] = strings.TrimSpace(c[i])
			}
			_, status, _ := strings.Cut(c[3], " ")
			rows = append(rows, c[0]+"|"+c[1]+"|"+status)
		}
	}
	if header == "" || !inTable {
		t.Fatalf("no Steps header or step table in:\n%s", md)
	}
	return header, rows
}

// End to end: after a rejected gate's rollback (the demo), the report in
// --report FILE and on stdout lists the six steps once, in runbook order, and its header
// counts them.
func TestReportAfterRollbackEndToEnd(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "no\n", "run", "demo", "--control-plane", "off", "--report", "report.md")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	md := readFile(t, filepath.Join(dir, "report.md"))
	if !strings.HasPrefix(md, "# Runbook Execution Report\n") || !strings.Contains(out, md) {
		t.Fatalf("report file (and the same on stdout):\n%s", md)
	}
	header, rows := reportSteps(t, md)
	want := []string{"1|web-apps-enforce-https|PASS", "2|resources-have-owner-tag|FAIL", "3|deploy-app-config|PASS",
		"4|rollback-app-config|PASS (earlier: SKIPPED)", "5|confirm-rollout|FAIL", "6|app-running-after-rollout|not run"}
	if header != "6 in the runbook: 3 passed, 2 failed, 0 timed out, 0 skipped, 1 not run" || strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("header %q rows:\n%s", header, strings.Join(rows, "\n"))
	}
	// The evidence pack stays in execution order: the rollback entry twice, SKIPPED first.
	if s := readState(t, dir); s.steps() != "web-apps-enforce-https=PASS resources-have-owner-tag=FAIL deploy-app-config=PASS rollback-app-config=SKIPPED confirm-rollout=FAIL rollback-app-config=PASS" {
		t.Errorf("evidence order %q", s.steps())
	}
}

// End to end: a cancel at the gate leaves the CANCEL entry last, after the
// six steps (the unreached ones "not run").
func TestReportAfterCancelEndToEnd(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "cancel\nyes\n", "run", "demo", "--control-plane", "off", "--report", "report.md")
	if code != 3 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	header, rows := reportSteps(t, readFile(t, filepath.Join(dir, "report.md")))
	want := []string{"1|web-apps-enforce-https|PASS", "2|resources-have-owner-tag|FAIL", "3|deploy-app-config|PASS",
		"4|rollback-app-config|SKIPPED", "5|confirm-rollout|not run", "6|app-running-after-rollout|not run", "|CANCEL|PASS"}
	if header != "6 in the runbook: 2 passed, 1 failed, 0 timed out, 1 skipped, 2 not run · and 1 other evidence entry" || strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("header %q rows:\n%s", header, strings.Join(rows, "\n"))
	}
}

// SIGINT, SIGTERM or SIGHUP at the gate print no final-looking outcome
// (no "ended IN_PROGRESS", no report, no evidence pack on stdout), but that the run was
// interrupted, where its state is and how to resume it; --report FILE holds the report so far.
func TestInterruptSaysHowToResume(t *testing.T) {
	skipShort(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := workdir(t)
			p := start(t, dir, "run", "demo", "--control-plane", "off", "--report", "report.md")
			p.waitFor(t, "AWAITING_CONFIRMATION")
			p.cmd.Process.Signal(sig)
			if code := p.wait(t); code != 1 {
				t.Fatalf("exit %d\n%s", code, p.output())
			}
			out := p.output()
			name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}[sig]
			want := "was interrupted (interrupted by " + name + " during step 'confirm-rollout' (index 4); the step was stopped). It is not finished: its state is kept in .rbook/demo.state.json and the run can be resumed: rbook run demo (or end it: rbook cancel demo)."
			if !strings.Contains(out, want) {
				t.Errorf("no interruption message %q:\n%s", want, out)
			}
			for _, bad := range []string{"ended IN_PROGRESS", "# Runbook Execution Report", "## Evidence Pack", "Outcome:"} {
				if strings.Contains(out, bad) {
					t.Errorf("the interrupted run printed %q:\n%s", bad, out)
				}
			}
			md := readFile(t, filepath.Join(dir, "report.md"))
			if !strings.HasPrefix(md, "# Runbook Execution Report\n") || !strings.Contains(md, "**IN_PROGRESS**") || !strings.Contains(md, "**So far:** interrupted by "+name) {
				t.Errorf("report so far:\n%s", md)
			}
		})
	}
}

// "its state is kept as …prev-…" is printed only once that file exists: a
// new run refused after resume detection (unreachable control plane) neither moves the
// previous run's state nor says it did.
func TestPrevNoticeOnlyWhenWritten(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	if out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", "off"); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	first := readState(t, dir)
	prev := filepath.Join(".rbook", "demo.state.json.prev-"+first.RunID)
	out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", "http://127.0.0.1:1", "--control-plane-timeout", "300ms")
	if code != 2 || strings.Contains(out, "is kept as") {
		t.Fatalf("refused run: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, prev)); !os.IsNotExist(err) {
		t.Fatalf("the refused run moved the previous state: %v", err)
	}
	if s := readState(t, dir); s.RunID != first.RunID || s.RunStatus != "COMPLETED" {
		t.Fatalf("state after the refused run: %s %s", s.RunID, s.RunStatus)
	}
	out, code = run(t, dir, "yes\n", "run", "demo", "--control-plane", "off")
	if code != 0 || !strings.Contains(out, "The previous run is final; its state is kept as "+prev+".") {
		t.Fatalf("second run: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, prev)); err != nil {
		t.Fatalf("the notice was printed but %s: %v", prev, err)
	}
}

// With no control plane and a standard input that can never answer
// (/dev/null, as the Action runs rbook; or a closed pipe, as a CI runner gives), rbook says at
// the start that the gate will fail at once; when reached it FAILs without waiting for its
// 300 s timeout, and on_fail: rollback runs. A piped answer gets no warning.
func TestGateNobodyCanAnswerSaysSoAtStart(t *testing.T) {
	skipShort(t)
	closedPipe := func(t *testing.T) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		t.Cleanup(func() { r.Close() })
		return r
	}
	for name, stdin := range map[string]func(*testing.T) *os.File{
		"devnull":    func(*testing.T) *os.File { return nil }, // os/exec: /dev/null
		"closedpipe": closedPipe,
	} {
		t.Run(name, func(t *testing.T) {
			dir := workdir(t)
			cmd := exec.Command(rbookBin, "run", "demo", "--control-plane", "off")
			cmd.Dir = dir
			if f := stdin(t); f != nil {
				cmd.Stdin = f
			}
			b, err := cmd.CombinedOutput()
			out := string(b)
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit %v, want 1 (the gate failed, on_fail: rollback)\n%s", err, out)
			}
			warn := strings.Index(out, "Warning: nobody can answer gate 'confirm-rollout' (step 5 of 6): standard input is ")
			first := strings.Index(out, "step 1/6")
			if warn < 0 || first < 0 || warn > first || !strings.Contains(out, "the gate fails at once (FAIL: not confirmed) and its on_fail: rollback applies") {
				t.Fatalf("no warning before the first step:\n%s", out)
			}
			// At the gate itself: no prompt that pretends to wait, only the truth.
			if strings.Contains(out, "is waiting") || !strings.Contains(out, "Gate 'confirm-rollout' cannot be answered: standard input is ") ||
				!strings.Contains(out, "It fails now (on_fail: rollback).") {
				t.Fatalf("the gate's own message:\n%s", out)
			}
			s := readState(t, dir)
			want := "web-apps-enforce-https=PASS resources-have-owner-tag=FAIL deploy-app-config=PASS rollback-app-config=SKIPPED confirm-rollout=FAIL rollback-app-config=PASS"
			if s.RunStatus != "FAILED" || s.steps() != want {
				t.Fatalf("state %s %q", s.RunStatus, s.steps())
			}
			if gate := s.EvidencePack[4]; gate.Output != "not confirmed: nobody can answer this gate: standard input is closed (no input)" {
				t.Errorf("gate output %q", gate.Output)
			}
		})
	}
	out, code := run(t, workdir(t), "yes\n", "run", "demo", "--control-plane", "off")
	if code != 0 || strings.Contains(out, "nobody can answer") {
		t.Errorf("an answer on stdin: exit %d\n%s", code, out)
	}
}

// sgrRe matches an ANSI colour sequence (SGR) in a terminal's output.
var sgrRe = regexp.MustCompile("\x1b\\[[0-9;]*m")

// -o json prints only the final result as one JSON object on stdout (the
// step lines go to stderr); `rbook status --report` prints the Markdown report and `rbook
// status` text lines, one per runbook step.
func TestJSONOutputAndStatusReport(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	cmd := exec.Command(rbookBin, "run", "demo", "--control-plane", "off", "-o", "json")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("yes\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var res struct {
		RunID        string `json:"run_id"`
		RunStatus    string `json:"run_status"`
		TotalSteps   int    `json:"total_steps"`
		EvidencePack []any  `json:"evidence_pack"`
		Message      string `json:"message"`
		StateFile    string `json:"state_file"`
		EvidenceFile string `json:"evidence_file"`
		ExitCode     *int   `json:"exit_code"`
	}
	dec := json.NewDecoder(&stdout)
	if err := dec.Decode(&res); err != nil || dec.More() {
		t.Fatalf("stdout is not one JSON object (%v):\n%s", err, stdout.String())
	}
	s := readState(t, dir)
	if res.RunID != s.RunID || res.RunStatus != "COMPLETED" || res.TotalSteps != 6 || len(res.EvidencePack) != 6 || res.ExitCode == nil || *res.ExitCode != 0 ||
		res.StateFile != ".rbook/demo.state.json" || res.EvidenceFile != ".rbook/"+s.RunID+".evidence.json" || !strings.Contains(res.Message, "resources-have-owner-tag") {
		t.Errorf("result %+v", res)
	}
	if n := len(regexp.MustCompile(`(?m)^. step \d of 6  `).FindAllString(stderr.String(), -1)); n != 6 {
		t.Errorf("stderr has %d step lines, want 6:\n%s", n, stderr.String())
	}

	out, code := run(t, dir, "", "status", "demo", "--report")
	if code != 0 || !strings.HasPrefix(out, "# Runbook Execution Report\n") || !strings.Contains(out, "| 6 | app-running-after-rollout | check | ✅ PASS |") {
		t.Errorf("status --report: exit %d\n%s", code, out)
	}
	out, code = run(t, dir, "", "status", "demo")
	if code != 0 || strings.Contains(out, "# Runbook") || strings.Contains(out, "|---|") ||
		len(regexp.MustCompile(`(?m)^. step \d of 6  `).FindAllString(out, -1)) != 6 || !strings.Contains(out, "step 6 of 6  app-running-after-rollout  check     PASS") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	if out, code := run(t, dir, "", "run", "demo", "-o", "yaml"); code != 2 || !strings.Contains(out, `-o/--output "yaml": use text or json`) {
		t.Errorf("-o yaml: exit %d\n%s", code, out)
	}
	if out, code := run(t, dir, "", "run", "demo", "--report", "no/such/dir/r.md"); code != 2 || !strings.Contains(out, "--report no/such/dir/r.md: folder no/such/dir does not exist") {
		t.Errorf("--report into a missing folder: exit %d\n%s", code, out)
	}
}
