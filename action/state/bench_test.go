package state

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// BenchmarkEngineOverhead1000Steps measures what the engine, the journal and the state file add per step
// (target, docs/development.md "Benchmarks": ≤ 1 ms beyond the step's own work) on a generated
// 1,000-step runbook whose executors return at once. Reported as ms/step.
//
//	go test -run '^$' -bench EngineOverhead -benchtime 3x ./action/state
func BenchmarkEngineOverhead1000Steps(b *testing.B) {
	const n = 1000
	q, tpl := "Resources | where tags.owner == '' | project name", "remediation/app.json"
	steps := make([]runbook.Step, n)
	for i := range steps {
		steps[i] = runbook.Step{Index: i, Name: fmt.Sprintf("step-%04d", i), Type: runbook.TypeCheck, Input: &q, OnFail: runbook.OnFailContinue, TimeoutSeconds: 30}
		if i%10 == 5 {
			steps[i].Type, steps[i].Input = runbook.TypeDeploy, &tpl
		}
	}
	plan := &runbook.Plan{Name: "bench", Steps: steps, SchemaHash8: "00000000", ContentHash: "h"}
	pass := engine.ExecutorFunc(func(context.Context, runbook.Step, engine.RunContext) engine.Outcome {
		return engine.Outcome{Status: engine.StatusPass, Output: `{"count": 0, "data": []}`}
	})
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		path := filepath.Join(dir, fmt.Sprintf("run-%d.json", i))
		o, err := Open(plan, path, OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		e := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{&FileRecorder{Path: path, State: o.State}},
			Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: pass, runbook.TypeDeploy: pass}}
		res, err := e.Run(context.Background(), engine.Start{RunID: o.State.RunID, Fresh: true})
		if err != nil || res.Status != engine.RunCompleted {
			b.Fatal(err, res)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N*n), "ms/step")
}
