package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// enqueue hands a request straight to the writer goroutine, as write does, without waiting.
func enqueue(s *Store, fn func(*writeTx) error) *writeReq {
	r := &writeReq{ctx: context.Background(), fn: fn, done: make(chan error, 1)}
	s.queue <- r
	return r
}

func waitDone(t *testing.T, reqs ...*writeReq) {
	t.Helper()
	for i, r := range reqs {
		if err := <-r.done; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
}

func noop(*writeTx) error { return nil }

// The writer commits a cohort of three, then one of them comes back alone: with a linger
// the writer waits for the other two and commits the three together; without one (or after
// a slow commit) the first commits alone.
func TestWriterLingersForTheRestOfACohort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		linger     time.Duration
		fastCommit time.Duration
		wantLinger bool
	}{
		{"lingers", time.Hour, time.Hour, true},
		{"linger off", 0, time.Hour, false},
		{"last commit slow", time.Hour, time.Nanosecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lingering := make(chan struct{}, 4)
			s, _ := openTest(t, WithLinger(tc.linger), func(c *config) {
				c.lingerFastCommit = tc.fastCommit // not the disk's speed: the test must not depend on it
				c.onLinger = func() { lingering <- struct{}{} }
			})
			running, release := make(chan struct{}), make(chan struct{})
			first := enqueue(s, func(*writeTx) error { close(running); <-release; return nil })
			<-running
			// While the writer holds the first batch, a cohort of three queues: the next batch.
			cohort := []*writeReq{enqueue(s, noop), enqueue(s, noop), enqueue(s, noop)}
			close(release)
			waitDone(t, append([]*writeReq{first}, cohort...)...)
			before := s.Stats()
			if before.Commits != 2 || before.Lingers != 0 {
				t.Fatalf("after the first two batches: %+v, want 2 commits and no linger", before)
			}

			back := enqueue(s, noop) // one of the cohort is back
			if !tc.wantLinger {
				waitDone(t, back)
				if st := s.Stats(); st.Commits != before.Commits+1 || st.Lingers != 0 {
					t.Fatalf("the lone request: %+v, want it committed alone without lingering", st)
				}
				return
			}
			<-lingering
			rest := []*writeReq{enqueue(s, noop), enqueue(s, noop)}
			waitDone(t, append([]*writeReq{back}, rest...)...)
			if st := s.Stats(); st.Commits != before.Commits+1 || st.Lingers != 1 || st.Requests != before.Requests+3 {
				t.Fatalf("after lingering: %+v (before %+v), want the three in one commit", st, before)
			}
		})
	}
}

// Close does not wait out a linger: the lingering batch commits and the store closes.
func TestCloseEndsALinger(t *testing.T) {
	t.Parallel()
	lingering := make(chan struct{}, 1)
	s, _ := openTest(t, WithLinger(time.Hour), func(c *config) {
		c.lingerFastCommit = time.Hour
		c.onLinger = func() { lingering <- struct{}{} }
	})
	waitDone(t, enqueue(s, noop))
	running, release := make(chan struct{}), make(chan struct{})
	holder := enqueue(s, func(*writeTx) error { close(running); <-release; return nil })
	<-running
	pair := []*writeReq{enqueue(s, noop), enqueue(s, noop)} // a batch of two: the previous size
	close(release)
	waitDone(t, append([]*writeReq{holder}, pair...)...)
	alone := enqueue(s, noop)
	<-lingering
	if err := s.Close(); err != nil {
		t.Fatalf("Close while the writer lingers: %v", err)
	}
	waitDone(t, alone)
}

// A lone writer never waits: its batch is as large as the previous one.
func TestWriterDoesNotLingerForALoneWriter(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, WithLinger(time.Hour), func(c *config) { c.lingerFastCommit = time.Hour })
	mustStart(t, s, newRun("R1"))
	for seq := int64(1); seq <= 5; seq++ {
		mustRecord(t, s, tr("R1", seq))
	}
	if st := s.Stats(); st.Lingers != 0 || st.Commits != 6 {
		t.Fatalf("stats %+v, want 6 commits and no linger", st)
	}
}

