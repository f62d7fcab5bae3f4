package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/metrics"
)

// BenchmarkRecordHooks is what one RecordTransitions call adds for the metrics on its hot
// path (docs/metrics.md, "Cost"): the commit latency and the transitions it stored. Compare
// it with the server's CPU time per transition that BenchmarkRecordTransitionsMetrics
// (controlplane/server) reports.
func BenchmarkRecordHooks(b *testing.B) {
	m := newMetrics()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.StoreCommit(3 * time.Millisecond)
			m.TransitionsRecorded(10)
		}
	})
}

// BenchmarkGateDecided is one decision counted with its labels bounded.
func BenchmarkGateDecided(b *testing.B) {
	m := newMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.GateDecided("console", "approved")
	}
}

// BenchmarkScrape is one full gather of the registry, with the scrape-time gauges' store
// reads replaced by a fixed snapshot.
func BenchmarkScrape(b *testing.B) {
	m := newMetrics()
	m.SetSnapshot(func(context.Context) metrics.Snapshot {
		return metrics.Snapshot{DatabaseUp: true, Store: &metrics.StoreState{RunsInProgress: map[string]int{"running": 3}}}
	})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Registry().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
