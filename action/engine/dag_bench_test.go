package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// BenchmarkDAGScheduler1000Nodes measures what the scheduler adds per playbook node (ready
// queue, bindings copy, evidence JSON, one recorder) on a 1,000-node DAG of 10 layers of 100
// nodes, each node depending on one node of the layer before, with executors that return at
// once. Reported as µs/node. Recording is in memory: the state file's cost is measured by
// BenchmarkEngineOverhead1000Steps in action/state.
//
//	go test -run '^$' -bench DAGScheduler -benchtime 5x ./action/engine
func BenchmarkDAGScheduler1000Nodes(b *testing.B) {
	const layers, width = 10, 100
	var nodes []pnode
	for l := range layers {
		for w := range width {
			id := fmt.Sprintf("n%d-%d", l, w)
			if l == 0 {
				nodes = append(nodes, det(id))
			} else {
				nodes = append(nodes, det(id, fmt.Sprintf("n%d-%d", l-1, (w*7)%width)))
			}
		}
	}
	plan := pbPlan(nodes, nil)
	pass := engine.ExecutorFunc(func(_ context.Context, step runbook.Step, _ engine.RunContext) engine.Outcome {
		return engine.Outcome{Status: engine.StatusPass, Value: map[string]any{"ok": true, "node": step.Name}}
	})
	b.ResetTimer()
	for range b.N {
		var count int
		rec := engine.RecorderFunc(func(context.Context, engine.Transition) error { count++; return nil })
		e := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{rec},
			Executors: map[runbook.StepType]engine.Executor{runbook.TypeDeterministic: pass}}
		res, err := e.Run(context.Background(), engine.Start{RunID: "bench", Fresh: true, Bindings: map[string]any{}})
		if err != nil || res.Status != engine.RunCompleted {
			b.Fatalf("run: %v %v", res, err)
		}
		if want := 2 + 2*layers*width; count != want {
			b.Fatalf("%d transitions, want %d", count, want)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*layers*width), "µs/node")
}
