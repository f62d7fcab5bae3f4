//go:build unix

package server_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// BenchmarkRecordTransitionsMetrics is the cost of the metrics on durable RecordTransitions
// throughput (docs/metrics.md, "Cost"; target: at most 5%): the same load as
// BenchmarkRecordTransitionsGRPC's batch=10 (50 concurrent runs over gRPC) against
// `rbook serve --metrics=false` and against the default, metrics on, scraped once a second
// meanwhile (a Prometheus scrape interval is 15 s or more). Compare the two with
// benchstat's -col /metrics (it also reports the server's CPU time per transition):
//
//	go test -run '^$' -bench BenchmarkRecordTransitionsMetrics -benchtime 20000x -count 6 ./controlplane/server/ > metrics.txt
//	benchstat -col /metrics metrics.txt
func BenchmarkRecordTransitionsMetrics(b *testing.B) {
	const runs, size = 50, 10
	for _, on := range []bool{false, true} {
		name, flags := "metrics=off", []string{"--metrics=false"}
		if on {
			name, flags = "metrics=on", nil
		}
		b.Run(name, func(b *testing.B) {
			p := startServe(b, flags...)
			c := newClients(p.URL)
			cc := grpcConn(b, p.Addr)
			perRun := max(b.N/runs, 2)
			prefix := fmt.Sprintf("bench-%d", benchRound.Add(1))
			if on {
				stop := scrapeEvery(b, p.URL+"/metrics", time.Second)
				defer stop()
			}
			// The server's CPU per transition, scrapes included: less at the mercy of other
			// load on the machine than transitions/s.
			cpu, cpuOK := procCPU(p.cmd.Process.Pid)
			benchRecordTransitions(b, c, cc, prefix, runs, perRun, size)
			if after, ok := procCPU(p.cmd.Process.Pid); ok && cpuOK {
				b.ReportMetric(float64((after-cpu).Microseconds())/float64(runs*perRun), "server-cpu-us/transition")
			}
		})
	}
}

// scrapeEvery GETs url every interval until the returned func is called; a scrape that
// does not answer 200 fails b.
func scrapeEvery(b *testing.B, url string, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				resp, err := http.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("scrape: %s", resp.Status)
					return
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
