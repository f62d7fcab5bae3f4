package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/embedded"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/cptarget"
	"github.com/rbookhq/rbook-action/internal/cpview"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// embeddedURLFile is where a running embedded control plane leaves its address, so
// `rbook approve` and friends in another terminal find it without flags.
const embeddedURLFile = ".rbook/controlplane.url"

// cpFlags are the connection flags of every control-plane command; t finds the control plane
// they name (internal/cptarget).
type cpFlags struct {
	url, output string
	// runCmd is the command whose run starts the embedded control plane, for help and
	// errors: "" means 'rbook run' (the runbook commands); the playbook commands set
	// "rbook playbook run".
	runCmd string
	t      cptarget.Target
}

// folder is this folder's embedded control plane, as the control-plane commands reach it.
var folder = cptarget.Folder{
	URLFile: embeddedURLFile, DB: embedded.DB, Listening: embedded.Listening, Served: embedded.DBServed,
	Loopback: embedded.LoopbackURL, LocalKey: embedded.ReadLocalKey, OpenHistory: openLocalHistory, Note: stateLinksNote,
	Progress: cpProgress,
}

// Serving the folder's database starts the embedded control plane, which writes folder's URL
// file: set in init, outside folder's initialiser.
func init() {
	folder.Serve = func(ctx context.Context) (string, func(), error) { return startEmbedded(ctx, io.Discard) }
}

// target is f's cptarget.Target, with the flags as given.
func (f *cpFlags) target() *cptarget.Target {
	f.t.Flag, f.t.RunCmd, f.t.Folder = f.url, f.runCmd, &folder
	return &f.t
}

func (f *cpFlags) register(cmd *cobra.Command, withOutput bool) {
	cmd.Flags().StringVar(&f.url, "control-plane", "", "control plane URL, or several separated by commas (tried in order) (default $RBOOK_CONTROL_PLANE, else the embedded one of a running '"+f.target().RunWords()+"')")
	if withOutput {
		cmd.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	}
}

// cpHelp is the paragraph every control-plane command's --help shares: where it connects.
const cpHelp = `Which control plane: --control-plane URL, else $RBOOK_CONTROL_PLANE, else the embedded
one of an 'rbook run' in progress in this folder (its address is in .rbook/controlplane.url).
Several URLs separated by commas (replicas) are tried in order: a call moves to the next
one when a URL does not answer, never when the control plane refuses it.
With auth on (rbook serve --auth-file), the bearer token comes from $RBOOK_TOKEN.
When no control plane is named or running and this folder holds .rbook/controlplane.db that
no process serves, approve, reject, watch and playbook cancel serve it themselves, on
loopback, for the command alone (stderr says so).`

// historyHelp adds, for the commands that only read, what happens when none is running.
const historyHelp = cpHelp + `
When none of those is running, the history of this folder's embedded runs is read from
.rbook/controlplane.db, read-only (stderr says so).`

// aborted is abort (exit 2) with err's message, or nil for nil.
func aborted(err error) error {
	if err == nil {
		return nil
	}
	return abort("%s", err)
}

// resolve is the control plane's URL (cptarget.Target.Resolve).
func (f *cpFlags) resolve() (u string, stale bool, err error) {
	u, stale, err = f.target().Resolve()
	return u, stale, aborted(err)
}

// client connects to the control plane (cptarget.Target.Client). The returned func releases it.
func (f *cpFlags) client(cmd *cobra.Command) (*cpclient.Client, func(), error) {
	c, done, err := f.target().Client(cmd.Context(), cmd.ErrOrStderr())
	return c, done, aborted(err)
}

// reader is client for the commands that only read history (cptarget.Target.Reader).
func (f *cpFlags) reader(cmd *cobra.Command) (*cpclient.Client, func(), error) {
	c, done, err := f.target().Reader(cmd.Context(), cmd.ErrOrStderr())
	return c, done, aborted(err)
}

// rpcError turns a control-plane error into a one-line message with its code and exit 1.
func (f *cpFlags) rpcError(err error) error {
	t := cpview.Target{URL: f.hintURL(), From: f.target().Source(), RunWords: f.target().RunWords(), SentToken: os.Getenv("RBOOK_TOKEN") != "", Listening: anyListening}
	if f.t.FromFile {
		t.URLFile = embeddedURLFile
	}
	return &exitError{code: exitFailed, msg: cpview.CallError(err, t)}
}

// rpcErrorOrNil is rpcError of err, or nil for nil.
func (f *cpFlags) rpcErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return f.rpcError(err)
}

func newDecideCmd(approve bool) *cobra.Command {
	var f cpFlags
	verb := decideVerb(approve)
	cmd := &cobra.Command{
		Use:     verb + " APPROVAL_ID|TOKEN",
		Short:   strings.ToUpper(verb[:1]) + verb[1:] + " a waiting confirm gate, by approval id or with its token",
		Long:    decideLong(approve),
		Example: decideExample(approve),
	}
	return withDecide(cmd, &f, approve, "Gate")
}

