package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Change fan-out across replicas on PostgreSQL (docs/decisions/change-fanout.md).
//
// Every batch the writer commits in PostgreSQL mode runs pg_notify(pgNotifyChannel, payload)
// inside its transaction (notify.go), so the notification is delivered on commit, in
// commit order. Each Store runs a listener on its own pgx.Conn (LISTEN pgNotifyChannel) that
// skips its own notifications, reads what another replica's notification names and calls
// publish with a Change built from those rows, so WatchRun / WatchApproval streams, the gate
// index and the deadline timer of this replica see what another replica recorded. A map of
// the highest seq published per run (fed by local commits too) keeps a transition from being
// published twice; after every (re)connect a catch-up read covers what was committed while
// the listener was not listening.

const (
	// catchUpSlack is how far before the last notification seen the catch-up read after a
	// reconnect starts (docs/decisions/change-fanout.md: "last notification seen − 10 s"): it covers commits whose
	// updated_at was taken before the notification went out, and clock skew between replicas.
	catchUpSlack = 10 * time.Second
	// listenBackoffMin and listenBackoffMax bound the listener's reconnect back-off (doubling,
	// with jitter).
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenReadTimeout bounds the listener's reads of one notification's rows.
	listenReadTimeout = 30 * time.Second
	// maxTrackedRuns bounds the per-run highest-published-seq map; past it, final runs are
	// forgotten first, then everything (a forgotten run's transitions are read again from
	// seq 1 on its next notification; watchers drop seqs they already sent).
	maxTrackedRuns = 1 << 16
)

// runMark is what this Store last published for a run.
type runMark struct {
	seq    int64
	status RunStatus
	hash   string
	total  int
}

// fanout is a Store's publish serialisation, its per-run marks and (PostgreSQL mode) its
// change listener. The zero value serves SQLite: publish takes mu and keeps no marks.
type fanout struct {
	// mu serialises publish: the writer goroutine and the listener both call it (docs/decisions/change-fanout.md).
	mu sync.Mutex
	// marks is the highest published seq (and the run row's state) per run; nil unless the
	// listener runs.
	marks map[string]runMark

	// origin is the Store's origin id (s.origin), whose notifications the listener skips.
	origin string
	dsn    string
	stop   context.CancelFunc
	done   chan struct{}

	// lastSeen is the local time of the last notification received (listener goroutine only).
	lastSeen time.Time
	// pid is the listener connection's backend pid (0 while disconnected), for tests that
	// kill it with pg_terminate_backend.
	pid atomic.Uint32
	// connects, catchUps and notices count the listener's (re)connections, catch-up reads
	// and notifications from other origins.
	connects, catchUps, notices atomic.Uint64
	// reconnectGate, when set (tests), is received from before every reconnect after the
	// first, so a test can record while the listener is known to be away.
	reconnectGate chan struct{}
	// lastWait is the listener's last reconnect back-off in nanoseconds (tests).
	lastWait atomic.Int64
}

// note records what c publishes; f.mu is held. It returns c without the transitions already
// published (by an earlier notification or a local commit) when filter is true.
func (f *fanout) note(c Change, filter bool) Change {
	if f.marks == nil {
		return c
	}
	if filter {
		keep := Change{Runs: c.Runs, Approvals: c.Approvals}
		for i, t := range c.Transitions {
			if t.Seq <= f.marks[t.RunID].seq {
				continue
			}
			keep.Transitions = append(keep.Transitions, t)
			keep.Progress = append(keep.Progress, c.Progress[i])
			m := f.marks[t.RunID]
			m.seq, m.status = t.Seq, c.Progress[i].Status
			f.marks[t.RunID] = m
		}
		c = keep
	} else {
		for i, t := range c.Transitions {
			m := f.marks[t.RunID]
			m.seq, m.status = max(m.seq, t.Seq), c.Progress[i].Status
			f.marks[t.RunID] = m
		}
	}
	for _, r := range c.Runs {
		m := f.marks[r.RunID]
		// Not the row's last_seq: the transitions up to it may not be published yet.
		m.status, m.hash, m.total = r.Status, r.PlaybookHash, r.TotalSteps
		f.marks[r.RunID] = m
	}
	if len(f.marks) > maxTrackedRuns {
		for id, m := range f.marks {
			if m.status.Final() {
				delete(f.marks, id)
			}
		}
		if len(f.marks) > maxTrackedRuns {
			clear(f.marks)
		}
	}
	return c
}

