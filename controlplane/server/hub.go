package server

import (
	"context"
	"sync"

	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// watchBuffer is how many events a watcher may have queued. The store's writer never waits
// for a watcher: when the buffer is full the event is dropped and the watcher is told it
// lagged (WatchRun then ends with a retryable error, WatchApproval re-reads the approval).
// A variable only so that tests can make it small.
var watchBuffer = 256

// event is one committed change that concerns a watcher.
type event struct {
	// transitions are consecutive transitions of one run committed together (one
	// RecordTransition, or a whole RecordTransitions batch: one event, so a batch of
	// store.MaxBatchTransitions fits a watcher's buffer; docs/decisions/durability.md), in seq order.
	transitions []store.Transition
	progress    []store.RunProgress // with transitions: the run's progress after each
	run         *store.Run          // a run row StartRun created or CancelRun cancelled
	approval    *store.Approval
}

// watcher receives the events of one run or one approval.
type watcher struct {
	key string
	ch  chan event
	lag chan struct{} // signalled (capacity 1) when an event was dropped
}

// hub fans store changes out to watchers and keeps the gate index. Its publish method runs
// on the store's writer goroutine, so it only takes a short lock and never blocks.
type hub struct {
	mu         sync.Mutex
	byRun      map[string]map[*watcher]struct{}
	byApproval map[string]map[*watcher]struct{}
	gates      map[string]*gateState // by run id; only runs with a pending or just-decided gate
	// onPending is called (under mu, non-blocking) when an approval with a deadline opens.
	onPending func()
}

// gateState tracks what the run's stored status cannot show: a gate requested without a
// gate_opened transition, and a gate decided before the executor recorded gate_decided.
type gateState struct {
	pending map[string]struct{} // approval ids
	decided bool                // a gate was decided since the run's last transition
}

func newHub(onPending func()) *hub {
	return &hub{
		byRun: map[string]map[*watcher]struct{}{}, byApproval: map[string]map[*watcher]struct{}{},
		gates: map[string]*gateState{}, onPending: onPending,
	}
}

// load seeds the gate index with the pending approvals found at start-up.
func (h *hub) load(ctx context.Context, st *store.Store) error {
	f := store.ApprovalFilter{Status: store.ApprovalPending, PageSize: store.MaxPageSize}
	for {
		page, err := st.ListApprovals(ctx, f)
		if err != nil {
			return err
		}
		h.mu.Lock()
		for _, a := range page.Approvals {
			h.noteApproval(a)
		}
		h.mu.Unlock()
		if page.NextPageToken == "" {
			return nil
		}
		f.PageToken = page.NextPageToken
	}
}

// publish is the store.Subscribe callback.
func (h *hub) publish(c store.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 0; i < len(c.Transitions); {
		runID := c.Transitions[i].RunID
		j := i + 1
		for j < len(c.Transitions) && c.Transitions[j].RunID == runID {
			j++
		}
		if g := h.gates[runID]; g != nil {
			g.decided = false
			h.dropIfIdle(runID, g)
		}
		h.deliver(h.byRun[runID], event{transitions: c.Transitions[i:j:j], progress: c.Progress[i:j:j]})
		i = j
	}
	for i := range c.Runs {
		r := &c.Runs[i]
		h.deliver(h.byRun[r.RunID], event{run: r})
	}
	for i := range c.Approvals {
		a := &c.Approvals[i]
		h.noteApproval(*a)
		ev := event{approval: a}
		h.deliver(h.byApproval[a.ApprovalID], ev)
		h.deliver(h.byRun[a.RunID], ev)
	}
}

// noteApproval updates the gate index; h.mu is held.
func (h *hub) noteApproval(a store.Approval) {
	g := h.gates[a.RunID]
	if a.Status == store.ApprovalPending {
		if g == nil {
			g = &gateState{pending: map[string]struct{}{}}
			h.gates[a.RunID] = g
		}
		g.pending[a.ApprovalID] = struct{}{}
		if !a.Deadline.IsZero() && h.onPending != nil {
			h.onPending()
		}
		return
	}
	if g == nil {
		return
	}
	if _, ok := g.pending[a.ApprovalID]; ok {
		delete(g.pending, a.ApprovalID)
		g.decided = true
	}
	h.dropIfIdle(a.RunID, g)
}

func (h *hub) dropIfIdle(runID string, g *gateState) {
	if len(g.pending) == 0 && !g.decided {
		delete(h.gates, runID)
	}
}

func (h *hub) deliver(ws map[*watcher]struct{}, ev event) {
	for w := range ws {
		select {
		case w.ch <- ev:
		default:
			select {
			case w.lag <- struct{}{}:
			default:
			}
		}
	}
}

// effective is the status a client sees (approval.proto, run.proto): a non-final run is
// PAUSED while it has a pending gate and RUNNING once the gate is decided, even before the
// executor records gate_opened or gate_decided; otherwise the stored status.
func (h *hub) effective(r store.Run) rbookv1.RunStatus {
	if !r.Status.Final() {
		h.mu.Lock()
		g := h.gates[r.RunID]
		paused, decided := g != nil && len(g.pending) > 0, g != nil && g.decided
		h.mu.Unlock()
		switch {
		case paused:
			return rbookv1.RunStatus_RUN_STATUS_PAUSED
		case decided:
			return rbookv1.RunStatus_RUN_STATUS_RUNNING
		}
	}
	return runStatusToProto[r.Status]
}

func (h *hub) watch(index map[string]map[*watcher]struct{}, key string) *watcher {
	w := &watcher{key: key, ch: make(chan event, watchBuffer), lag: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if index[key] == nil {
		index[key] = map[*watcher]struct{}{}
	}
	index[key][w] = struct{}{}
	return w
}

// watchRun registers a watcher for a run's transitions, row changes and approvals; call
// the returned func to unregister.
func (h *hub) watchRun(runID string) (*watcher, func()) {
	w := h.watch(h.byRun, runID)
	return w, func() { h.unwatch(h.byRun, w) }
}

// watchApproval registers a watcher for one approval.
func (h *hub) watchApproval(id string) (*watcher, func()) {
	w := h.watch(h.byApproval, id)
	return w, func() { h.unwatch(h.byApproval, w) }
}

func (h *hub) unwatch(index map[string]map[*watcher]struct{}, w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(index[w.key], w)
	if len(index[w.key]) == 0 {
		delete(index, w.key)
	}
}