// decide approves or rejects one approval by token or approval id (rbook approve/reject,
// rbook playbook approve/reject): a token "-" is read from stdin; the control plane's refusal
// is printed with its E_ code (exit 1). noun names what was decided in the closing line
// ("Gate", "Approval node").
func decide(cmd *cobra.Command, f *cpFlags, approve bool, token, id, reason, approver, noun string, inputs []string, redoFrom string) error {
	if token == "-" {
		var err error
		if token, err = cpview.ReadToken(os.Stdin); err != nil {
			return abort("%v", err)
		}
	}
	if approver != "" && os.Getenv("RBOOK_TOKEN") != "" {
		return &usageError{cmd, errors.New("--approver is only for a control plane without auth: with $RBOOK_TOKEN set, the control plane records the identity of your token")}
	}
	values, err := cpview.ParseInputFlags(inputs)
	if err != nil {
		return &usageError{cmd, err}
	}
	c, done, err := f.client(cmd)
	if err != nil {
		return err
	}
	defer done()
	if approver == "" {
		approver = currentUser()
	}
	d := cpview.Decision{Approve: approve, Token: token, ApprovalID: id, Reason: reason, Approver: approver, RedoFrom: redoFrom, Inputs: values}
	rpcErr, err := cpview.Decide(cmd.Context(), c, cmd.OutOrStdout(), d, f.output == "json", noun)
	if rpcErr != nil {
		return f.rpcError(rpcErr)
	}
	return err
}

func newRunsCmd() *cobra.Command {
	var f cpFlags
	var status, runbook, repository, startedBy string
	var limit int
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs on the control plane, newest first",
		Long: `List the runs the control plane holds, newest first: run id, name (the runbook's or the
playbook's), kind (runbook or playbook), status (a runbook's IN_PROGRESS,
AWAITING_CONFIRMATION, COMPLETED, FAILED, CANCELLED; a playbook's running, paused, succeeded,
failed, cancelled), done (steps done of the runbook's steps; for a playbook, nodes finished of
its nodes), start time and who started it. --status, --runbook, --repository and --started-by
filter; -o json prints the ListRunsResponse as proto JSON.

` + historyHelp + `

Exit codes: 0 listed (possibly none), 1 the control plane refused or is unreachable,
2 usage, a bad --status, or no control plane and no local database.`,
		Example: `  rbook runs
  rbook runs --status failed --runbook demo
  rbook runs --control-plane http://127.0.0.1:7070 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := f.reader(cmd)
			if err != nil {
				return err
			}
			defer done()
			statuses := []rbookv1.RunStatus{rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED}
			if status != "" {
				if statuses, err = termui.ParseStatusFilter(status); err != nil {
					return abort("%v", err)
				}
			}
			req := &rbookv1.ListRunsRequest{Name: runbook, Repository: repository, StartedBy: startedBy}
			resp, err := cpview.ListRuns(cmd.Context(), c, req, statuses, limit)
			if err != nil {
				return f.rpcError(err)
			}
			if f.output == "json" {
				return cpview.PrintJSON(cmd.OutOrStdout(), resp)
			}
			return cpview.WriteRuns(cmd.OutOrStdout(), resp.GetRuns())
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&status, "status", "", "only runs with this status: "+strings.Join(termui.StatusFilterWords, ", ")+" (or running, paused, succeeded, failed, cancelled)")
	cmd.Flags().StringVar(&runbook, "runbook", "", "only runs of this runbook or playbook name")
	cmd.Flags().StringVar(&repository, "repository", "", "only runs of this GitHub repository (owner/name, any case)")
	cmd.Flags().StringVar(&startedBy, "started-by", "", "only runs started by this identity")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs")
	return cmd
}

func newGetCmd() *cobra.Command {
	var f cpFlags
	cmd := &cobra.Command{
		Use:   "get RUN_ID",
		Short: "Show a run on the control plane with every transition",
		Long: `Show one run: its status and progress, then every transition in order (sequence
number, time, kind, step, step status), then, while the run is not finished, the steps still
to run with their inputs (secrets masked) when its executor sent its plan: what approving its
waiting gate lets happen. -o json prints the GetRunResponse as proto JSON.

` + historyHelp + `

Exit codes: 0 shown, 1 no such run (E_RUN_NOT_FOUND), refused or unreachable, 2 usage or no
control plane and no local database.`,
		Example: `  rbook get RBOOK-20260512-demo-a1b2c3d4
  rbook get RBOOK-20260512-demo-a1b2c3d4 -o json | jq '.transitions | length'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := f.reader(cmd)
			if err != nil {
				return err
			}
			defer done()
			resp, err := cpview.GetRunAll(cmd.Context(), c, args[0])
			if err != nil {
				return f.rpcError(err)
			}
			if f.output == "json" {
				return cpview.PrintJSON(cmd.OutOrStdout(), resp)
			}
			out := cmd.OutOrStdout()
			cpview.WriteRun(out, resp)
			cpview.WriteStillToRun(out, resp)
			return nil
		},
	}
	f.register(cmd, true)
	return cmd
}

