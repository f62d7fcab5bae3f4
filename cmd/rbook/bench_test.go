package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// BenchmarkEngineWithControlPlane1000Steps is the target "engine overhead per step
// (1,000-step runbook, durable state file + control plane)": executors return at once, so
// what is measured is the engine, the state file and RecordTransition to a real control
// plane (in-process, SQLite on disk) over loopback HTTP.
//
//	go test -run '^$' -bench EngineWithControlPlane -benchtime 2x ./cmd/rbook
func BenchmarkEngineWithControlPlane1000Steps(b *testing.B) {
	const n = 1000
	dir := b.TempDir()
	// RBOOK_BENCH_CP_DIR puts the control plane's database elsewhere (another disk, or
	// /dev/shm to take its fsyncs off the executor's disk, as a remote control plane would).
	cpDir := dir
	if d := os.Getenv("RBOOK_BENCH_CP_DIR"); d != "" {
		cpDir = d
	}
	cp, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: filepath.Join(cpDir, fmt.Sprintf("cp-%d.db", time.Now().UnixNano())),
		Options: server.Options{Secret: []byte(benchSecret), Logger: discardLogger()}})
	if err != nil {
		b.Fatal(err)
	}
	defer cp.Close()
	q := "Resources | project name"
	steps := make([]runbook.Step, n)
	for i := range steps {
		steps[i] = runbook.Step{Index: i, Name: fmt.Sprintf("step-%04d", i), Type: runbook.TypeCheck, Input: &q, OnFail: runbook.OnFailContinue, TimeoutSeconds: 30}
	}
	digest := strings.Repeat("ab", 32)
	plan := &runbook.Plan{Name: "bench", Steps: steps, SchemaHash8: "00000000", ContentHash: digest}
	pass := engine.ExecutorFunc(func(context.Context, runbook.Step, engine.RunContext) engine.Outcome {
		return engine.Outcome{Status: engine.StatusPass, Output: `{"count":0,"data":[]}`}
	})
	c := cpclient.New(cp.URL(), "")
	var runTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		path := filepath.Join(dir, fmt.Sprintf("run-%d.json", i))
		o, err := state.Open(plan, path, state.OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		o.State.RunID = fmt.Sprintf("%s.%d", o.State.RunID, i+2)
		if _, err := c.StartRun(context.Background(), cpclient.RunInfo{RunID: o.State.RunID, RunbookName: plan.Name, PlanDigest: digest, SchemaHash8: plan.SchemaHash8, TotalSteps: n, OwnerID: o.State.OwnerID}); err != nil {
			b.Fatal(err)
		}
		file := &state.FileRecorder{Path: path, State: o.State, KeepOutbox: true}
		rec := &cpclient.Recorder{C: c, Acked: file.Ack}
		e := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{file, rec}, Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: pass}}
		t0 := time.Now()
		res, err := e.Run(context.Background(), engine.Start{RunID: o.State.RunID, Fresh: true})
		runTime += time.Since(t0)
		if err == nil {
			err = rec.Drain(context.Background())
		}
		if err != nil || res.Status != engine.RunCompleted {
			b.Fatal(err, res)
		}
	}
	// ms/step: the run's critical path (the engine and the durable state file; transitions
	// are replicated to the control plane asynchronously). drained-ms/step: until the control
	// plane has stored every transition too.
	b.ReportMetric(float64(runTime.Microseconds())/1000/float64(b.N*n), "ms/step")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*n), "drained-ms/step")
}

// benchSecret is the benchmark control plane's approval secret (any 32 bytes).
const benchSecret = "bench-secret-0123456789abcdef012"

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
