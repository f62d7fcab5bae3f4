package steps

import (
	"bytes"
	"context"
	"errors"
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