func newWatchCmd() *cobra.Command {
	var f cpFlags
	var from int64
	cmd := &cobra.Command{
		Use:   "watch RUN_ID",
		Short: "Follow a run's transitions live (replays from --from-seq first)",
		Long: `Follow a run: replay its transitions from --from-seq, then print each new one as the
executor records it, until the run finishes (the last line says how it ended). -o json
prints one WatchRunResponse per line. A running control plane is needed (a finished run's
history is also shown by 'rbook get').

` + cpHelp + `

A stream that breaks is reopened from the next sequence number; with several control-plane
URLs it moves to the next one when a URL stops answering. Each transition is shown once.

Exit codes: 0 the run finished (whatever its status), 1 no such run, refused, or the control
plane stayed unreachable for 10s, 2 usage or no control plane.`,
		Example: `  rbook watch RBOOK-20260512-demo-a1b2c3d4
  rbook watch RBOOK-20260512-demo-a1b2c3d4 --from-seq 10 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := f.client(cmd)
			if err != nil {
				return err
			}
			defer done()
			w := &cpview.Watcher{Out: cmd.OutOrStdout(), Errw: cmd.ErrOrStderr(), JSON: f.output == "json", C: c, RunID: args[0], RunWords: f.target().RunWords()}
			if f.t.Local {
				// No control plane was running, so no executor reports to this one: show what
				// is recorded instead of waiting for transitions that cannot come.
				return f.rpcErrorOrNil(w.Recorded(cmd.Context(), from))
			}
			return f.rpcErrorOrNil(w.Follow(cmd.Context(), from))
		},
	}
	f.register(cmd, true)
	cmd.Flags().Int64Var(&from, "from-seq", 1, "replay transitions from this sequence number")
	return cmd
}

func newApprovalsCmd() *cobra.Command {
	var f cpFlags
	var pending bool
	var runID string
	var limit int
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List confirm-gate approvals (tokens are never shown)",
		Long: `List the approvals of confirm gates: approval id, run, gate, status (pending, approved,
rejected, expired, cancelled), when it was requested, its deadline and who decided it.
Tokens are secrets and are never shown. When the control plane has a public URL (rbook serve
--public-url; an embedded control plane's own address), a PAGE column gives each gate's page
in a browser. -o json prints the ListApprovalsResponse (approval_url is each page).

` + historyHelp + `

Exit codes: 0 listed (possibly none), 1 refused or unreachable, 2 usage or no control plane
and no local database.`,
		Example: `  rbook approvals --pending
  rbook approvals --run RBOOK-20260512-demo-a1b2c3d4 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := f.reader(cmd)
			if err != nil {
				return err
			}
			defer done()
			req := &rbookv1.ListApprovalsRequest{RunId: runID}
			if pending {
				req.Status = rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING
			}
			resp, err := cpview.ListApprovals(cmd.Context(), c, req, limit)
			if err != nil {
				return f.rpcError(err)
			}
			if f.output == "json" {
				return cpview.PrintJSON(cmd.OutOrStdout(), resp)
			}
			return cpview.WriteApprovals(cmd.OutOrStdout(), resp.GetApprovals())
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&pending, "pending", false, "only gates still waiting for a decision")
	cmd.Flags().StringVar(&runID, "run", "", "only approvals of this run")
	cmd.Flags().IntVar(&limit, "limit", 200, "at most this many approvals, newest first")
	return cmd
}

// decideVerb is the verb of a decide command: "approve" or "reject".
func decideVerb(approve bool) string {
	if approve {
		return "approve"
	}
	return "reject"
}

// withDecide completes cmd (rbook approve/reject, rbook playbook approve/reject) with what they
// share: one argument, an approval id or a token ("-" reads it from stdin; checkApprovalArg
// refuses others), f's control-plane flags and --reason and --approver, and decide as RunE;
// noun names what was decided in the closing line ("Gate", "Approval node").
func withDecide(cmd *cobra.Command, f *cpFlags, approve bool, noun string) *cobra.Command {
	var reason, approver, redoFrom string
	var inputs []string
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := cpview.CheckApprovalArg(args[0]); err != nil {
			return abort("rbook: %v", err)
		}
		token, id := args[0], ""
		if cpview.IsApprovalID(token) {
			token, id = "", token
		}
		return decide(cmd, f, approve, token, id, reason, approver, noun, inputs, redoFrom)
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the decision)")
	cmd.Flags().StringVar(&approver, "approver", "", `who decides, only without auth (no $RBOOK_TOKEN): recorded as "unverified:NAME" (default: your user name)`)
	if approve {
		cmd.Flags().StringArrayVar(&inputs, "input", nil, "NAME=VALUE for the gate's approver-input form, repeatable (docs/approver-inputs.md); an invalid value is refused naming the field")
	} else {
		cmd.Flags().StringVar(&redoFrom, "redo-from", "", "NODE: send a playbook run back to this rewind target of the approval node instead of failing it; --reason is the comment its nodes read (docs/push-back.md)")
	}
	return cmd
}
