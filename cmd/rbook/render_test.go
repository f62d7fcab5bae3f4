package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// sgrRe matches an ANSI colour sequence (SGR) in a terminal's output.
var sgrRe = regexp.MustCompile("\x1b\\[[0-9;]*m")

// syncBuffer is a bytes.Buffer safe for the gate's and the engine's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Without a pty: the terminal decision is injected (ttys), so the terminal
// rendering is exercised in process: colour only with NO_COLOR unset, the gate as a box,
// control characters in a step's output never reach the terminal, and with stdout not a
// terminal the report's Markdown (docs/spec/runbooks.md, "Step 9: Render output") is what
// stdout gets.
func TestInjectedTerminalRendering(t *testing.T) {
	plan := demoPlan(t)
	for _, tc := range []struct {
		name    string
		tt      ttys
		noColor string
	}{
		{"terminal", ttys{stdout: true, stderr: true}, ""},
		{"terminal NO_COLOR", ttys{stdout: true, stderr: true}, "1"},
		{"piped", ttys{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", tc.noColor)
			t.Setenv("TERM", "xterm")
			var out, errw syncBuffer
			rend, err := report.New("")
			if err != nil {
				t.Fatal(err)
			}
			v, err := newView(&out, &errw, tc.tt, rend, plan, "text", "")
			if err != nil {
				t.Fatal(err)
			}
			hostile := "\x1b]0;pwned\x07\x1b[2Jrows found"
			ex := engine.ExecutorFunc(func(_ context.Context, step runbook.Step, _ engine.RunContext) engine.Outcome {
				if step.Name == "resources-have-owner-tag" {
					return engine.Outcome{Status: engine.StatusFail, Output: hostile}
				}
				return engine.Outcome{Status: engine.StatusPass, Output: "[]"}
			})
			pr, pw := io.Pipe()
			defer pw.Close()
			tg := &steps.TerminalGate{In: steps.NewLines(pr), Out: &errw, Who: "t", Echoed: true}
			if v.gateBox {
				tg.Render = v.renderGate
			}
			go io.WriteString(pw, "yes\n")
			e := &engine.Engine{Plan: plan, Gate: tg, Recorders: []engine.Recorder{v}, Prompt: gatePrompt(rend),
				Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: ex, runbook.TypeDeploy: ex, runbook.TypeRollback: ex}}
			res, err := e.Run(context.Background(), engine.Start{RunID: "RBOOK-20260512-demo-00000000", Fresh: true})
			if err != nil || res.Status != engine.RunCompleted {
				t.Fatalf("%v %v", res, err)
			}
			o, g := out.String(), errw.String()
			switch tc.name {
			case "piped":
				if !strings.Contains(o, "### ✅ Step 1/6 · web-apps-enforce-https (check) · PASS") || strings.Contains(o, "step 1 of 6") ||
					strings.Contains(g, "╭─") || !strings.Contains(g, "AWAITING_CONFIRMATION") || sgrRe.MatchString(o+g) {
					t.Errorf("piped: stdout\n%s\nstderr\n%s", o, g)
				}
				return
			}
			if colored := sgrRe.MatchString(o) && sgrRe.MatchString(g); colored != (tc.noColor == "") {
				t.Errorf("colour %v with NO_COLOR=%q:\n%q\n%q", colored, tc.noColor, o, g)
			}
			plain := sgrRe.ReplaceAllString(o, "")
			if n := len(regexp.MustCompile(`(?m)^. step \d of 6  `).FindAllString(plain, -1)); n != 6 || strings.Contains(plain, "###") || strings.Contains(plain, "```") {
				t.Errorf("%d step lines:\n%s", n, plain)
			}
			if !strings.Contains(plain, "✗ step 2 of 6  resources-have-owner-tag   check     FAIL") || !strings.Contains(plain, "\uFFFD\uFFFDrows found") {
				t.Errorf("the failed step's line:\n%s", plain)
			}
			if strings.Contains(o, "\x1b]") || strings.Contains(o, "\x1b[2J") {
				t.Errorf("a step's output drove the terminal: %q", o)
			}
			box := sgrRe.ReplaceAllString(g, "")
			if !strings.Contains(box, "╭─ Confirm gate · step 5 of 6 · confirm-rollout ─") || !strings.Contains(box, "closes at ") || strings.Contains(box, "### ") {
				t.Errorf("gate box:\n%s", box)
			}
		})
	}
}

// demoPlan loads the shipped demo runbook.
func demoPlan(t *testing.T) *runbook.Plan {
	t.Helper()
	plan, err := runbook.Load(runbook.LoadOptions{Dir: filepath.Join("..", "..", "runbooks"), Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// The text line's limits hold: a step name is cut at maxNameColumn runes
// and the note from its output at maxNoteRunes, each ending in "…", and only the output's
// first line is shown.
func TestStepLineLimits(t *testing.T) {
	long := strings.Repeat("n", 60)
	plan := &runbook.Plan{Steps: []runbook.Step{{Name: long, Type: runbook.TypeCheck}}}
	rend, err := report.New("")
	if err != nil {
		t.Fatal(err)
	}
	v, err := newView(io.Discard, io.Discard, ttys{stdout: true}, rend, plan, "text", "")
	if err != nil {
		t.Fatal(err)
	}
	v.color = false
	line := v.stepLine(1, engine.Evidence{StepName: long, Type: "check", Status: engine.StatusFail, Output: strings.Repeat("x", 500) + "\nsecond line"}, 1500*time.Millisecond, "")
	name := strings.Repeat("n", termui.MaxNameColumn-1) + "…"
	note := strings.Repeat("x", termui.MaxNoteRunes-1) + "…"
	if want := "✗ step 1 of 1  " + name + "  check     FAIL         1.5s  " + note; line != want {
		t.Errorf("line\n%q\nwant\n%q", line, want)
	}
}
