package main

// `rbook github post`: what the Action's post step (action/shim/post.js, `post-if: always()`)
// runs when the job ends, however it ended (issue 7, item 2). A final run only has its outbox
// delivered. An unfinished one — the job was cancelled, timed out, or rbook was killed — has
// its outbox delivered, a run_interrupted transition recorded (state file and control plane,
// under the run's own lease), and its pending approvals withdrawn by the control plane, so
// nobody approves a gate whose job is gone.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// postInterruptedMessage is the message of the run_interrupted transition `rbook github
// post` records for a run its job left unfinished (issue 7, item 2).
const postInterruptedMessage = "interrupted: the GitHub Actions job ended while the run was unfinished (recorded by rbook github post)"

// newGitHubCmd is the `rbook github` group: commands the GitHub Action runs (issue 7, item 2).
func newGitHubCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "github",
		Short: "Commands the rbook GitHub Action runs (post)",
		Long: `Commands the rbook GitHub Action runs itself; see 'rbook github post --help'.

Exit codes: 0 done, 2 usage or an unknown command.`,
		Example: `  rbook github post demo                # what the Action's post step runs`,
	}
	cmd.AddCommand(newGitHubPostCmd())
	return cmd
}

func newGitHubPostCmd() *cobra.Command {
	var c common
	var cp deliverFlags
	var playbook string
	cmd := &cobra.Command{
		Use:   "post [RUNBOOK | --playbook FILE]",
		Short: "End of the Action's job: deliver the outbox; an unfinished run is recorded interrupted and its approvals withdrawn",
		Long: `Run by the rbook Action's post step when the job ends, however it ended.

For the runbook's state file: a final run only has its undelivered transitions (the outbox)
sent to its control plane. A run that is not final (the job was cancelled or timed out, or
rbook was killed) has its outbox sent, a run_interrupted transition recorded in the state file
and on the control plane (under the run's own lease), and the control plane withdraws the
run's pending approvals (cancelled, decided_by_source "interrupted"), so nobody approves a
gate whose job is gone. One line is printed per withdrawn approval id (never a token). The
run stays resumable: 'rbook run RUNBOOK' (with the state file) opens the gate again.

A run the job left paused at a gate on purpose (RBOOK_GATE_MODE=pause, which the Action sets
from its gate-mode input, and the control plane's last transition opened the gate the state
file awaits) is left alone: its gate stays open for a later job's 'rbook resume'.

With --playbook FILE (the Action's playbook input) it does the same for that playbook's run
(state file .rbook/<playbook-name>.playbook.state.json): its pending approval nodes are
withdrawn, and it resumes with 'rbook playbook run FILE'.

With no state file (the job never started a run) it says so and exits 0.

Exit codes: 0 done (or nothing to do), 2 the outbox could not be delivered, the interruption
could not be recorded, or an approval is still pending.`,
		Example: `  rbook github post demo
  rbook github post prod --dir ops/runbooks --control-plane https://rbook.example.internal
  rbook github post --playbook runbooks/release.cantbook`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var tgt postTarget
			if playbook != "" {
				if len(args) > 0 {
					return abort("rbook github post: give RUNBOOK or --playbook FILE, not both (got %q and --playbook %s)", args[0], playbook)
				}
				plan, err := runbook.LoadPlaybook(playbook)
				if err != nil {
					// The main step reported this already and never started a run.
					fmt.Fprintf(cmd.ErrOrStderr(), "rbook github post: no run to finish: playbook %s could not be loaded: %v\n", playbook, err)
					return nil
				}
				tgt = postTarget{name: playbook, statePath: state.DefaultPlaybookStatePath(plan.Name), resume: "rbook playbook run " + playbook}
			} else {
				name := c.runbookArg(cmd, args)
				plan, err := c.loadPlan(name)
				if err != nil {
					var ee *exitError
					if errors.As(err, &ee) {
						// The main step reported this already and never started a run.
						fmt.Fprintf(cmd.ErrOrStderr(), "rbook github post: no run to finish: runbook %s could not be loaded:\n%s\n", name, ee.msg)
						return nil
					}
					return err
				}
				tgt = postTarget{name: name, statePath: plan.StateFilePath, resume: "rbook run " + name}
			}
			return githubPost(cmd.Context(), tgt, cp, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.register(cmd)
	cp.register(cmd, "")
	cmd.Flags().StringVar(&playbook, "playbook", "", "finish the run of this .cantbook playbook instead of a runbook's (the Action's playbook input)")
	return cmd
}

// postTarget is the run `rbook github post` finishes: a runbook's (name RUNBOOK) or a
// playbook's (name FILE, issue 9), with its state file and the command that resumes it.
type postTarget struct {
	name, statePath, resume string
}

// githubPost is `rbook github post` (see its Long help) for tgt's run. Messages go to errw; the withdrawn
// approval ids, one a line ("Withdrawn approval a-… (gate '…' of run …)"), to out.
func githubPost(ctx context.Context, tgt postTarget, cp deliverFlags, out, errw io.Writer) error {
	name, statePath := tgt.name, tgt.statePath
	if _, err := state.Read(statePath); errors.Is(err, state.ErrNotExist) {
		fmt.Fprintf(errw, "rbook github post: no run to finish: %s does not exist (the job never started a run of %s).\n", statePath, name)
		return nil
	}
	lock, err := state.Acquire(statePath, "post")
	if err != nil {
		return abort("rbook github post: %v", err)
	}
	defer lock.Release()
	st, err := state.Read(statePath)
	if err != nil {
		return abort("rbook github post: %v", err)
	}
	if st.RunStatus.Final() {
		if err := deliverFinal(ctx, statePath, cp.url, cp.timeout, errw); err != nil {
			return abort("rbook github post: %v", err)
		}
		fmt.Fprintf(errw, "rbook github post: run %s is %s; nothing to withdraw.\n", st.RunID, runWord(st))
		return nil
	}
	fileRec := &state.FileRecorder{Path: statePath, State: st}
	if !st.ControlPlaneEmbedded && st.ControlPlane == "" {
		// The run kept its record in the state file only: no approvals exist anywhere.
		if st.Interrupted == nil {
			if err := fileRec.Record(ctx, interruptedTransition(st, st.Seq)); err != nil {
				return abort("rbook github post: %v", err)
			}
		}
		fmt.Fprintf(errw, "rbook github post: run %s is unfinished; recorded it interrupted in %s (it reports to no control plane). Resume it with: %s\n", st.RunID, statePath, tgt.resume)
		return nil
	}
	url, stop, err := outboxTarget(ctx, st, cp.url)
	if err != nil {
		return abort("rbook github post: run %s is unfinished, and its control plane cannot be reached: %v", st.RunID, err)
	}
	defer stop()
	if closed, err := closeIfFinishedAt(ctx, url, finishedElsewhereCheck, statePath, st, errw); err == nil && closed != nil {
		fmt.Fprintf(errw, "rbook github post: run %s was finished elsewhere and is %s; nothing to withdraw.\n", st.RunID, closed.RunStatus)
		return nil
	}
	fileRec.KeepOutbox = true
	if _, err := deliver(ctx, fileRec, url, cp.timeout); err != nil {
		return abort("rbook github post: run %s is unfinished, and %d of its transitions could not be delivered to the control plane %s: %v", st.RunID, fileRec.Unacked(), url, err)
	}
	// Authenticated as the run was (newCPClient: RBOOK_TOKEN, or the job's OIDC token).
	cl, err := newCPClient(url, st.ControlPlaneEmbedded)
	if err != nil {
		return abort("rbook github post: %v", err)
	}
	cl.Deadline = cp.timeout
	cl.SetFence(st.OwnerID, st.LeaseEpoch)
	if paused, err := leftPaused(ctx, cl, st, name, errw); err != nil {
		return abort("rbook github post: %v", err)
	} else if paused {
		return nil
	}
	pending, err := pendingApprovals(ctx, cl, st.RunID)
	if err != nil {
		return abort("rbook github post: %v", err)
	}
	if st.Interrupted == nil || len(pending) > 0 {
		// Record the interruption after the last transition the control plane holds: the
		// state file does not write every transition (issue 6, item 1.1; as rbook cancel).
		last, err := cl.LastSeq(ctx, st.RunID)
		if err != nil {
			return abort("rbook github post: run %s is unfinished: %v", st.RunID, err)
		}
		if err := fileRec.Record(ctx, interruptedTransition(st, max(st.Seq, last))); err != nil {
			return abort("rbook github post: %v", err)
		}
		if _, err := deliver(ctx, fileRec, url, cp.timeout); err != nil {
			return abort("rbook github post: run %s: the interruption is recorded in %s but not on the control plane %s: %v", st.RunID, statePath, url, err)
		}
	}
	// Every approval that was pending must be closed now; the control plane withdraws them
	// in the transaction that records run_interrupted.
	var still []string
	for _, a := range pending {
		resp, err := cl.Approvals.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: a.GetApprovalId()})
		if err != nil {
			return abort("rbook github post: control plane %s: GetApproval %s: %v", url, a.GetApprovalId(), err)
		}
		if resp.GetApproval().GetStatus() == rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
			still = append(still, a.GetApprovalId())
			continue
		}
		fmt.Fprintf(out, "Withdrawn approval %s (gate '%s' of run %s)\n", a.GetApprovalId(), a.GetStepName(), st.RunID)
	}
	if len(still) > 0 {
		return abort("rbook github post: run %s is recorded interrupted, but the control plane %s left approval(s) %s pending (does it predate issue 7?); reject them with 'rbook reject'",
			st.RunID, url, strings.Join(still, ", "))
	}
	if len(pending) == 0 {
		// rbook itself recorded the interruption (SIGINT/SIGTERM from the runner), which
		// withdrew the gate's approval already: say which, so the job log shows it closed.
		if a := lastWithdrawn(ctx, cl, st.RunID); a != nil {
			fmt.Fprintf(out, "Approval %s (gate '%s' of run %s) was withdrawn when the job was interrupted\n", a.GetApprovalId(), a.GetStepName(), st.RunID)
		}
	}
	fmt.Fprintf(errw, "rbook github post: run %s is unfinished and recorded interrupted on the control plane %s; %d pending approval(s) withdrawn. Resume it with: %s\n",
		st.RunID, url, len(pending), tgt.resume)
	return nil
}

