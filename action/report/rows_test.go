package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// evRecorder keeps the evidence a run records, as the state file does.
type evRecorder struct{ ev []engine.Evidence }

func (r *evRecorder) Record(_ context.Context, t engine.Transition) error {
	if t.Evidence != nil {
		r.ev = append(r.ev, *t.Evidence)
	}
	return nil
}

type gateFunc func(ctx context.Context, req engine.GateRequest) (engine.Decision, error)

func (g gateFunc) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	return g(ctx, req)
}

func answer(v engine.Verdict, input string) gateFunc {
	return func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: v, By: "t", Input: input, Source: "test"}, nil
	}
}

// rowsPlan is check c1 (on_fail: halt), deploy d, its rollback rb, gate g (on_fail:
// rollback), check c2: the demo's shape.
func rowsPlan() *runbook.Plan {
	q, a, b := "Resources", "remediation/a.json", "remediation/b.json"
	steps := []runbook.Step{
		{Name: "c1", Type: runbook.TypeCheck, Input: &q, OnFail: runbook.OnFailHalt},
		{Name: "d", Type: runbook.TypeDeploy, Input: &a, OnFail: runbook.OnFailRollback},
		{Name: "rb", Type: runbook.TypeRollback, Input: &b, OnFail: runbook.OnFailHalt},
		{Name: "g", Type: runbook.TypeConfirm, OnFail: runbook.OnFailRollback},
		{Name: "c2", Type: runbook.TypeCheck, Input: &q, OnFail: runbook.OnFailHalt},
	}
	for i := range steps {
		steps[i].Index, steps[i].TimeoutSeconds = i, 5
	}
	return &runbook.Plan{Name: "t", Path: "runbooks/t.yaml", Steps: steps, ContentHash: "h"}
}

// runRows runs rowsPlan from st with check c1 ending c1Status, and returns the report's
// header count line and its step table rows as "n|name|type|status" after the run.
func runRows(t *testing.T, ctx context.Context, gate engine.Gate, c1Status engine.StepStatus, st engine.Start, confirmCancel bool) (string, []string, engine.Result, []engine.Evidence) {
	t.Helper()
	rec := &evRecorder{ev: st.Evidence}
	ex := engine.ExecutorFunc(func(_ context.Context, step runbook.Step, _ engine.RunContext) engine.Outcome {
		if step.Name == "c1" {
			return engine.Outcome{Status: c1Status, Output: "[]"}
		}
		o := engine.Outcome{Status: engine.StatusPass, Output: "ok"}
		if step.Type == runbook.TypeDeploy {
			o.DeployName = "rbook-deploy-d-20260512"
		}
		return o
	})
	p := rowsPlan()
	e := &engine.Engine{Plan: p, Gate: gate, Recorders: []engine.Recorder{rec}, Grace: 100 * time.Millisecond,
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: ex, runbook.TypeDeploy: ex, runbook.TypeRollback: ex}}
	if confirmCancel {
		e.ConfirmCancel = func(context.Context, string) (bool, error) { return true, nil }
	}
	res, err := e.Run(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	var refs []StepRef
	for _, s := range p.Steps {
		refs = append(refs, StepRef{s.Name, string(s.Type)})
	}
	md, err := r.RenderReport(Report{RunID: "R", RunbookName: "t", RunStatus: res.Status, TotalSteps: 99, Steps: refs, Evidence: rec.ev})
	if err != nil {
		t.Fatal(err)
	}
	header, rows := parseReport(t, md)
	return header, rows, res, rec.ev
}

// parseReport returns the "Steps" header cell and the step table's rows of a rendered report.
func parseReport(t *testing.T, md string) (string, []string) {
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
			c := strings.Split(line, "|")[1:] // the cells, each with its padding
			for i := range c {
				c[i] = strings.TrimSpace(c[i])
			}
			status := c[3]
			if _, rest, ok := strings.Cut(status, " "); ok {
				status = rest // drop the icon
			}
			rows = append(rows, c[0]+"|"+c[1]+"|"+c[2]+"|"+status)
		}
	}
	if header == "" || !inTable {
		t.Fatalf("no Steps header or table in:\n%s", md)
	}
	return header, rows
}

