package steps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

func TestSimulatedSeedStrings(t *testing.T) {
	day := func() time.Time { return time.Date(2026, 5, 12, 23, 59, 0, 0, time.UTC) }
	tpl := "remediation/app.json"
	dep := runbook.Step{Name: "deploy-app", Type: runbook.TypeDeploy, Input: &tpl, Params: map[string]any{"replicas": 3}}
	o := Simulated{Now: day}.Execute(context.Background(), dep, engine.RunContext{})
	want := "WOULD DEPLOY (NOT EXECUTED in v1) — template: remediation/app.json, params: {\"replicas\":3}\n" +
		`{"deploymentName": "rbook-deploy-deploy-app-20260512", "status": "Succeeded", "simulated": true}`
	if o.Status != engine.StatusPass || o.Output != want || o.DeployName != "rbook-deploy-deploy-app-20260512" {
		t.Errorf("deploy outcome %+v", o)
	}
	rb := runbook.Step{Name: "undo", Type: runbook.TypeRollback, Input: &tpl}
	o = Simulated{Now: day}.Execute(context.Background(), rb, engine.RunContext{})
	if !strings.HasPrefix(o.Output, "WOULD ROLLBACK (NOT EXECUTED in v1) — template: remediation/app.json, params: {}\n") ||
		!strings.Contains(o.Output, `"deploymentName": "rbook-rollback-undo-20260512"`) || o.DeployName != "" {
		t.Errorf("rollback outcome %+v", o)
	}
	if o := (Simulated{}).Execute(context.Background(), runbook.Step{Type: runbook.TypeDeploy}, engine.RunContext{}); o.Status != engine.StatusSkipped {
		t.Errorf("no template: %+v", o)
	}
}

func TestAnswer(t *testing.T) {
	for in, want := range map[string]engine.Verdict{"yes": engine.Approved, " YES\t": engine.Approved, "Confirm": engine.Approved,
		"no": engine.Rejected, "abort": engine.Rejected, "": engine.Rejected, "yes please": engine.Rejected, "cancel": engine.Cancelled, " CANCEL ": engine.Cancelled} {
		if got := Answer(in); got != want {
			t.Errorf("Answer(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestTerminalGateSharesOneInput(t *testing.T) {
	pr, pw := io.Pipe()
	lines := NewLines(pr)
	var out bytes.Buffer
	g := &TerminalGate{In: lines, Out: &out, Who: "ann"}
	// The first gate times out before anything is typed; the line typed next goes to the
	// second gate, not to the abandoned first read.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := g.Await(ctx, engine.GateRequest{StepName: "g1", Deadline: time.Now()}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first gate: %v", err)
	}
	go pw.Write([]byte("\n  \nYes\r\n")) // blank lines are no answer
	d, err := g.Await(context.Background(), engine.GateRequest{StepName: "g2", Prompt: "PROMPT", Deadline: time.Now().Add(time.Minute)})
	if err != nil || d.Verdict != engine.Approved || d.Input != "Yes" || d.By != "ann" || d.Source != "terminal" {
		t.Fatalf("second gate: %+v %v", d, err)
	}
	if !strings.Contains(out.String(), "PROMPT\n") || !strings.Contains(out.String(), "Gate 'g2' is waiting") {
		t.Errorf("output %q", out.String())
	}
	pw.Close()
	if _, err := g.Await(context.Background(), engine.GateRequest{StepName: "g3"}); !errors.Is(err, ErrNoInput) {
		t.Errorf("closed input: %v, want ErrNoInput", err)
	}
}

func TestConfirmCancel(t *testing.T) {
	var out bytes.Buffer
	ask := ConfirmCancel(NewLines(strings.NewReader("yes\nno\n")), &out, func(d string) string { return "cancel " + d + "?" })
	for _, want := range []bool{true, false} {
		ok, err := ask(context.Background(), "dep-1")
		if err != nil || ok != want {
			t.Errorf("got %v %v, want %v", ok, err, want)
		}
	}
	if !strings.Contains(out.String(), "cancel dep-1?") {
		t.Errorf("prompt not shown: %q", out.String())
	}
}

// A line over MaxLineBytes is one (rejected) answer, cut at the limit; the lines after it are
// still read, so the next gate can be answered.
func TestLongLineDoesNotCloseInput(t *testing.T) {
	long := strings.Repeat("n", 1<<20)
	lines := NewLines(strings.NewReader(long + "\nyes\n"))
	g := &TerminalGate{In: lines, Out: io.Discard, Who: "ann"}
	d, err := g.Await(context.Background(), engine.GateRequest{StepName: "g1", Deadline: time.Now().Add(time.Minute)})
	if err != nil || d.Verdict != engine.Rejected || d.Input != long[:MaxLineBytes] {
		t.Fatalf("first gate: verdict %d, input of %d bytes, err %v; want Rejected with the first %d bytes", d.Verdict, len(d.Input), err, MaxLineBytes)
	}
	d, err = g.Await(context.Background(), engine.GateRequest{StepName: "g2", Deadline: time.Now().Add(time.Minute)})
	if err != nil || d.Verdict != engine.Approved || d.Input != "yes" {
		t.Fatalf("second gate: %+v %v, want Approved yes", d, err)
	}
	if _, err := lines.Next(context.Background()); !errors.Is(err, ErrNoInput) {
		t.Errorf("after the last line: %v, want ErrNoInput", err)
	}
}

func TestReadLineLimits(t *testing.T) {
	euro := "€" // 3 bytes: a cut inside it drops the whole character
	tests := []struct {
		name, in string
		want     []string
	}{
		{"exactly the limit", strings.Repeat("a", MaxLineBytes) + "\nb\n", []string{strings.Repeat("a", MaxLineBytes), "b"}},
		{"one byte over", strings.Repeat("a", MaxLineBytes) + "XYZ\r\nb", []string{strings.Repeat("a", MaxLineBytes), "b"}},
		{"cut inside a character", strings.Repeat("a", MaxLineBytes-1) + euro + "\nb\n", []string{strings.Repeat("a", MaxLineBytes-1), "b"}},
		{"crlf and a last line without newline", "one\r\n\r\nlast", []string{"one", "", "last"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := NewLines(strings.NewReader(tt.in))
			var got []string
			for {
				line, err := lines.Next(context.Background())
				if errors.Is(err, ErrNoInput) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, line)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("lines %q, want %q", shorten(got), shorten(tt.want))
			}
		})
	}
}

// shorten keeps failure messages readable when lines are kilobytes long.
func shorten(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) > 20 {
			l = fmt.Sprintf("%s…(%d bytes)", l[:10], len(l))
		}
		out[i] = l
	}
	return out
}