// leftPaused reports whether st's run is one the job left paused at a gate on purpose (issue
// 8, items 4-5): the gate mode is pause ($RBOOK_GATE_MODE, which the Action's post step gets
// from the same gate-mode input as its main step), the state file awaits a confirmation and
// records no interruption, and the control plane's last transition of the run opened that
// gate. Such a run is left alone — its gate stays open (or decided, if an approver was quick)
// for a later job's `rbook resume` — and one line says so on errw. Errors are the control
// plane's (GetRun, retried as cpclient retries).
func leftPaused(ctx context.Context, cl *cpclient.Client, st *state.State, name string, errw io.Writer) (bool, error) {
	ac := st.AwaitingConfirmation
	if os.Getenv("RBOOK_GATE_MODE") != gateModePause || ac == nil || st.Interrupted != nil {
		return false, nil
	}
	resp, err := cl.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: st.RunID})
	if err != nil {
		return false, fmt.Errorf("run %s is unfinished: control plane %s: GetRun: %w", st.RunID, cl.URL, err)
	}
	ts := resp.GetTransitions()
	if len(ts) == 0 {
		return false, nil
	}
	if last := ts[len(ts)-1]; last.GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED || last.GetStepIndex() != int32(ac.StepIndex) {
		return false, nil
	}
	approval := "its approval"
	if page, err := cl.Approvals.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: st.RunID, PageSize: 1}); err == nil && len(page.GetApprovals()) > 0 {
		a := page.GetApprovals()[0]
		approval = fmt.Sprintf("approval %s (%s)", a.GetApprovalId(), strings.ToLower(strings.TrimPrefix(a.GetStatus().String(), "APPROVAL_STATUS_")))
	}
	fmt.Fprintf(errw, "rbook github post: run %s is paused at gate '%s' (gate-mode pause); nothing withdrawn: %s stays on the control plane %s, and a later job continues the run with verb resume (rbook resume %s --run-id %s).\n",
		st.RunID, ac.StepName, approval, cl.URL, name, st.RunID)
	return true, nil
}