func wantRows(t *testing.T, header string, rows []string, wantHeader string, want ...string) {
	t.Helper()
	if header != wantHeader {
		t.Errorf("header %q\nwant   %q", header, wantHeader)
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// After a rollback: the rollback step is listed once (final PASS, earlier
// SKIPPED) in its runbook place, and the step after the failed gate is "not run".
func TestReportAfterRollback(t *testing.T) {
	header, rows, res, ev := runRows(t, context.Background(), answer(engine.Rejected, "no"), engine.StatusPass, engine.Start{RunID: "R", Fresh: true}, false)
	if res.Status != engine.RunFailed || len(ev) != 5 || ev[4].StepName != "rb" {
		t.Fatalf("run %s, evidence %v", res.Status, ev)
	}
	wantRows(t, header, rows, "5 in the runbook: 3 passed, 1 failed, 0 timed out, 0 skipped, 1 not run",
		"1|c1|check|PASS", "2|d|deploy|PASS", "3|rb|rollback|PASS (earlier: SKIPPED)", "4|g|confirm|FAIL", "5|c2|check|not run")
}

// After a cancel: every step once, the ones never reached "not run", the
// CANCEL audit entry last and counted apart.
func TestReportAfterCancel(t *testing.T) {
	header, rows, res, ev := runRows(t, context.Background(), answer(engine.Cancelled, "cancel"), engine.StatusPass, engine.Start{RunID: "R", Fresh: true}, true)
	if res.Status != engine.RunCancelled || ev[len(ev)-1].StepName != "CANCEL" {
		t.Fatalf("run %s, evidence %v", res.Status, ev)
	}
	wantRows(t, header, rows, "5 in the runbook: 2 passed, 0 failed, 0 timed out, 1 skipped, 2 not run · and 1 other evidence entry",
		"1|c1|check|PASS", "2|d|deploy|PASS", "3|rb|rollback|SKIPPED", "4|g|confirm|not run", "5|c2|check|not run", "|CANCEL|cancel|PASS")
}

// After a halt: the failed step and every step after it "not run".
func TestReportAfterHalt(t *testing.T) {
	header, rows, res, _ := runRows(t, context.Background(), answer(engine.Approved, "yes"), engine.StatusFail, engine.Start{RunID: "R", Fresh: true}, false)
	if res.Status != engine.RunFailed {
		t.Fatalf("run %s", res.Status)
	}
	wantRows(t, header, rows, "5 in the runbook: 0 passed, 1 failed, 0 timed out, 0 skipped, 4 not run",
		"1|c1|check|FAIL", "2|d|deploy|not run", "3|rb|rollback|not run", "4|g|confirm|not run", "5|c2|check|not run")
}

// After --step-index jumps: forward, the steps passed over are SKIPPED in
// their place; back (an interrupted run resumed at an earlier index), a step run twice is
// listed once with its final status and the earlier one.
func TestReportAfterStepIndexJump(t *testing.T) {
	fwd := engine.Start{RunID: "R", Fresh: true, Index: 3, SkipFrom: 0, SkipReason: "skipped: t started the run at --step-index 3"}
	header, rows, res, _ := runRows(t, context.Background(), answer(engine.Approved, "yes"), engine.StatusPass, fwd, false)
	if res.Status != engine.RunCompleted {
		t.Fatalf("run %s", res.Status)
	}
	wantRows(t, header, rows, "5 in the runbook: 2 passed, 0 failed, 0 timed out, 3 skipped, 0 not run",
		"1|c1|check|SKIPPED", "2|d|deploy|SKIPPED", "3|rb|rollback|SKIPPED", "4|g|confirm|PASS", "5|c2|check|PASS")

	// Interrupted at the gate, then resumed with --step-index 1: d and rb run again.
	ctx, stop := context.WithCancelCause(context.Background())
	interrupt := gateFunc(func(ctx context.Context, _ engine.GateRequest) (engine.Decision, error) {
		stop(engine.Interrupted{Signal: "SIGINT"})
		<-ctx.Done()
		return engine.Decision{}, ctx.Err()
	})
	header, rows, res, ev := runRows(t, ctx, interrupt, engine.StatusPass, engine.Start{RunID: "R", Fresh: true}, false)
	if res.Status != engine.RunInProgress {
		t.Fatalf("interrupted run %s", res.Status)
	}
	wantRows(t, header, rows, "5 in the runbook: 2 passed, 0 failed, 0 timed out, 1 skipped, 2 not run",
		"1|c1|check|PASS", "2|d|deploy|PASS", "3|rb|rollback|SKIPPED", "4|g|confirm|not run", "5|c2|check|not run")
	back := engine.Start{RunID: "R", Seq: 100, Index: 1, Evidence: ev, LastDeployName: "rbook-deploy-d-20260512"}
	header, rows, res, _ = runRows(t, context.Background(), answer(engine.Approved, "yes"), engine.StatusPass, back, false)
	if res.Status != engine.RunCompleted {
		t.Fatalf("resumed run %s", res.Status)
	}
	wantRows(t, header, rows, "5 in the runbook: 4 passed, 0 failed, 0 timed out, 1 skipped, 0 not run",
		"1|c1|check|PASS", "2|d|deploy|PASS (earlier: PASS)", "3|rb|rollback|SKIPPED (earlier: SKIPPED)", "4|g|confirm|PASS", "5|c2|check|PASS")
}