// Typed escape sequences and control characters never reach the decision (and so neither
// the report nor the evidence pack): each becomes one U+FFFD.
func TestGateInputIsCleaned(t *testing.T) {
	lines := NewLines(strings.NewReader("no \x1b[2J\x1b]0;pwn\a\n\x1b[31myes\x1b[0m\n"))
	g := &TerminalGate{In: lines, Out: io.Discard, Who: "ann"}
	for _, want := range []struct {
		input   string
		verdict engine.Verdict
	}{{"no \uFFFD\uFFFD", engine.Rejected}, {"\uFFFDyes\uFFFD", engine.Rejected}} {
		d, err := g.Await(context.Background(), engine.GateRequest{StepName: "g", Deadline: time.Now().Add(time.Minute)})
		if err != nil || d.Input != want.input || d.Verdict != want.verdict {
			t.Errorf("decision %q verdict %d (%v), want %q verdict %d", d.Input, d.Verdict, err, want.input, want.verdict)
		}
	}
}

func TestCleanInput(t *testing.T) {
	const r = "\uFFFD"
	for in, want := range map[string]string{
		"yes":                             "yes",
		"ja, bitte – 確認":                  "ja, bitte – 確認",
		"a\tb":                            "a b",
		"\x1b[2J\x1b[1;31mred":            r + r + "red",
		"\x1b]0;pwn\a after":              r + " after",
		"\x1b]8;;http://x\x1b\\link":      r + "link",
		"\x1bPq#0;2;0;0;0\x1b\\ok":        r + "ok",
		"\x1b(B\x1bc\x1b7x":               r + r + r + "x",
		"\u009b2J\u009d0;t\u009cz":        r + r + "z",
		"nul\x00bell\abs\bdel\x7fcr\rend": "nul" + r + "bell" + r + "bs" + r + "del" + r + "cr" + r + "end",
		"\u0085next":                      r + "next",
		"abc\u202edcb\u2066x\u2069":       "abc" + r + "dcb" + r + "x" + r,
		"bad \xff\xfe utf8":               "bad " + r + " utf8",
		"unfinished \x1b[12":              "unfinished " + r,
		"trailing \x1b":                   "trailing " + r,
	} {
		if got := CleanInput(in); got != want {
			t.Errorf("CleanInput(%q) = %q, want %q", in, got, want)
		}
	}
}
