//go:build unix

package steps_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
)

// chainPlaybook is a playbook of n deterministic nodes of `true`, each depending on the one
// before, so one node runs at a time and the run's wall time is the sum of the nodes'.
func chainPlaybook(tb testing.TB, n int) *runbook.Plan {
	tb.Helper()
	var b strings.Builder
	b.WriteString("version: \"1.0\"\nname: chain\nnodes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: n%05d\n    type: deterministic\n    command: \"true\"\n    args: []\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    depends: [n%05d]\n", i-1)
		}
	}
	plan, err := runbook.ParsePlaybook("chain.cantbook", []byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return plan
}

// BenchmarkDeterministicNodeChain measures what one playbook node that runs a process costs
// (docs/development.md, "Playbook nodes"; target: the process plus at most 1 ms of rbook's
// own bookkeeping), on a chain of 200 nodes of `true`, as ms/node:
//
//   - spawn: exec.Command("true").Run() in a loop, the process alone;
//   - executor: steps.Deterministic.Execute alone (process group, pipes, output capture);
//   - engine: the playbook scheduler with the executor and a recorder that keeps nothing;
//   - filerecorder: the same with the state file's FileRecorder (durable writes), set as
//     `rbook playbook run` sets it (rewrites overlapped with the node, in place).
//
// The marginal cost of rbook's own work is (engine − spawn), and of its durable record
// (filerecorder − engine).
//
//	go test -run '^$' -bench DeterministicNodeChain -benchtime 3x ./action/steps
func BenchmarkDeterministicNodeChain(b *testing.B) {
	const n = 200
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no `true` on PATH")
	}
	plan := chainPlaybook(b, n)
	det := steps.Deterministic{}
	// perNode reports wall time and this process's own CPU time (user + system, not the
	// children's) per node since mark: on a shared machine the CPU time is the steadier
	// measure of rbook's bookkeeping, the wall time includes waiting for the disk.
	var cpu0 time.Duration
	mark := func(b *testing.B) { cpu0 = selfCPU(b); b.ResetTimer() }
	perNode := func(b *testing.B) {
		nodes := float64(b.N * n)
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/nodes, "ms/node")
		b.ReportMetric(float64((selfCPU(b)-cpu0).Microseconds())/1000/nodes, "cpu-ms/node")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("spawn", func(b *testing.B) {
		mark(b)
		for range b.N {
			for range n {
				if err := exec.Command("true").Run(); err != nil {
					b.Fatal(err)
				}
			}
		}
		perNode(b)
	})
	b.Run("executor", func(b *testing.B) {
		ctx := context.Background()
		run := engine.RunContext{RunID: "bench", Bindings: map[string]any{}}
		mark(b)
		for range b.N {
			for _, s := range plan.Steps {
				if o := det.Execute(ctx, s, run); o.Status != engine.StatusPass {
					b.Fatalf("%s: %s %s", s.Name, o.Status, o.Output)
				}
			}
		}
		perNode(b)
	})
	runChain := func(b *testing.B, recorder func(i int) (engine.Recorder, engine.Start)) {
		mark(b)
		for i := range b.N {
			b.StopTimer()
			rec, start := recorder(i)
			b.StartTimer()
			e := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{rec},
				Executors: map[runbook.StepType]engine.Executor{runbook.TypeDeterministic: det}}
			res, err := e.Run(context.Background(), start)
			if err != nil || res.Status != engine.RunCompleted {
				b.Fatalf("run: %+v %v", res, err)
			}
			if w, ok := rec.(interface{ Wait() error }); ok { // as the pipeline ends a run
				if err := w.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		}
		perNode(b)
	}
	b.Run("engine", func(b *testing.B) {
		runChain(b, func(int) (engine.Recorder, engine.Start) {
			return engine.RecorderFunc(func(context.Context, engine.Transition) error { return nil }),
				engine.Start{RunID: "bench", Fresh: true, Bindings: map[string]any{}}
		})
	})
	b.Run("filerecorder", func(b *testing.B) {
		dir := b.TempDir()
		runChain(b, func(i int) (engine.Recorder, engine.Start) {
			path := filepath.Join(dir, fmt.Sprintf("run-%d.json", i))
			o, err := state.OpenPlaybook(plan, path, state.PlaybookOpenOptions{Inputs: map[string]any{}})
			if err != nil {
				b.Fatal(err)
			}
			st := o.State
			// As `rbook playbook run` keeps it (action/run/pipeline.go).
			return &state.FileRecorder{Path: path, State: st, OverlapWrites: true, ReuseFiles: true},
				engine.Start{RunID: st.RunID, Seq: st.Seq, Fresh: true, Evidence: st.EvidencePack, Bindings: st.Inputs}
		})
	})
}

// selfCPU is the user + system CPU time this process has used (not its children's).
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