// Batches run without savepoints. A request refused before it writes (a store sentinel)
// fails alone in that same pass; one that fails after writing makes the writer roll the
// batch back and run it again with a savepoint per request (TestGroupCommitIsolatesFailures
// checks what that second pass commits).
func TestBatchSavepointsOnlyAfterAFailedWrite(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	insert := func(id string) func(*writeTx) error {
		return func(w *writeTx) error {
			_, err := w.execSQL("INSERT INTO playbook_runs (run_id, playbook_name, playbook_hash, started_at, updated_at) VALUES (?, 'p', 'h', ?, ?)",
				id, formatTime(t0), formatTime(t0))
			return err
		}
	}
	refused := func(*writeTx) error { return fmt.Errorf("%w: run %q expects seq 2, got 5", ErrOutOfOrder, "R1") }
	run := func(fns ...func(*writeTx) error) []error {
		batch := make([]*writeReq, len(fns))
		for i, fn := range fns {
			batch[i] = &writeReq{ctx: context.Background(), fn: fn, done: make(chan error, 1)}
		}
		s.runBatch(batch) // the writer goroutine is idle: nothing else is queued
		errs := make([]error, len(batch))
		for i, r := range batch {
			errs[i] = <-r.done
		}
		return errs
	}

	errs := run(insert("A"), refused, insert("B"))
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], ErrOutOfOrder) {
		t.Fatalf("results %v, want the refusal alone to fail", errs)
	}
	if s.savepoints.Load() != 0 || s.Stats().SafeRetries != 0 {
		t.Fatalf("%d savepoints, %d safe retries for a batch without failed writes; want none",
			s.savepoints.Load(), s.Stats().SafeRetries)
	}

	boom := errors.New("boom")
	errs = run(insert("C"), func(w *writeTx) error {
		if err := insert("D")(w); err != nil {
			return err
		}
		return boom
	}, insert("E"))
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], boom) {
		t.Fatalf("results %v, want only the failed write to fail", errs)
	}
	if s.savepoints.Load() != 3 || s.Stats().SafeRetries != 1 {
		t.Fatalf("%d savepoints, %d safe retries after a failed write; want 3 and 1", s.savepoints.Load(), s.Stats().SafeRetries)
	}
	for id, want := range map[string]bool{"A": true, "B": true, "C": true, "D": false, "E": true} {
		if _, _, err := s.GetRun(context.Background(), id); (err == nil) != want {
			t.Errorf("run %s exists = %v (%v), want %v", id, err == nil, err, want)
		}
	}
}

// RecordTransition reads a run's row once; later transitions take its progress from the
// writer's cache.
func TestProgressCacheSkipsRunReads(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	mustStart(t, s, newRun("R2"))
	for seq := int64(1); seq <= 5; seq++ {
		mustRecord(t, s, tr("R1", seq))
		mustRecord(t, s, tr("R2", seq))
	}
	if testOnPostgres() {
		// PostgreSQL: another replica may write the run between two batches, so each batch
		// reads the run row under FOR UPDATE; within a batch the cache still holds.
		if n := s.progressReads.Load(); n != 10 {
			t.Fatalf("%d run-row reads for 10 transitions in 10 batches, want 10 (one per batch)", n)
		}
		testProgressCacheWithinABatch(t, s)
		return
	}
	if n := s.progressReads.Load(); n != 2 {
		t.Fatalf("%d run-row reads for 10 transitions on 2 runs, want 2", n)
	}
	// A duplicate and a refused transition use the cached progress too, and change nothing.
	if res := mustRecord(t, s, tr("R1", 5)); !res.Duplicate || res.Progress.LastSeq != 5 {
		t.Fatalf("replay of #5 = %+v", res)
	}
	if _, err := s.RecordTransition(context.Background(), tr("R1", 7), fence1); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("seq 7 after 5 = %v, want ErrOutOfOrder", err)
	}
	if res := mustRecord(t, s, tr("R1", 6)); res.Progress.LastSeq != 6 || s.progressReads.Load() != 2 {
		t.Fatalf("#6 = %+v after %d reads", res, s.progressReads.Load())
	}
}

