//go:build unix

package server_test

// The control-plane benchmarks, on SQLite and on PostgreSQL (the latter
// when RBOOK_TEST_POSTGRES_URL names a server and this build's store opens postgres://
// DSNs; each PostgreSQL sub-benchmark creates its own database and drops it). From the
// repository root:
//
//	go test -run '^$' -bench 'BenchmarkRecordTransitionsGRPCByDatabase' -benchtime 50000x ./controlplane/server/
//	    durable transitions/s from 50 concurrent runs over gRPC (grpc-go), as single
//	    RecordTransition calls and as RecordTransitions batches of 10 and 100; server CPU per
//	    transition. Targets: >= 15,000/s on SQLite, >= 10,000/s on PostgreSQL. With
//	    RBOOK_BENCH_INPROCESS=1 the control plane runs in the test process, so that
//	    -cpuprofile shows the server's costs too.
//	go test -run '^$' -bench 'BenchmarkApproveToResumed' -benchtime 200x ./controlplane/server/
//	    Approve RPC sent -> the executor's gate wait (cpclient.Gate.Await, the real
//	    RequestApproval + WatchApproval path) returned APPROVED; p50/p99/max. On one replica,
//	    and across two (Approve through B, the waiter on A): two Servers in-process, over one
//	    SQLite store, or over two stores opened on one PostgreSQL database.
//	    Target: p99 <= 50 ms.
//	go test -run '^$' -bench 'BenchmarkServeRSSByDatabase' -benchtime 1x -timeout 20m ./controlplane/server/
//	    a real `rbook serve` loaded with 10,000 runs x 50 transitions over gRPC (50 loaders,
//	    RecordTransitions batches of 10); VmRSS/VmHWM of the serve process after the load and
//	    after a ListRuns pagination over every run and 10 WatchRun replays. Target: <= 150 MiB.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// psql runs one SQL command against the server at dsn with the psql client and returns its
// unaligned, tuples-only output. Errors: psql's, with its stderr.
func psql(dsn, sql string) (string, error) {
	out, err := exec.Command("psql", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", sql).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("psql %q: %w: %s", sql, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// pgBenchDB creates an empty database rbook_bench_<n> on the server RBOOK_TEST_POSTGRES_URL
// names and returns its DSN; it is dropped (WITH (FORCE)) when tb ends. It skips without the
// variable or without psql (the client that creates it).
func pgBenchDB(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("RBOOK_TEST_POSTGRES_URL")
	if base == "" {
		tb.Skip(pgSkipMessage)
	}
	if _, err := exec.LookPath("psql"); err != nil {
		tb.Skipf("psql not found (it creates the benchmark's database): %v", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("RBOOK_TEST_POSTGRES_URL: %v", err)
	}
	name := fmt.Sprintf("rbook_bench_%d_%d", os.Getpid(), benchRound.Add(1))
	if _, err := psql(base, "CREATE DATABASE "+name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if _, err := psql(base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Error(err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

var (
	pgProbeOnce sync.Once
	pgProbeErr  error
)

// requirePGStore skips unless this build's `rbook serve --db postgres://…` really stores in
// PostgreSQL: it starts one serve on a scratch database, in a scratch
// working folder (an older build takes the DSN for a SQLite path and creates it there), and
// checks that schema_migrations appeared in the database. Probed once per test binary.
func requirePGStore(tb testing.TB) {
	tb.Helper()
	if os.Getenv("RBOOK_TEST_POSTGRES_URL") == "" {
		tb.Skip(pgSkipMessage)
	}
	pgProbeOnce.Do(func() { pgProbeErr = probePGStore(pgBenchDB(tb)) })
	if pgProbeErr != nil {
		tb.Skipf("the PostgreSQL store is not supported by this build (%v); %s", pgProbeErr, pgSkipMessage)
	}
}

func probePGStore(dsn string) error {
	dir, err := os.MkdirTemp("", "rbook-pg-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(rbookBin, "serve", "--addr", "127.0.0.1:0", "--db", dsn)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RBOOK_APPROVAL_SECRET="+testSecret)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	buf := make([]byte, 4096)
	n, _ := stdout.Read(buf) // the "listening on" line, or EOF when it exits
	if !listeningRE.Match(buf[:n]) {
		return fmt.Errorf("rbook serve --db postgres://… did not start: %s", strings.TrimSpace(stderr.String()))
	}
	got, err := psql(dsn, "SELECT to_regclass('schema_migrations') IS NOT NULL")
	if err != nil {
		return err
	}
	if got != "t" {
		return errors.New("rbook serve --db postgres://… created no schema_migrations table in the database (it opened something else)")
	}
	return nil
}

// benchBackends are the stores a benchmark runs on: "sqlite" (a file in a temp folder) and
// "postgres" (a fresh database, or a skip).
var benchBackends = []string{"sqlite", "postgres"}

// startServeOn starts `rbook serve` on a fresh database of backend.
func startServeOn(tb testing.TB, backend string) *serveProc {
	tb.Helper()
	if backend == "sqlite" {
		return startServe(tb)
	}
	requirePGStore(tb)
	dsn := pgBenchDB(tb)
	// The last --db wins. In a scratch folder: this build's serve may still make a
	// "<dsn>.serving" file of the DSN as if it were a path.
	p := startServeDir(tb, tb.TempDir(), "--db", dsn)
	p.DB = dsn
	return p
}

// BenchmarkRecordTransitionsGRPCByDatabase measures the target "transitions/s over gRPC with
// 50 concurrent runs (SQLite, PostgreSQL)": b.N counts transitions; every one is committed
// before its call returns. Metrics: transitions/s, call-p50/p99-ms, server-cpu-us/op (the
// serve process's user+system CPU per transition).
func BenchmarkRecordTransitionsGRPCByDatabase(b *testing.B) {
	const runs = 50
	for _, backend := range benchBackends {
		for _, size := range []int{1, 10, 100} {
			name := fmt.Sprintf("%s/batch=%d", backend, size)
			if size == 1 {
				name = backend + "/single"
			}
			b.Run(name, func(b *testing.B) {
				var url string
				pid := 0
				if os.Getenv("RBOOK_BENCH_INPROCESS") == "1" {
					url = serveInProcess(b, backend, 1)[0] // -cpuprofile then covers the server
				} else {
					p := startServeOn(b, backend)
					url, pid = p.URL, p.cmd.Process.Pid
				}
				c := newClients(url)
				cc := grpcConn(b, strings.TrimPrefix(url, "http://"))
				perRun := max(b.N/runs, 2)
				prefix := fmt.Sprintf("bench-%d", benchRound.Add(1))
				cpu0, cpuOK := procCPU(pid)
				benchRecordTransitions(b, c, cc, prefix, runs, perRun, size)
				if cpu1, ok := procCPU(pid); ok && cpuOK && pid != 0 {
					b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(runs*perRun), "server-cpu-us/op")
				}
			})
		}
	}
}

// replicas are the two control-plane URLs of an Approve → resumed measurement: the waiter
// talks to A, the approver to B (the same URL for one replica).
type replicas struct{ A, B string }

// inProcessReplicas serves two server.Server handlers, each on its own loopback listener
// (h2c), as two replicas: on SQLite both over one store (SQLite allows one serving process
// per file, so its two-replica case is in-process, sharing the store), on PostgreSQL each
// over its own store.Open of one database dsn (their only link is the database: its rows
// and its notifications, docs/decisions/change-fanout.md). Closed when tb ends.
func inProcessReplicas(tb testing.TB, backend string) replicas {
	tb.Helper()
	urls := serveInProcess(tb, backend, 2)
	return replicas{A: urls[0], B: urls[1]}
}

// serveInProcess serves n server.Server handlers on a fresh database of backend, in this
// process, and returns their URLs (see inProcessReplicas).
func serveInProcess(tb testing.TB, backend string, n int) []string {
	tb.Helper()
	ctx := context.Background()
	dsn := filepath.Join(tb.TempDir(), "cp.db")
	if backend != "sqlite" {
		requirePGStore(tb)
		dsn = pgBenchDB(tb)
	}
	var stores []*store.Store
	for i := range n {
		if i > 0 && backend == "sqlite" {
			stores = append(stores, stores[0])
			continue
		}
		st, err := store.Open(ctx, dsn)
		if err != nil {
			tb.Fatal(err)
		}
		stores = append(stores, st)
	}
	tb.Cleanup(func() { // runs after serveHandler's cleanups have closed the handlers
		for i, st := range stores {
			if i > 0 && st == stores[0] {
				continue
			}
			if err := st.Close(); err != nil {
				tb.Error(err)
			}
		}
	})
	var urls []string
	for _, st := range stores {
		h, err := server.New(st, server.Options{Secret: []byte(testSecret), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			tb.Fatal(err)
		}
		urls = append(urls, serveHandler(tb, h))
	}
	return urls
}

// watchOpened wraps the executor's ApprovalService client: it signals each WatchApproval
// that returned (the gate's watch is open on the server), so the approver acts on a waiting
// gate, as a person does, and not on one still opening.
type watchOpened struct {
	rbookv1connect.ApprovalServiceClient
	opened chan struct{}
}

func (w watchOpened) WatchApproval(ctx context.Context, req *rbookv1.WatchApprovalRequest) (*connect.ServerStreamForClient[rbookv1.WatchApprovalResponse], error) {
	s, err := w.ApprovalServiceClient.WatchApproval(ctx, req)
	if err == nil {
		w.opened <- struct{}{}
	}
	return s, err
}

// BenchmarkApproveToResumed measures the target "Approve → resumed p99, on one
// replica and across two": each iteration opens a gate through the executor's real gate path
// (cpclient.Gate.Await on replica A), waits until its WatchApproval is open, then times the
// Approve RPC sent through replica B until Await returned APPROVED. Metrics: p50-ms, p99-ms,
// max-ms, approve-rpc-p99-ms (the Approve call alone).
func BenchmarkApproveToResumed(b *testing.B) {
	for _, backend := range benchBackends {
		b.Run(backend+"/one-replica", func(b *testing.B) {
			p := startServeOn(b, backend)
			benchApproveToResumed(b, replicas{A: p.URL, B: p.URL})
		})
		b.Run(backend+"/two-replicas", func(b *testing.B) {
			benchApproveToResumed(b, inProcessReplicas(b, backend))
		})
	}
}

func benchApproveToResumed(b *testing.B, r replicas) {
	ctx := context.Background()
	waiter := cpclient.New(r.A, "")
	opened := make(chan struct{}, 8)
	waiter.Approvals = watchOpened{waiter.Approvals, opened}
	runID := fmt.Sprintf("bench-resume-%d", benchRound.Add(1))
	if _, err := waiter.StartRun(ctx, cpclient.RunInfo{RunID: runID, RunbookName: "bench", PlanDigest: digest("plan"), SchemaHash8: "0123abcd",
		TotalSteps: b.N + 1, OwnerID: testOwner, Lease: time.Hour}); err != nil {
		b.Fatal(err)
	}
	approver := newClients(r.B, connect.WithGRPC())
	lat := make([]time.Duration, 0, b.N)
	rpc := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for len(opened) > 0 {
			<-opened // a stale signal (a watch that reconnected)
		}
		w := startGateWait(ctx, waiter, runID, i, b.N+1)
		cancel, done := w.cancel, w.done
		var token string
		select {
		case token = <-w.tokens:
		case r := <-done:
			cancel()
			b.Fatalf("gate %d ended before it opened: %v %v", i, r.d, r.err)
		}
		select {
		case <-opened:
		case r := <-done:
			cancel()
			b.Fatalf("gate %d ended before its watch opened: %v %v", i, r.d, r.err)
		}
		b.StartTimer()
		began := time.Now()
		if _, err := approver.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: token, Approver: "bench"}); err != nil {
			cancel()
			b.Fatalf("Approve through %s: %v", r.B, err)
		}
		rpc = append(rpc, time.Since(began))
		var res gateResult
		select {
		case res = <-done:
		case <-time.After(10 * time.Second):
			cancel()
			b.Fatalf("gate %d: the waiter on %s did not resume within 10s of the Approve through %s (a change on one replica must reach the other's watchers)", i, r.A, r.B)
		}
		lat = append(lat, time.Since(began))
		b.StopTimer()
		cancel()
		if res.err != nil || res.d.Verdict != engine.Approved {
			b.Fatalf("gate %d: decision %+v, %v; want approved", i, res.d, res.err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportLatencies(b, lat)
	_, rpc99 := percentiles(rpc)
	b.ReportMetric(rpc99, "approve-rpc-p99-ms")
}

// BenchmarkServeRSSByDatabase measures the target "control-plane RSS holding 10,000 runs × 50
// transitions (SQLite and PostgreSQL)": 50 loaders each take runs from a queue, StartRun and
// record the run's 50 transitions as RecordTransitions batches of 10 over grpc-go. Then every
// run is listed (ListRuns, pages of 500) and 10 runs are replayed with WatchRun at once.
// Metrics (MiB, from /proc/PID/status of the serve process): load-rss, load-peak (VmHWM after
// the load), rss and peak-rss (after the reads); load-transitions/s.
func BenchmarkServeRSSByDatabase(b *testing.B) {
	const runs, perRun, batch, loaders, watchers = 10_000, 50, 10, 50, 10
	for _, backend := range benchBackends {
		b.Run(backend, func(b *testing.B) {
			for range b.N {
				p := startServeOn(b, backend)
				cc := grpcConn(b, p.Addr)
				ctx := context.Background()
				prefix := fmt.Sprintf("rss-%d", benchRound.Add(1))
				ids := make(chan string, runs)
				for i := range runs {
					ids <- fmt.Sprintf("%s-%05d", prefix, i)
				}
				close(ids)
				var wg sync.WaitGroup
				var failed atomic.Value
				began := time.Now()
				for range loaders {
					wg.Go(func() {
						for id := range ids {
							if err := loadRun(ctx, cc, id, perRun, batch); err != nil {
								failed.Store(err)
								return
							}
						}
					})
				}
				wg.Wait()
				load := time.Since(began)
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				loadRSS, loadHWM := procMemMiB(b, p.cmd.Process.Pid)

				listed, token := 0, ""
				for {
					var res rbookv1.ListRunsResponse
					if err := cc.Invoke(ctx, rbookv1connect.RunServiceListRunsProcedure, &rbookv1.ListRunsRequest{PageSize: 500, PageToken: token}, &res); err != nil {
						b.Fatalf("ListRuns after %d runs: %v", listed, err)
					}
					listed += len(res.GetRuns())
					if token = res.GetNextPageToken(); token == "" {
						break
					}
				}
				if listed != runs {
					b.Fatalf("ListRuns listed %d runs, want %d", listed, runs)
				}
				c := newClients(p.URL, connect.WithGRPC())
				for i := range watchers {
					wg.Go(func() {
						id := fmt.Sprintf("%s-%05d", prefix, i*(runs/watchers))
						s, err := c.runs.WatchRun(ctx, &rbookv1.WatchRunRequest{RunId: id, FromSeq: 1})
						if err != nil {
							failed.Store(err)
							return
						}
						defer s.Close()
						n := 0
						for s.Receive() {
							if s.Msg().GetTransition() != nil {
								n++
							}
						}
						if n != perRun || s.Err() != nil {
							failed.Store(fmt.Errorf("WatchRun %s: %d transitions, want %d; %v", id, n, perRun, s.Err()))
						}
					})
				}
				wg.Wait()
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				rss, hwm := procMemMiB(b, p.cmd.Process.Pid)
				b.ReportMetric(loadRSS, "load-rss-MiB")
				b.ReportMetric(loadHWM, "load-peak-MiB")
				b.ReportMetric(rss, "rss-MiB")
				b.ReportMetric(hwm, "peak-rss-MiB")
				b.ReportMetric(float64(runs*perRun)/load.Seconds(), "load-transitions/s")
			}
		})
	}
}

// loadRun starts run id and records its perRun transitions (the last final) in
// RecordTransitions batches of batch over cc.
func loadRun(ctx context.Context, cc *grpc.ClientConn, id string, perRun, batch int) error {
	var started rbookv1.StartRunResponse
	if err := cc.Invoke(ctx, rbookv1connect.RunServiceStartRunProcedure, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: id, Name: "demo",
		ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: int32(perRun / 2), StartedBy: "bench"}, &started); err != nil {
		return fmt.Errorf("StartRun %s: %w", id, err)
	}
	epoch := started.GetRun().GetLease().GetEpoch()
	for from := int64(1); from <= int64(perRun); from += int64(batch) {
		to := min(from+int64(batch)-1, int64(perRun))
		var res rbookv1.RecordTransitionsResponse
		if err := cc.Invoke(ctx, rbookv1connect.RunServiceRecordTransitionsProcedure,
			&rbookv1.RecordTransitionsRequest{Transitions: transitions(id, from, to, to == int64(perRun)), OwnerId: testOwner, Epoch: epoch}, &res); err != nil {
			return fmt.Errorf("RecordTransitions %s %d..%d: %w", id, from, to, err)
		}
		if res.GetAckedSeq() != to {
			return fmt.Errorf("RecordTransitions %s %d..%d: acked_seq %d", id, from, to, res.GetAckedSeq())
		}
	}
	return nil
}
