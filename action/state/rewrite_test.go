package state

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// runChain runs plan (deploy steps) through a FileRecorder with ReuseFiles at path, calling
// between(step) as each step runs, after the flush that recorded its start; it returns the
// recorder after Wait, having checked that the file is the final State.
func runChain(t *testing.T, path string, plan *runbook.Plan, between func(runbook.Step)) *FileRecorder {
	t.Helper()
	return runChainWith(t, path, plan, chainOpts{}, func(_ *FileRecorder, s runbook.Step) { between(s) })
}

// chainOpts are the FileRecorder's other switches for runChainWith.
type chainOpts struct{ keepOutbox, overlapWrites bool }

// runChainWith is runChain with opts's switches set too, and the recorder handed to between
// (nil: none).
func runChainWith(t *testing.T, path string, plan *runbook.Plan, opts chainOpts, between func(*FileRecorder, runbook.Step)) *FileRecorder {
	t.Helper()
	o, err := Open(plan, path, OpenOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	fr := &FileRecorder{Path: path, State: o.State, KeepOutbox: opts.keepOutbox, OverlapWrites: opts.overlapWrites, ReuseFiles: true}
	exec := engine.ExecutorFunc(func(_ context.Context, s runbook.Step, _ engine.RunContext) engine.Outcome {
		if between != nil {
			between(fr, s)
		}
		return engine.Outcome{Status: engine.StatusPass, Output: `{"count": 0}`}
	})
	e := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{fr}, Executors: map[runbook.StepType]engine.Executor{runbook.TypeDeploy: exec}}
	if res, err := e.Run(t.Context(), engine.Start{RunID: o.State.RunID, Fresh: true}); err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if err := fr.Wait(); err != nil {
		t.Fatal(err)
	}
	disk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := new(Pack).Encode(fr.State); !bytes.Equal(disk, want) {
		t.Fatalf("the state file is not the final State:\n%s", disk)
	}
	return fr
}

// temps lists the temp files beside the state file at path.
func temps(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAReaderOfAnOlderVersionKeepsItWhole: a reader that opened the state file and keeps it
// open while the run goes on reads the version it opened, byte for byte, however many
// rewrites follow: the rewrite that would write into that file finds it open and writes a
// new one instead. The state file itself stays the State.
func TestAReaderOfAnOlderVersionKeepsItWhole(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to replace a file a reader holds open: no version is reused under a reader there")
	}
	path := filepath.Join(t.TempDir(), "demo.state.json")
	var reader *os.File
	var opened []byte
	runChain(t, path, deployChain(8), func(s runbook.Step) {
		switch s.Index {
		case 2:
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			reader = f
			if opened, err = io.ReadAll(f); err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(path, opened); err != nil {
				t.Fatal(err)
			}
		case 6:
			again := make([]byte, len(opened)+4096)
			n, err := reader.ReadAt(again, 0)
			if err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if !bytes.Equal(again[:n], opened) {
				t.Errorf("the file the reader opened at step 2 changed under it by step 6:\n%s\n----\n%s", again[:n], opened)
			}
			reader.Close()
		}
	})
}
