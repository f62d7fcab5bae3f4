package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// streamEnd is returned when a stream ends for a reason other than completion: the server
// is shutting down, or the client went away.
func (s *Server) streamEnd(ctx context.Context, resume string) error {
	if ctx.Err() != nil {
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	return rpcError(connect.CodeUnavailable, CodeRetry, "the control plane is shutting down; reconnect%s", resume)
}

// testHookWatchRunSubscribed, when set by a test, runs between WatchRun's subscription and
// its snapshot read: the window in which replay and live events overlap.
var testHookWatchRunSubscribed func(runID string)

// WatchRun subscribes before it reads, then replays the stored transitions from from_seq and
// goes on with live ones, skipping seqs already sent: nothing is missed or sent twice between
// replay and live. Each message carries the run as the server knows it when sending (for
// replayed transitions: the run's current state); a resume that adopts another plan digest
// is sent as a run-only message. A watcher that falls watchBuffer events behind is ended
// with ABORTED (E_RETRY) naming the from_seq to reconnect with, so a slow client never holds
// up the store's writer.
func (h runService) WatchRun(ctx context.Context, req *rbookv1.WatchRunRequest, stream *connect.ServerStream[rbookv1.WatchRunResponse]) error {
	s := h.s
	if req.GetRunId() == "" {
		return invalidArg("run_id is required")
	}
	w, unwatch := s.hub.watchRun(req.GetRunId())
	defer unwatch()
	if testHookWatchRunSubscribed != nil {
		testHookWatchRunSubscribed(req.GetRunId())
	}
	run, ts, err := s.st.GetRun(ctx, req.GetRunId())
	if errors.Is(err, store.ErrNotFound) {
		return rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(req.GetRunId(), 140))
	}
	if err != nil {
		return s.storeError(ctx, "WatchRun", err)
	}
	var nodes store.NodeTracker // a playbook run's node states, from every transition
	if run.Kind == store.KindPlaybook {
		for _, t := range ts {
			nodes.Apply(t)
		}
		run.Nodes = nodes.States()
	}
	shown := s.hub.effective(run)
	if err := stream.Send(&rbookv1.WatchRunResponse{Run: runToProto(run, shown)}); err != nil {
		return err
	}
	last := max(req.GetFromSeq()-1, 0)
	for _, t := range ts {
		if t.Seq <= last {
			continue
		}
		if err := stream.Send(&rbookv1.WatchRunResponse{Run: runToProto(run, shown), Transition: transitionToProto(t)}); err != nil {
			return err
		}
		last = t.Seq
	}
	last = max(last, run.LastSeq)
	if run.Status.Final() {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return s.streamEnd(ctx, "")
		case <-s.streamsDone:
			return s.streamEnd(ctx, " with from_seq = last seen seq + 1")
		case <-w.lag:
			return rpcError(connect.CodeAborted, CodeRetry,
				"the watch fell behind run %s; reconnect with from_seq = %d", run.RunID, last+1)
		case ev := <-w.ch:
			msg := &rbookv1.WatchRunResponse{}
			switch {
			case len(ev.transitions) > 0:
				for i, t := range ev.transitions {
					if t.Seq <= last {
						continue // already replayed
					}
					applyProgress(&run, ev.progress[i])
					if run.Kind == store.KindPlaybook {
						nodes.Apply(t)
						run.Nodes = nodes.States()
					}
					last = t.Seq
					shown = s.hub.effective(run)
					msg := &rbookv1.WatchRunResponse{Run: runToProto(run, shown), Transition: transitionToProto(t)}
					if err := stream.Send(msg); err != nil {
						return err
					}
					if run.Status.Final() {
						return nil
					}
				}
				continue
			case ev.run != nil && ev.run.Status.Final():
				run = *ev.run
			case ev.run != nil:
				// Its creation, which GetRun already saw, or a resume that adopted another plan
				// (only the plan columns changed; the rest of the row may be older than run).
				if ev.run.PlaybookHash == run.PlaybookHash && ev.run.TotalSteps == run.TotalSteps {
					continue
				}
				run.PlaybookHash, run.TotalSteps = ev.run.PlaybookHash, ev.run.TotalSteps
			case ev.approval != nil:
				if s.hub.effective(run) == shown {
					continue // the gate change did not change what the run shows
				}
			}
			if run.Kind == store.KindPlaybook {
				run.Nodes = nodes.States() // also after a run-only message replaced run
			}
			shown = s.hub.effective(run)
			msg.Run = runToProto(run, shown)
			if err := stream.Send(msg); err != nil {
				return err
			}
			if run.Status.Final() {
				return nil
			}
		}
	}
}

// WatchApproval subscribes before it reads, sends the approval's current state, then every
// change until it leaves PENDING; a watcher that lagged re-reads the approval instead.
func (h approvalService) WatchApproval(ctx context.Context, req *rbookv1.WatchApprovalRequest, stream *connect.ServerStream[rbookv1.WatchApprovalResponse]) error {
	s := h.s
	if req.GetApprovalId() == "" {
		return invalidArg("approval_id is required")
	}
	w, unwatch := s.hub.watchApproval(req.GetApprovalId())
	defer unwatch()
	read := func() (store.Approval, error) {
		a, err := s.st.GetApproval(ctx, req.GetApprovalId())
		if errors.Is(err, store.ErrNotFound) {
			return a, rpcError(connect.CodeNotFound, CodeApprovalNotFound, "no approval has approval_id %q", truncate(req.GetApprovalId(), 140))
		}
		if err != nil {
			return a, s.storeError(ctx, "WatchApproval", err)
		}
		return a, nil
	}
	a, err := read()
	if err != nil {
		return err
	}
	runs := runsSeen{} // the starter and digest checks read the run once per stream
	for {
		p := s.approvalToProto(a)
		p.Caller = s.eligibility(ctx, a, runs)
		s.fillNotices(ctx, p)
		p.ReviewAttestationJson = s.reviewAttestation(ctx, a)
		if err := stream.Send(&rbookv1.WatchApprovalResponse{Approval: p}); err != nil || a.Status != store.ApprovalPending {
			return err
		}
		sent := len(a.Votes)
	wait:
		for {
			select {
			case <-ctx.Done():
				return s.streamEnd(ctx, "")
			case <-s.streamsDone:
				return s.streamEnd(ctx, "")
			case <-w.lag:
				for len(w.ch) > 0 {
					<-w.ch
				}
				if a, err = read(); err != nil {
					return err
				}
			case ev := <-w.ch:
				a = *ev.approval
			}
			if a.Status != store.ApprovalPending || len(a.Votes) != sent {
				break wait // a decision, or a new vote on the tally (docs/approvals.md, "Gate policy"); other pending-to-pending changes are not news
			}
		}
	}
}
