package cpview

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// Watcher is one rbook watch: where it prints (Out; Errw for notes), in proto JSON lines or
// text, the client, the run it follows and RunWords, the command that resumes a playbook run
// in this folder. Its methods return the control plane's errors as they are.
type Watcher struct {
	Out, Errw io.Writer
	JSON      bool
	C         *cpclient.Client
	RunID     string
	RunWords  string
	// last is the last sequence number shown, kind the run's kind (for its status words).
	last int64
	kind rbookv1.RunKind
}

// show prints one message of the stream: proto JSON with -o json, else the transition's line.
func (w *Watcher) show(m *rbookv1.WatchRunResponse) {
	if r := m.GetRun(); r != nil && r.GetKind() != rbookv1.RunKind_RUN_KIND_UNSPECIFIED {
		w.kind = r.GetKind()
	}
	if w.JSON {
		b, _ := protojson.Marshal(m)
		fmt.Fprintln(w.Out, string(b))
	} else if t := m.GetTransition(); t != nil {
		DescribeTransition(w.Out, w.kind, t)
	}
	if t := m.GetTransition(); t != nil {
		w.last = t.GetSeq()
	}
}

// ended says how the run ended (text output only).
func (w *Watcher) ended(kind rbookv1.RunKind, s rbookv1.RunStatus) {
	if !w.JSON {
		fmt.Fprintf(w.Out, "Run %s is %s.\n", w.RunID, termui.StatusWord(kind, s))
	}
}

// Recorded shows the run from the sequence number from as the control plane records it (one
// that no executor reports to) and, for a run that has not ended, that nothing more will
// arrive and what resumes it.
func (w *Watcher) Recorded(ctx context.Context, from int64) error {
	w.last, w.kind = from-1, rbookv1.RunKind_RUN_KIND_RUNBOOK
	resp, err := GetRunAll(ctx, w.C, w.RunID)
	if err != nil {
		return err
	}
	r := resp.GetRun()
	for _, t := range resp.GetTransitions() {
		if t.GetSeq() > w.last {
			w.show(&rbookv1.WatchRunResponse{Run: r, Transition: t})
		}
	}
	w.ended(r.GetKind(), r.GetStatus())
	if s := r.GetStatus(); s != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED && s != rbookv1.RunStatus_RUN_STATUS_FAILED && s != rbookv1.RunStatus_RUN_STATUS_CANCELLED {
		again := w.RunWords
		if r.GetKind() != rbookv1.RunKind_RUN_KIND_PLAYBOOK {
			again = "rbook run " + r.GetName()
		}
		fmt.Fprintf(w.Errw, "No executor is running it now, so nothing more will arrive; '%s' in this folder resumes it.\n", again)
	}
	return nil
}

// Follow replays the run's transitions from the sequence number from and prints each new one
// until the run finishes. A broken stream is reopened — on the next URL of a list when this
// one stopped answering — from the seq after the last one shown: none twice, none missed.
func (w *Watcher) Follow(ctx context.Context, from int64) error {
	w.last, w.kind = from-1, rbookv1.RunKind_RUN_KIND_RUNBOOK
	finished := false
	err := w.C.WatchRun(ctx, w.RunID, from, func(m *rbookv1.WatchRunResponse) (bool, error) {
		w.show(m)
		// The stream replays first, so a finished run still shows every transition.
		if t := m.GetTransition(); t.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_RUN_FINISHED {
			finished = true
			w.ended(w.kind, t.GetRunStatus())
			return true, nil
		}
		return false, nil
	})
	if err != nil || finished {
		return err
	}
	// The stream ended with the run: show what it did not carry, then the outcome.
	resp, err := w.C.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: w.RunID})
	if err != nil {
		return err
	}
	for _, t := range resp.GetTransitions() {
		if t.GetSeq() > w.last {
			w.show(&rbookv1.WatchRunResponse{Run: resp.GetRun(), Transition: t})
		}
	}
	w.ended(resp.GetRun().GetKind(), resp.GetRun().GetStatus())
	return nil
}