// startListener starts the change listener of a PostgreSQL Store on its own connection to
// dsn (docs/decisions/change-fanout.md), skipping notifications of origin (the Store's own, s.origin). Open calls it
// in PostgreSQL mode once the Store is built; Close stops it (stopListener). It waits for
// the first connection attempt (LISTEN established, or failed: the listener then retries
// with back-off), so a Store that Open returned normally already hears the other replicas.
func (s *Store) startListener(ctx context.Context, dsn, origin string) {
	s.fan.origin, s.fan.dsn = origin, dsn
	s.fan.mu.Lock() // the writer goroutine may already publish
	s.fan.marks = map[string]runMark{}
	s.fan.mu.Unlock()
	s.fan.lastSeen = s.now()
	lctx, cancel := context.WithCancel(context.Background())
	s.fan.stop, s.fan.done = cancel, make(chan struct{})
	first := make(chan struct{})
	go s.listenLoop(lctx, first)
	select {
	case <-first:
	case <-ctx.Done():
	}
}

// stopListener stops the listener and waits for it; a no-op without one. Close calls it.
func (s *Store) stopListener() {
	if s.fan.stop == nil {
		return
	}
	s.fan.stop()
	<-s.fan.done
}

// listenLoop connects, LISTENs, catches up and handles notifications until ctx ends,
// reconnecting with back-off after any connection error.
func (s *Store) listenLoop(ctx context.Context, first chan struct{}) {
	defer close(s.fan.done)
	backoff := listenBackoffMin
	for attempt := 0; ; attempt++ {
		if attempt > 0 && s.fan.reconnectGate != nil {
			select {
			case <-s.fan.reconnectGate:
			case <-ctx.Done():
				return
			}
		}
		err := s.listenOnce(ctx, first)
		if first != nil {
			select {
			case <-first:
			default:
				close(first) // the first attempt failed: Open need not wait longer
			}
			first = nil
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errListenWorked) {
			backoff = listenBackoffMin
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(backoff*2, listenBackoffMax)
		s.fan.lastWait.Store(int64(wait))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// errListenWorked marks a connection that was established, listened and caught up before
// it failed (the back-off starts over). A failed catch-up is not marked: a row that keeps
// failing to read (it is in every catch-up window while its run is written) must not make
// the listener reconnect and read everything again every listenBackoffMin, forever; its
// reconnects back off up to listenBackoffMax instead.
var errListenWorked = errors.New("listener connection lost")

// listenOnce runs one connection: LISTEN, a catch-up (on a reconnect), then notifications until
// an error.
func (s *Store) listenOnce(ctx context.Context, first chan struct{}) error {
	conn, err := pgx.Connect(ctx, s.fan.dsn)
	if err != nil {
		return err
	}
	defer func() {
		s.fan.pid.Store(0)
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		cancel()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgNotifyChannel); err != nil {
		return err
	}
	s.fan.pid.Store(conn.PgConn().PID())
	s.fan.connects.Add(1)
	if first != nil {
		// The first connection has nothing to catch up on: nobody could subscribe to this
		// Store before Open returned, which it does now. A catch-up here would also race
		// with the caller's first commits and publish their rows a second time.
		close(first)
	} else if err := s.catchUp(ctx, conn); err != nil {
		// Catch up on what was committed while nobody listened: LISTEN is already active,
		// so nothing committed from here on is missed either.
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("%w: %v", errListenWorked, err)
		}
		s.fan.lastSeen = s.now()
		var msg notifyPayload
		if err := json.Unmarshal([]byte(n.Payload), &msg); err != nil || msg.Origin == s.fan.origin {
			continue // not ours to read, or our own commit (already published locally)
		}
		s.fan.notices.Add(1)
		if msg.All {
			err = s.catchUp(ctx, conn)
		} else {
			err = s.readAndPublish(ctx, msg.Runs, msg.Approvals)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errListenWorked, err) // the catch-up reads what this read missed
		}
	}
}

// catchUp publishes the runs and approvals changed at or after lastSeen − catchUpSlack
// (updated_at of runs; requested_at, approved_at and vote times of approvals), reading the
// ids on the listener's connection.
func (s *Store) catchUp(ctx context.Context, conn *pgx.Conn) error {
	s.fan.catchUps.Add(1)
	since := formatTime(s.fan.lastSeen.Add(-catchUpSlack))
	ids := func(query string) ([]string, error) {
		rows, err := conn.Query(ctx, query, since)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	runs, err := ids(`SELECT run_id FROM playbook_runs WHERE updated_at >= $1 ORDER BY updated_at, run_id`)
	if err != nil {
		return fmt.Errorf("store: catch-up runs: %w", err)
	}
	approvals, err := ids(`SELECT approval_id FROM playbook_approvals WHERE requested_at >= $1 OR approved_at >= $1
		OR approval_id IN (SELECT approval_id FROM approval_votes WHERE at >= $1) ORDER BY requested_at, approval_id`)
	if err != nil {
		return fmt.Errorf("store: catch-up approvals: %w", err)
	}
	return s.readAndPublish(ctx, runs, approvals)
}

// readAndPublish reads the named runs (their rows and the transitions after the highest seq
// this Store published) and approvals, and publishes them as one Change. A run or approval
// that does not exist (any more) is skipped.
func (s *Store) readAndPublish(ctx context.Context, runIDs, approvalIDs []string) error {
	ctx, cancel := context.WithTimeout(ctx, listenReadTimeout)
	defer cancel()
	var c Change
	var rows []Run
	for _, id := range runIDs {
		s.fan.mu.Lock()
		mark, known := s.fan.marks[id]
		s.fan.mu.Unlock()
		ts, err := s.transitionsBetween(ctx, id, mark.seq+1, 0)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if testHookBetweenListenReads != nil {
			testHookBetweenListenReads(id)
		}
		run, err := s.Run(ctx, id) // after the transitions: at least as new as the last of them
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		// The row may be newer than the transitions just read (a commit landed between the
		// two reads): read the rest, so a final status never goes out ahead of the
		// transitions that led to it (a watcher ends at a final run).
		if read := max(mark.seq, lastSeqOf(ts)); run.LastSeq > read {
			more, err := s.transitionsBetween(ctx, id, read+1, run.LastSeq+1)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			ts = append(ts, more...)
		}
		status := mark.status
		for _, t := range ts {
			c.Transitions = append(c.Transitions, t)
			c.Progress = append(c.Progress, remoteProgress(run, t, &status))
		}
		// The row itself goes out for its creation (first sight), a cancel or another status
		// change no transition showed, and a plan adoption, as StartRun/CancelRun publish it.
		planChanged := mark.hash != "" && (run.PlaybookHash != mark.hash || run.TotalSteps != mark.total)
		if !known || run.Status != status || planChanged {
			c.Runs = append(c.Runs, run)
		}
		rows = append(rows, run)
	}
	for _, id := range approvalIDs {
		a, err := s.GetApproval(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		c.Approvals = append(c.Approvals, a)
	}
	s.fan.mu.Lock()
	defer s.fan.mu.Unlock()
	c = s.fan.note(c, true)
	c.Remote = true
	for _, r := range rows {
		if m, ok := s.fan.marks[r.RunID]; ok {
			m.hash, m.total = r.PlaybookHash, r.TotalSteps
			s.fan.marks[r.RunID] = m
		}
	}
	s.deliver(c)
	return nil
}

// transitionsBetween reads runID's transitions with from <= seq < below (below <= 0: no
// upper bound), in seq order, a page of at most MaxTransitionsPage at a time, so a gap or a
// backlog longer than one page is read whole. Errors: ErrNotFound when the run does not
// exist; storage errors (with the pages read so far).
func (s *Store) transitionsBetween(ctx context.Context, runID string, from, below int64) ([]Transition, error) {
	var ts []Transition
	for {
		limit := MaxTransitionsPage
		if below > 0 {
			if from >= below {
				return ts, nil
			}
			limit = int(min(below-from, MaxTransitionsPage))
		}
		page, err := s.Transitions(ctx, runID, from, limit)
		if err != nil {
			return ts, err
		}
		ts = append(ts, page...)
		if len(page) < limit {
			return ts, nil
		}
		from = page[len(page)-1].Seq + 1
	}
}

// remoteProgress is a run's progress after transition t, built from the run row read after
// it: the row itself for the row's last transition; otherwise the row's lease and counters
// with t's seq, step and run status (a final status stays final, as in recordOne). status
// carries the status from one transition to the next.
func remoteProgress(run Run, t Transition, status *RunStatus) RunProgress {
	p := RunProgress{RunID: run.RunID, Status: run.Status, CurrentNode: run.CurrentNode, LastSeq: run.LastSeq,
		LastCompletedStepIndex: run.LastCompletedStepIndex, LastDeployName: run.LastDeployName,
		CompletedAt: run.CompletedAt, Owner: run.Owner, OwnerIDHash: run.OwnerIDHash, LeaseEpoch: run.LeaseEpoch,
		LeaseSeconds: run.LeaseSeconds, LeaseExpiresAt: run.LeaseExpiresAt, playbook: run.Kind == KindPlaybook}
	if t.Seq == run.LastSeq {
		if p.playbook {
			p.Playbook = &PlaybookProgress{Bindings: run.Bindings, IterationCounts: run.IterationCounts, ActiveNodes: run.ActiveNodes}
		}
		*status = run.Status
		return p
	}
	p.LastSeq = t.Seq
	if !status.Final() {
		if st, err := RunStatusOf(t.RunStatus, t.Kind); err == nil {
			*status = st
		}
	}
	p.Status = *status
	if !p.Status.Final() {
		p.CompletedAt = time.Time{}
		if t.StepName != "" {
			p.CurrentNode = t.StepName
		}
	}
	if t.Kind == KindStepFinished && t.StepIndex >= 0 {
		p.LastCompletedStepIndex = t.StepIndex
	}
	return p
}

// publish hands a local commit's change c (if any) to every subscriber, serialised with the
// listener's publishes; local commits update the per-run marks first (docs/decisions/change-fanout.md).
func (s *Store) publish(c Change) {
	if c.empty() {
		return
	}
	s.fan.mu.Lock()
	defer s.fan.mu.Unlock()
	if s.fan.marks != nil {
		c = s.fillGaps(c)
	}
	c = s.fan.note(c, false)
	s.deliver(c)
}

// gapReadTimeout bounds fillGaps' read of the transitions another replica committed.
const gapReadTimeout = 5 * time.Second

// fillGaps puts before each local transition of a run this Store already follows the
// transitions between the highest seq it published and that one: another replica committed
// them and its notification has not been handled yet (an executor that moved from A to B
// between two transitions). Without them a watcher here would see seq k+1 before k, and then
// never k (the listener does not publish below the mark). They are read from the database
// (committed: this Store's commit checked the run's last_seq). A failed read leaves the gap,
// and WatchRun's replay from from_seq still has them. s.fan.mu is held.
func (s *Store) fillGaps(c Change) Change {
	var out *Change
	next := map[string]int64{}
	for i, t := range c.Transitions {
		want, ok := next[t.RunID]
		if !ok {
			m, known := s.fan.marks[t.RunID]
			want, ok = m.seq+1, known
		}
		next[t.RunID] = t.Seq + 1
		if !ok || t.Seq <= want {
			if out != nil {
				out.Transitions, out.Progress = append(out.Transitions, t), append(out.Progress, c.Progress[i])
			}
			continue
		}
		if out == nil {
			out = &Change{Runs: c.Runs, Approvals: c.Approvals,
				Transitions: append([]Transition(nil), c.Transitions[:i]...), Progress: append([]RunProgress(nil), c.Progress[:i]...)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), gapReadTimeout)
		missing, err := s.transitionsBetween(ctx, t.RunID, want, t.Seq)
		cancel()
		if err == nil {
			status := RunRunning
			for _, x := range missing {
				if x.Seq >= t.Seq {
					break
				}
				p := c.Progress[i]
				p.LastSeq, p.Playbook = x.Seq, nil
				if st, err := RunStatusOf(x.RunStatus, x.Kind); err == nil && !status.Final() {
					status = st
				}
				p.Status = status
				if x.StepName != "" && !status.Final() {
					p.CurrentNode = x.StepName
				}
				out.Transitions, out.Progress = append(out.Transitions, x), append(out.Progress, p)
			}
		}
		out.Transitions, out.Progress = append(out.Transitions, t), append(out.Progress, c.Progress[i])
	}
	if out == nil {
		return c
	}
	return *out
}

// deliver calls the subscribers with c; s.fan.mu is held.
func (s *Store) deliver(c Change) {
	if c.empty() {
		return
	}
	for _, sub := range *s.subs.Load() {
		sub.fn(c)
	}
}

// testHookBetweenListenReads, when a test sets it, runs in readAndPublish between reading a
// run's transitions and reading its row (where another replica's commit can land).
var testHookBetweenListenReads func(runID string)

// lastSeqOf is the seq of the last of ts, 0 for none.
func lastSeqOf(ts []Transition) int64 {
	if len(ts) == 0 {
		return 0
	}
	return ts[len(ts)-1].Seq
}