// interruptedTransition is the run_interrupted transition after seq for st's run, at the gate
// it waited at or the side-effecting step it was running, if any.
func interruptedTransition(st *state.State, seq int64) engine.Transition {
	t := engine.Transition{RunID: st.RunID, Seq: seq + 1, Kind: engine.TransitionRunInterrupted, Time: time.Now().UTC(),
		StepIndex: -1, RunStatus: engine.RunInProgress, Message: postInterruptedMessage, RollbackFor: st.RollbackFor}
	switch {
	case st.AwaitingConfirmation != nil:
		t.StepIndex, t.StepName, t.StepType = st.AwaitingConfirmation.StepIndex, st.AwaitingConfirmation.StepName, "confirm"
	case st.InFlight != nil:
		t.StepIndex, t.StepName, t.StepType = st.InFlight.StepIndex, st.InFlight.StepName, st.InFlight.StepType
	case len(st.InFlightNodes) > 0: // a playbook's first node in flight (issue 9)
		f := st.InFlightNodes[0]
		t.StepIndex, t.StepName, t.StepType = f.StepIndex, f.StepName, f.StepType
	}
	return t
}

// lastWithdrawn is runID's newest approval when the control plane withdrew it at an
// interruption (decided_by_source "interrupted"), else nil (the newest gate was decided
// otherwise, there is none, or the lookup failed: it only informs the log).
func lastWithdrawn(ctx context.Context, cl *cpclient.Client, runID string) *rbookv1.Approval {
	page, err := cl.Approvals.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: runID, PageSize: 1})
	if err != nil || len(page.GetApprovals()) == 0 || page.GetApprovals()[0].GetDecidedBySource() != "interrupted" {
		return nil
	}
	return page.GetApprovals()[0]
}

// pendingApprovals lists runID's pending approvals on the control plane, every page.
func pendingApprovals(ctx context.Context, cl *cpclient.Client, runID string) ([]*rbookv1.Approval, error) {
	req := &rbookv1.ListApprovalsRequest{RunId: runID, Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING}
	var all []*rbookv1.Approval
	for {
		page, err := cl.Approvals.ListApprovals(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("control plane %s: ListApprovals of run %s: %w", cl.URL, runID, err)
		}
		all = append(all, page.GetApprovals()...)
		if page.GetNextPageToken() == "" {
			return all, nil
		}
		req.PageToken = page.GetNextPageToken()
	}
}
