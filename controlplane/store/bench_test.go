//go:build unix

package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRecordTransitionParallel measures durable transitions per second with 50 concurrent
// writers, each on its own run (target, docs/development.md "Benchmarks": >= 10,000/s on 2 cores,
// p99 <= 20 ms at the RPC level). "group" is the store as configured; "linger=0" is group commit
// without the writer's linger (writeLoop); "batch=1" commits every request alone, the single-row
// baseline group commit is measured against; "group+outbox" is "group" with the notification outbox
// enabled (docs/notifications.md: transitions that do not end a run write nothing to it, so its
// throughput should match "group").
//
//	go test -run='^$' -bench=RecordTransitionParallel -benchtime=20000x ./controlplane/store/
func BenchmarkRecordTransitionParallel(b *testing.B) {
	for _, bc := range []struct {
		name   string
		outbox bool
		opts   []Option
	}{{"group", false, nil}, {"group+outbox", true, nil}, {"linger=0", false, []Option{WithLinger(0)}}, {"batch=1", false, []Option{WithMaxBatch(1)}}} {
		b.Run(bc.name, func(b *testing.B) { benchRecord(b, 50, bc.outbox, bc.opts...) })
	}
}

func benchRecord(b *testing.B, writers int, outbox bool, opts ...Option) {
	s, _ := openTest(b, opts...)
	if outbox {
		s.EnableNotificationOutbox()
	}
	ctx := context.Background()
	for w := 0; w < writers; w++ {
		mustStart(b, s, newRun(fmt.Sprintf("bench-%02d", w)))
	}
	var next atomic.Int64
	lat := make([][]time.Duration, writers)
	before := s.Stats()
	var wg sync.WaitGroup
	cpuBefore := cpuTime()
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			run := fmt.Sprintf("bench-%02d", w)
			for seq := int64(1); next.Add(1) <= int64(b.N); seq++ {
				x := tr(run, seq)
				t := time.Now()
				if _, err := s.RecordTransition(ctx, x, fence1); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cpuTime() - cpuBefore
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(float64(len(all))*p))].Microseconds()) / 1000
	}
	after := s.Stats()
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "transitions/s")
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	// Process CPU (user+system) per transition: with fsync free, 2 cores / this is the ceiling.
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(len(all), 1)), "cpu_us/transition")
	if c := after.Commits - before.Commits; c > 0 {
		b.ReportMetric(float64(after.Requests-before.Requests)/float64(c), "req/commit")
		// COMMIT latency (WAL writes + fsync): what a batch waits for after its statements.
		b.ReportMetric(float64((after.CommitTime-before.CommitTime).Microseconds())/float64(c)/1000, "commit_ms")
	}
}

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procRSS reads VmRSS and VmHWM (bytes) from /proc/self/status.
func procRSS() (rss, hwm int64, ok bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss = n << 10
		case "VmHWM:":
			hwm = n << 10
		}
	}
	return rss, hwm, rss > 0
}

// BenchmarkMemory10kRuns loads 10,000 runs x 50 transitions (the memory target's data set,
// docs/development.md "Benchmarks") through RecordTransition with 50 writers, then reads a little,
// and reports the database size and the Go heap in use: the store keeps nothing per run in memory.
//
//	go test -run='^$' -bench=Memory10kRuns -benchtime=1x -timeout=30m ./controlplane/store/
func BenchmarkMemory10kRuns(b *testing.B) {
	const runs, perRun, writers = 10_000, 50, 50
	for i := 0; i < b.N; i++ {
		s, path := openTest(b)
		ctx := context.Background()
		ids := make(chan string, runs)
		for r := 0; r < runs; r++ {
			ids <- fmt.Sprintf("RBOOK-20260512-mem-%05d", r)
		}
		close(ids)
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range ids {
					if _, _, err := s.StartRun(ctx, newRun(id)); err != nil {
						b.Error(err)
						return
					}
					for seq := int64(1); seq <= perRun; seq++ {
						x := tr(id, seq)
						if seq%2 == 0 {
							x.Kind = KindStepFinished
							x.Evidence = &Evidence{StepName: x.StepName, Type: "check", Input: strp("query"),
								Output: `{"rows":[{"region":"westeurope","healthy":true}]}`, Status: StepPass, At: x.At}
						}
						if _, err := s.RecordTransition(ctx, x, fence1); err != nil {
							b.Error(err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		load := time.Since(start)
		for r := 0; r < 100; r++ {
			if _, _, err := s.GetRun(ctx, fmt.Sprintf("RBOOK-20260512-mem-%05d", r*97)); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.ListRuns(ctx, RunFilter{PageSize: MaxPageSize}); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		var dbBytes int64
		if testOnPostgres() {
			if err := s.reader.QueryRowContext(ctx, "SELECT pg_database_size(current_database())").Scan(&dbBytes); err != nil {
				b.Fatal(err)
			}
		} else {
			matches, _ := filepath.Glob(path + "*") // the file, -wal and -shm
			for _, m := range matches {
				if fi, err := os.Stat(m); err == nil {
					dbBytes += fi.Size()
				}
			}
		}
		b.ReportMetric(float64(runs*perRun)/load.Seconds(), "transitions/s")
		b.ReportMetric(float64(dbBytes)/(1<<20), "db_MiB")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap_inuse_MiB")
		b.ReportMetric(float64(ms.Sys)/(1<<20), "go_sys_MiB")
		// On PostgreSQL the RSS is this process's only (the server's is not counted).
		// RSS includes SQLite's own allocations (page caches of the writer and readers),
		// which the Go heap does not see. Linux only; absent elsewhere.
		if rss, hwm, ok := procRSS(); ok {
			b.ReportMetric(float64(rss)/(1<<20), "rss_MiB")
			b.ReportMetric(float64(hwm)/(1<<20), "peak_rss_MiB")
		}
	}
}
