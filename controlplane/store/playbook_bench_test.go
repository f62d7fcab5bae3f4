//go:build unix

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// BenchmarkRecordPlaybookNodeChain measures what the store costs per playbook transition
// when one run records a chain of 200 (and 2,000) nodes one transition at a time, as an
// executor with the embedded control plane does (step_started, then step_finished with the
// node's output, each its own commit): µs/transition of wall time and of this process's CPU
// time. The run's row holds its bindings, which grow with every finished node, so the cost
// per transition is flat in the run's length only as far as rewriting that row is cheap.
//
//	go test -run '^$' -bench RecordPlaybookNodeChain -benchtime 3x ./controlplane/store/
func BenchmarkRecordPlaybookNodeChain(b *testing.B) {
	for _, nodes := range []int{200, 2000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { benchPlaybookChain(b, nodes) })
	}
}

func benchPlaybookChain(b *testing.B, nodes int) {
	s, _ := openTest(b)
	ctx := context.Background()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("chain-%03d", i)
		nr := newRun(id)
		nr.Kind, nr.Bindings = KindPlaybook, json.RawMessage(`{}`)
		b.StopTimer()
		mustStart(b, s, nr)
		b.StartTimer()
		seq := int64(0)
		record := func(kind TransitionKind, n int, ev *Evidence) {
			seq++
			x := Transition{RunID: id, Seq: seq, Kind: kind, At: t0.Add(time.Duration(seq) * time.Millisecond),
				StepIndex: n, StepName: fmt.Sprintf("n%05d", n), StepType: "deterministic", RunStatus: ExecInProgress, Evidence: ev}
			if ev != nil {
				ev.StepName, ev.Type, ev.At = x.StepName, x.StepType, x.At
			}
			if _, err := s.RecordTransition(ctx, x, fence1); err != nil {
				b.Fatal(err)
			}
		}
		for n := range nodes {
			record(KindStepStarted, n, nil)
			record(KindStepFinished, n, &Evidence{Output: `{"stdout":"","exit_code":0}`, Status: StepPass})
		}
	}
	b.StopTimer()
	per := float64(b.N * nodes * 2)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/per, "µs/transition")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/per, "cpu-µs/transition")
	b.ReportMetric(0, "ns/op")
}
