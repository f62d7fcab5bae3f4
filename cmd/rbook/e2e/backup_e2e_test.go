package e2e

// Backups of a serving control plane (docs/backup.md): a copy taken while executors record
// transitions holds every transition acknowledged before it started, and a control plane
// started on the restored copy serves them.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// loadWriters starts n executors, each recording one run's transitions through url's API
// as fast as the control plane acknowledges them. acked returns, per run, the highest seq
// acknowledged so far; stop ends them and fails t on any error. ready is closed once every
// run has at least min transitions acknowledged.
type loadWriters struct {
	mu     sync.Mutex
	seqs   map[string]int64
	stopCh chan struct{}
	wg     sync.WaitGroup
	errs   chan error
	ready  chan struct{}
}

func startLoad(t *testing.T, url string, n int, min int64) *loadWriters {
	t.Helper()
	l := &loadWriters{seqs: map[string]int64{}, stopCh: make(chan struct{}), errs: make(chan error, n), ready: make(chan struct{})}
	ctx := context.Background()
	c := cpclient.New(url, "")
	var readyOnce sync.Once
	for i := range n {
		runID := fmt.Sprintf("RBOOK-20261202-load-%08d", i)
		owner := fmt.Sprintf("load-executor-%d-0123456789", i)
		res, err := c.Runs.StartRun(ctx, &rbookv1.StartRunRequest{RunId: runID, Name: "load", ContentHash: strings.Repeat("ab", 32),
			SchemaHash8: "0123abcd", TotalSteps: 1000000, StartedBy: "load", OwnerId: owner})
		if err != nil {
			t.Fatalf("StartRun: %v", err)
		}
		epoch := res.GetRun().GetLease().GetEpoch()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for seq := int64(1); ; seq++ {
				select {
				case <-l.stopCh:
					return
				default:
				}
				tr := &rbookv1.Transition{RunId: runID, Seq: seq, Kind: rbookv1.TransitionKind_TRANSITION_KIND_STEP_STARTED,
					StepIndex: int32(seq - 1), StepName: fmt.Sprintf("step-%d", seq), StepType: "check",
					RunStatus: rbookv1.RunStatus_RUN_STATUS_RUNNING, Time: timestamppb.Now()}
				if _, err := c.Runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: tr, OwnerId: owner, Epoch: epoch}); err != nil {
					l.errs <- fmt.Errorf("%s #%d: %w", runID, seq, err)
					return
				}
				l.mu.Lock()
				l.seqs[runID] = seq
				all := len(l.seqs) == n
				for _, s := range l.seqs {
					all = all && s >= min
				}
				l.mu.Unlock()
				if all {
					readyOnce.Do(func() { close(l.ready) })
				}
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

// acked is a copy of the highest acknowledged seq of each run.
func (l *loadWriters) acked() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int64, len(l.seqs))
	for k, v := range l.seqs {
		out[k] = v
	}
	return out
}

func (l *loadWriters) halt() {
	select {
	case <-l.stopCh:
	default:
		close(l.stopCh)
	}
	l.wg.Wait()
}

// stop ends the writers and fails t on an error one of them had.
func (l *loadWriters) stop(t *testing.T) {
	t.Helper()
	l.halt()
	select {
	case err := <-l.errs:
		t.Fatalf("a writer failed: %v", err)
	default:
	}
}