// A second store on the same file (another server process) records a transition: the first
// store's cache is stale, and PRAGMA data_version tells it so.
func TestProgressCacheSeesOtherConnections(t *testing.T) {
	t.Parallel()
	s1, path := openTest(t)
	ctx := context.Background()
	mustStart(t, s1, newRun("R1"))
	mustRecord(t, s1, tr("R1", 1))
	mustRecord(t, s1, tr("R1", 2)) // cached in s1: last_seq 2

	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	mustRecord(t, s2, tr("R1", 3))

	if res := mustRecord(t, s1, tr("R1", 3)); !res.Duplicate || res.Progress.LastSeq != 3 {
		t.Fatalf("s1 replaying #3 stored by s2 = %+v, want a duplicate at last_seq 3", res)
	}
	if res := mustRecord(t, s1, tr("R1", 4)); res.Duplicate || res.Progress.LastSeq != 4 {
		t.Fatalf("s1 recording #4 = %+v", res)
	}
	if _, ts, err := s2.GetRun(ctx, "R1"); err != nil || len(ts) != 4 {
		t.Fatalf("R1 has %d transitions (%v), want 4", len(ts), err)
	}
}

// Progress staged by a pass that was rolled back (or whose commit failed) never reaches the
// cache: only committed progress does.
func TestProgressCacheKeepsOnlyCommittedProgress(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	passes := 0
	stageOnce := func(w *writeTx) error {
		passes++
		if passes == 1 { // the pass that will be rolled back
			w.staged = append(w.staged, RunProgress{RunID: "ghost", LastSeq: 7})
		}
		return nil
	}
	failAfterWrite := func(w *writeTx) error {
		if _, err := w.execSQL("INSERT INTO playbook_runs (run_id, playbook_name, playbook_hash, started_at, updated_at) VALUES ('X', 'p', 'h', ?, ?)",
			formatTime(t0), formatTime(t0)); err != nil {
			return err
		}
		return errors.New("boom")
	}
	stageAlways := func(w *writeTx) error {
		w.staged = append(w.staged, RunProgress{RunID: "kept", LastSeq: 3})
		return nil
	}
	batch := []*writeReq{
		{ctx: context.Background(), fn: stageOnce, done: make(chan error, 1)},
		{ctx: context.Background(), fn: failAfterWrite, done: make(chan error, 1)},
		{ctx: context.Background(), fn: stageAlways, done: make(chan error, 1)},
	}
	s.runBatch(batch)
	if passes != 2 {
		t.Fatalf("the batch ran %d times, want 2 (the second with savepoints)", passes)
	}
	if p, ok := s.cache.lookup("ghost"); ok {
		t.Fatalf("progress of a rolled-back pass is cached: %+v", p)
	}
	if p, ok := s.cache.lookup("kept"); !ok || p.LastSeq != 3 {
		t.Fatalf("committed progress not cached: %+v %v", p, ok)
	}
}

// CancelRun changes the run row behind the cache's back; the next transition must see the
// cancel (the executor winding down learns of it from RecordResult).
func TestProgressCacheForgetsCancelledRuns(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	mustRecord(t, s, tr("R1", 1))
	if _, err := s.CancelRun(context.Background(), "R1", "carol", "", t0); err != nil {
		t.Fatal(err)
	}
	if res := mustRecord(t, s, tr("R1", 2)); res.Progress.Status != RunCancelled || !res.Progress.CompletedAt.Equal(t0) {
		t.Fatalf("progress after CancelRun = %+v, want cancelled at t0", res.Progress)
	}
}

// testProgressCacheWithinABatch: on PostgreSQL, transitions of one run committed in one
// batch read the run row once (the batch holds its lock), and a replay in the same batch
// is answered from the staged progress.
func testProgressCacheWithinABatch(t *testing.T, s *Store) {
	t.Helper()
	before := s.progressReads.Load()
	res, err := s.RecordTransitions(context.Background(), []Transition{tr("R1", 6), tr("R1", 7), tr("R1", 8)}, fence1)
	if err != nil || res.AckedSeq != 8 || res.Stored != 3 {
		t.Fatalf("RecordTransitions 6..8 = %+v, %v", res, err)
	}
	if n := s.progressReads.Load() - before; n != 1 {
		t.Fatalf("%d run-row reads for one batch of 3 transitions, want 1", n)
	}
}
