package termui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// The status words a person sees. The proto enum is the machine form; a runbook run is shown
// in the state file's words and a playbook run in the playbook's words (running, paused,
// succeeded, failed, cancelled). A run waiting at a gate shows AWAITING_CONFIRMATION
// (runbook) or paused (playbook). This is the one place that maps them.
var (
	runbookWords = map[rbookv1.RunStatus]string{
		rbookv1.RunStatus_RUN_STATUS_RUNNING:   "IN_PROGRESS",
		rbookv1.RunStatus_RUN_STATUS_PAUSED:    "AWAITING_CONFIRMATION",
		rbookv1.RunStatus_RUN_STATUS_SUCCEEDED: "COMPLETED",
		rbookv1.RunStatus_RUN_STATUS_FAILED:    "FAILED",
		rbookv1.RunStatus_RUN_STATUS_CANCELLED: "CANCELLED",
	}
	playbookWords = map[rbookv1.RunStatus]string{
		rbookv1.RunStatus_RUN_STATUS_RUNNING:   "running",
		rbookv1.RunStatus_RUN_STATUS_PAUSED:    "paused",
		rbookv1.RunStatus_RUN_STATUS_SUCCEEDED: "succeeded",
		rbookv1.RunStatus_RUN_STATUS_FAILED:    "failed",
		rbookv1.RunStatus_RUN_STATUS_CANCELLED: "cancelled",
	}
)

// StatusWord is how a run's status is shown: the words of its kind.
func StatusWord(kind rbookv1.RunKind, s rbookv1.RunStatus) string {
	words := runbookWords
	if kind == rbookv1.RunKind_RUN_KIND_PLAYBOOK {
		words = playbookWords
	}
	if w, ok := words[s]; ok {
		return w
	}
	return s.String()
}

// ParseStatusFilter turns any spelling shown anywhere (IN_PROGRESS, in-progress, running,
// AWAITING_CONFIRMATION, paused, COMPLETED, succeeded, RUN_STATUS_FAILED, …; any case) into
// the enum values it selects. IN_PROGRESS is the state file's word for a run that has not
// ended, so it selects both RUNNING and PAUSED.
func ParseStatusFilter(s string) ([]rbookv1.RunStatus, error) {
	w := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	w = strings.TrimPrefix(w, "RUN_STATUS_")
	switch w {
	case "IN_PROGRESS":
		return []rbookv1.RunStatus{rbookv1.RunStatus_RUN_STATUS_RUNNING, rbookv1.RunStatus_RUN_STATUS_PAUSED}, nil
	case "RUNNING":
		return []rbookv1.RunStatus{rbookv1.RunStatus_RUN_STATUS_RUNNING}, nil
	case "PAUSED", "AWAITING_CONFIRMATION", "WAITING":
		return []rbookv1.RunStatus{rbookv1.RunStatus_RUN_STATUS_PAUSED}, nil
	case "COMPLETED", "SUCCEEDED":
		return []rbookv1.RunStatus{rbookv1.RunStatus_RUN_STATUS_SUCCEEDED}, nil
	case "FAILED":
		return []rbookv1.RunStatus{rbookv1.RunStatus_RUN_STATUS_FAILED}, nil
	case "CANCELLED", "CANCELED":
		return []rbookv1.RunStatus{rbookv1.RunStatus_RUN_STATUS_CANCELLED}, nil
	}
	return nil, fmt.Errorf("--status %q is not a run status; use one of %s (or the playbook words running, paused, succeeded, failed, cancelled)",
		s, strings.Join(StatusFilterWords, ", "))
}

// StatusFilterWords are the runbook words --status lists in its help.
var StatusFilterWords = []string{"IN_PROGRESS", "AWAITING_CONFIRMATION", "COMPLETED", "FAILED", "CANCELLED"}

// SortRunsNewestFirst orders runs merged from several ListRuns calls as one call would
// (started_at, then run_id, descending) and keeps at most limit of them.
func SortRunsNewestFirst(runs []*rbookv1.Run, limit int) []*rbookv1.Run {
	slices.SortStableFunc(runs, func(a, b *rbookv1.Run) int {
		if c := b.GetStartedAt().AsTime().Compare(a.GetStartedAt().AsTime()); c != 0 {
			return c
		}
		return strings.Compare(b.GetRunId(), a.GetRunId())
	})
	if limit > 0 && len(runs) > limit {
		runs = runs[:limit]
	}
	return runs
}

// PlaybookRunWord is how a playbook run's state-file status is shown to a person (running,
// paused, failed, succeeded or cancelled): paused while a gate of the run is open.
func PlaybookRunWord(s engine.RunStatus, paused bool) string {
	switch s {
	case engine.RunCompleted:
		return playbookWords[rbookv1.RunStatus_RUN_STATUS_SUCCEEDED]
	case engine.RunFailed:
		return playbookWords[rbookv1.RunStatus_RUN_STATUS_FAILED]
	case engine.RunCancelled:
		return playbookWords[rbookv1.RunStatus_RUN_STATUS_CANCELLED]
	}
	if paused {
		return playbookWords[rbookv1.RunStatus_RUN_STATUS_PAUSED]
	}
	return playbookWords[rbookv1.RunStatus_RUN_STATUS_RUNNING]
}

// RunWord is how st's status is shown: the state file's word for a runbook run, the
// playbook word for a playbook run.
func RunWord(st *state.State) string {
	if st.Kind == state.KindPlaybook {
		return PlaybookRunWord(st.RunStatus, st.AwaitingConfirmation != nil)
	}
	return string(st.RunStatus)
}

// RunKindWord is the KIND column of rbook runs: "playbook" or "runbook".
func RunKindWord(r *rbookv1.Run) string {
	if r.GetKind() == rbookv1.RunKind_RUN_KIND_PLAYBOOK {
		return "playbook"
	}
	return "runbook"
}

// RunDone is the DONE column of rbook runs: steps done of the runbook's steps
// (last_completed_step_index+1 / total_steps), or for a playbook the nodes that finished
// (PASS, FAIL, TIMED_OUT or SKIPPED) of its nodes, since a DAG's nodes do not finish in index
// order.
func RunDone(r *rbookv1.Run) string {
	if p := r.GetPlaybook(); r.GetKind() == rbookv1.RunKind_RUN_KIND_PLAYBOOK && p != nil && len(p.GetNodes()) > 0 {
		done := 0
		for _, n := range p.GetNodes() {
			switch n.GetStatus() {
			case "PASS", "FAIL", "TIMED_OUT", "SKIPPED":
				done++
			}
		}
		return fmt.Sprintf("%d/%d", done, len(p.GetNodes()))
	}
	return fmt.Sprintf("%d/%d", r.GetLastCompletedStepIndex()+1, r.GetTotalSteps())
}