// checkHolds asserts that the control plane at url has, for every run of before, the
// transitions 1..n with n at least before's seq, without gaps.
func checkHolds(t *testing.T, url string, before map[string]int64) {
	t.Helper()
	ids := make([]string, 0, len(before))
	for id := range before {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	c := cpclient.New(url, "")
	for _, id := range ids {
		var got []int64
		req := &rbookv1.GetRunRequest{RunId: id}
		for {
			resp, err := c.Runs.GetRun(context.Background(), req)
			if err != nil {
				t.Fatalf("GetRun(%s) on the restored control plane: %v", id, err)
			}
			for _, tr := range resp.GetTransitions() {
				got = append(got, tr.GetSeq())
			}
			if resp.GetNextPageToken() == "" {
				break
			}
			req.PageToken = resp.GetNextPageToken()
		}
		for i, s := range got {
			if s != int64(i+1) {
				t.Fatalf("%s: transition %d has seq %d: a gap", id, i, s)
			}
		}
		if int64(len(got)) < before[id] {
			t.Errorf("%s: the restored control plane has %d transitions; %d were acknowledged before the backup started", id, len(got), before[id])
		}
	}
}

func TestBackupUnderLoadAndRestoreLoseNothingAcknowledged(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	cp := startServe(t, dir)
	load := startLoad(t, cp.url(), 3, 20)
	<-load.ready
	before := load.acked()
	backup := filepath.Join(dir, "backup.db")
	out, code := run(t, dir, "", "admin", "backup", backup, "--db", cp.db)
	if code != 0 || !strings.Contains(out, "written and checked") {
		t.Fatalf("rbook admin backup: exit %d\n%s", code, out)
	}
	// The writers kept going during the backup.
	if after := load.acked(); fmt.Sprint(after) == fmt.Sprint(before) {
		t.Logf("no transition was acknowledged during the backup (it was quick): %v", after)
	}
	load.stop(t)

	// The serving database cannot be replaced under its server.
	out, code = run(t, dir, "", "admin", "restore", backup, "--db", cp.db)
	if code != exitAborted || !strings.Contains(out, "another control plane is serving") || !strings.Contains(out, "nothing was replaced") {
		t.Fatalf("restore over a served database: exit %d\n%s", code, out)
	}

	restored := filepath.Join(dir, "restored", "cp.db")
	if err := os.MkdirAll(filepath.Dir(restored), 0o700); err != nil {
		t.Fatal(err)
	}
	out, code = run(t, dir, "", "admin", "restore", backup, "--db", restored)
	if code != 0 || !strings.Contains(out, "restored "+backup) {
		t.Fatalf("rbook admin restore: exit %d\n%s", code, out)
	}
	checkHolds(t, startServeDB(t, restored).url(), before)
}

// pgTool finds a PostgreSQL client program on PATH or in Debian's /usr/lib/postgresql/*/bin
// (as .ci/postgres finds pg_ctl), or skips t.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(found) == 0 {
		t.Skipf("%s is not on PATH nor in /usr/lib/postgresql/*/bin: install PostgreSQL's client programs to run this test", name)
	}
	sort.Strings(found)
	return found[len(found)-1]
}

// The PostgreSQL procedure of docs/backup.md ("PostgreSQL"), run as written: pg_dump in the
// custom format while the control plane serves, a new database, pg_restore into it.
func TestPostgresDumpUnderLoadAndRestoreLoseNothingAcknowledged(t *testing.T) {
	skipShort(t)
	src := newPGDatabase(t)
	pgDump, pgRestore := pgTool(t, "pg_dump"), pgTool(t, "pg_restore")
	cp := startServeDB(t, src)
	load := startLoad(t, cp.url(), 3, 20)
	<-load.ready
	before := load.acked()
	dump := filepath.Join(t.TempDir(), "rbook.dump")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, pgDump, "--format=custom", "--file="+dump, src).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	load.stop(t)
	dst := newPGDatabase(t)
	if out, err := exec.CommandContext(ctx, pgRestore, "--no-owner", "--exit-on-error", "--dbname="+dst, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	out, code := run(t, t.TempDir(), "", "admin", "migrate", "--dry-run", "--db", dst)
	if code != 0 || !strings.Contains(out, "no migration pending") {
		t.Fatalf("rbook admin migrate --dry-run on the restored database: exit %d\n%s", code, out)
	}
	checkHolds(t, startServeDB(t, dst).url(), before)
}
