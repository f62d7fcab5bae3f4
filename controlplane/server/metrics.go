package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/metrics"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/internal/gatechannel"
)

// mountMetrics serves Options.Metrics at metrics.Path, points its scrape-time gauges at the
// store and subscribes the counters that follow commits (observeChange). Without Metrics
// the path is left to the console's 404.
func (s *Server) mountMetrics() (unsubscribe func()) {
	m := s.metrics
	if m == nil {
		return func() {}
	}
	s.mux.Handle(metrics.Path, m.Handler(s.opts.MetricsToken))
	m.SetSnapshot(s.metricsSnapshot)
	return s.st.Subscribe(s.observeChange)
}

// metricsSnapshot is the scrape-time state: the database's health as the health check sees
// it, and the store's counts (store.Gauges), nil when they could not be read.
func (s *Server) metricsSnapshot(ctx context.Context) metrics.Snapshot {
	snap := metrics.Snapshot{DatabaseUp: s.st.Reachable(ctx) == nil && !s.dbDown.Load()}
	if !snap.DatabaseUp {
		return snap
	}
	g, err := s.st.Gauges(ctx)
	if err != nil {
		s.log.Warn("reading the metrics' gauges failed; this scrape leaves them out", "err", err)
		return snap
	}
	st := &metrics.StoreState{RunsInProgress: make(map[string]int, len(g.RunsInProgress)), GatesWaiting: g.GatesWaiting,
		UndeliveredNotifications: g.UndeliveredNotifications}
	for status, n := range g.RunsInProgress {
		st.RunsInProgress[string(status)] = n
	}
	if !g.OldestGateRequestedAt.IsZero() {
		st.OldestGateWait = time.Since(g.OldestGateRequestedAt)
	}
	snap.Store = st
	return snap
}

// observeChange is the store subscription behind the counters that follow commits: runs
// that became final and gates closed by anything but Approve or Reject (those are counted
// in decide, which knows the channel), and the approve-to-resume clock. It runs on the
// store's writer goroutine: no I/O, one short lock at most. Another replica's commits
// (PostgreSQL) are that replica's to count; they only stop resume clocks, since the
// executor may record on another replica than the one its gate was approved on.
func (s *Server) observeChange(c store.Change) {
	m := s.metrics
	if len(c.Transitions) > 0 && s.resume.waiting() {
		now := time.Now()
		for i := range c.Transitions {
			if i > 0 && c.Transitions[i-1].RunID == c.Transitions[i].RunID {
				continue
			}
			if at, ok := s.resume.stop(c.Transitions[i].RunID); ok {
				m.DecisionToResume(now.Sub(at))
			}
		}
	}
	if c.Remote {
		return
	}
	for i := range c.Progress {
		if c.Progress[i].BecameFinal {
			m.RunFinished(string(c.Progress[i].Status))
		}
	}
	for i := range c.Runs {
		if c.Runs[i].Status.Final() { // CancelRun: the only run row published final
			m.RunFinished(string(c.Runs[i].Status))
		}
	}
	for i := range c.Approvals {
		a := &c.Approvals[i]
		if a.Status == store.ApprovalPending {
			continue
		}
		if a.DecidedBySource != sourceRPC {
			m.GateDecided(channelOfSource(a.DecidedBySource), string(a.Status))
		}
		if a.Status == store.ApprovalApproved && a.DecidedBySource != store.SourcePolicy {
			s.resume.start(a.RunID, time.Now())
		}
	}
}

// channelOfSource is the channel label of a gate closed with decided_by_source src; the
// sources are the label values themselves (metrics.Channels), anything else is "other".
func channelOfSource(src string) string {
	for _, c := range metrics.Channels {
		if c == src {
			return c
		}
	}
	return metrics.OtherLabel
}

// voteChannel is the channel label of a gate that decide closed with vote v: Slack's
// handler names its source; a browser (a console session, the laptop console's person, or
// any request with the Fetch metadata headers browsers send) is "console"; the executor's
// terminal answer is "terminal"; every other caller of Approve or Reject is "cli".
func voteChannel(ctx context.Context, v vote) string {
	switch {
	case v.source != "":
		return channelOfSource(v.source)
	case localPerson(ctx) != "":
		return "console"
	case gatechannel.IsTerminalReason(v.reason): // the executor's terminal answer reaches Approve and Reject like any other call
		return "terminal"
	}
	if _, ok := sessionFrom(ctx); ok {
		return "console"
	}
	if ci, ok := connect.CallInfoForHandlerContext(ctx); ok && ci.RequestHeader().Get("Sec-Fetch-Mode") != "" {
		return "console"
	}
	return "cli"
}

// Bounds of the approve-to-resume clocks: a run whose executor never records again (it
// died at the gate) must not keep its clock forever.
const (
	maxResumeClocks = 10_000
	resumeClockTTL  = time.Hour
)

// resumeClock remembers, per run, when a gate of it was approved, until the run's next
// transition is recorded (rbook_gate_decision_to_resume_seconds). Run ids are keys here,
// never labels.
type resumeClock struct {
	n  atomic.Int64 // len(at), read without the lock on every recorded batch
	mu sync.Mutex
	at map[string]time.Time
}

// waiting reports whether any clock runs.
func (r *resumeClock) waiting() bool { return r.n.Load() > 0 }

// start starts run's clock at t (a later approval of the same run restarts it). At the
// bound, clocks older than resumeClockTTL are dropped first, then new ones are not started.
func (r *resumeClock) start(run string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	if len(r.at) >= maxResumeClocks {
		for id, began := range r.at {
			if t.Sub(began) > resumeClockTTL {
				delete(r.at, id)
			}
		}
		if len(r.at) >= maxResumeClocks {
			return
		}
	}
	r.at[run] = t
	r.n.Store(int64(len(r.at)))
}

// stop ends run's clock and returns when it started (ok=false: none ran).
func (r *resumeClock) stop(run string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[run]
	if ok {
		delete(r.at, run)
		r.n.Store(int64(len(r.at)))
	}
	return t, ok
}

// countDecision counts a gate that decide closed (its status is no longer pending).
func (s *Server) countDecision(ctx context.Context, v vote, decided store.Approval) {
	if s.metrics == nil || decided.Status == store.ApprovalPending || decided.DecidedBySource != sourceRPC {
		return
	}
	s.metrics.GateDecided(voteChannel(ctx, v), string(decided.Status))
}

// countRecorded counts n transitions stored by one RecordTransition(s) call that waited
// took for the store.
func (s *Server) countRecorded(n int, took time.Duration) {
	if s.metrics == nil {
		return
	}
	s.metrics.StoreCommit(took)
	s.metrics.TransitionsRecorded(n)
}
