package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/gateinputs/inputspb"
)

// startOnControlPlane creates the run on the control plane, or resumes it there, under the
// lease rule (docs/control-plane.md, "Leases"): nothing is recorded there before the lease is granted. A fresh
// run whose id the control plane holds as final, or that another executor owns (another
// workspace started the same runbook the same day), takes the next suffix of its run id: N
// workspaces starting one runbook at once all run, each under its own id. A resumed run that
// another executor owns is refused unless TakeOver is set, which starts the resumed run under
// a fresh owner id, kept only when the take-over succeeds (a restored copy of another
// workspace's state file must not pass the lease check). A playbook run is started with kind
// RUN_KIND_PLAYBOOK, its inputs as its first bindings, its epic and session.
//
// A fresh run never continues a run with transitions: when the control plane hands back an
// existing run of this folder's own owner id (its previous run, final here but not yet there)
// the fresh run moves on too; one without transitions (a run that died between StartRun and
// its first write) is taken as this one.
func (a *attempt) startOnControlPlane(ctx context.Context, c *cpclient.Client) (_ cpclient.Started, err error) {
	plan, opened, takeOver := a.Plan, a.opened, a.TakeOver
	st, resumed := opened.State, opened.Resumed
	if takeOver && resumed {
		// A take-over is another executor instance: a restored copy of the old workspace's
		// state file carries the old owner id, which would resume the run as its owner and
		// skip the lease check, even while the old executor still holds the lease; with a
		// fresh owner id the control plane decides (E_LEASE_HELD until the lease expired),
		// and the old executor, if alive, is fenced (E_LEASE_LOST).
		// A refused take-over keeps the state file's owner id.
		old := st.OwnerID
		st.OwnerID = state.NewOwnerID()
		defer func() {
			if err != nil {
				st.OwnerID = old
			}
		}()
	}
	runPlan := cpclient.PlanOf(plan)
	bindingsJSON := ""
	if pb := a.Playbook; pb != nil {
		b, err := json.Marshal(pb.Inputs)
		if err != nil {
			return cpclient.Started{}, fmt.Errorf("inputs: %v", err)
		}
		bindingsJSON = string(b)
	}
	for range 1000 {
		info := cpclient.RunInfo{
			RunID: st.RunID, RunbookName: plan.Name, PlanDigest: plan.ContentHash, SchemaHash8: plan.SchemaHash8,
			StartedBy: a.who, TotalSteps: len(plan.Steps), StartedAt: startedAt(st), OwnerID: st.OwnerID,
			TakeOver: takeOver && resumed, Lease: a.Lease, Reported: ReportedWorkflowRun(""), Plan: runPlan,
		}
		if pb := a.Playbook; pb != nil {
			info.Kind, info.Bindings, info.EpicID, info.SessionID = rbookv1.RunKind_RUN_KIND_PLAYBOOK, bindingsJSON, st.EpicID, st.SessionID
		}
		started, err := c.StartRun(ctx, info)
		taken := errors.Is(err, cpclient.ErrRunFinal) || errors.Is(err, cpclient.ErrRunOwned) ||
			err == nil && !started.Created && started.LastSeq > 0
		switch {
		case !resumed && taken:
			st.RunID = opened.NextFreeRunID(st.RunID)
			continue
		case errors.Is(err, cpclient.ErrRunFinal):
			return started, fmt.Errorf("run %s on the control plane %s: %w", st.RunID, c.URL, errFinalThere)
		case errors.Is(err, cpclient.ErrRunOwned) && a.Playbook != nil:
			return started, fmt.Errorf("%v\nThis state file's executor does not own run %s any more", err, st.RunID)
		case errors.Is(err, cpclient.ErrRunOwned):
			return started, fmt.Errorf("%v\nThis state file's executor does not own run %s any more. If the other executor is gone, "+
				"run the same command with --take-over once its lease expired", err, st.RunID)
		case errors.Is(err, cpclient.ErrLeaseHeld) && a.Playbook == nil:
			return started, fmt.Errorf("%v\nWait until the lease expires (the other executor may still be running), then retry", err)
		case err != nil:
			return started, err
		}
		if takeOver && resumed && started.LastCompletedStepIndex > st.LastCompletedStepIndex {
			// The state file skips only transitions a resume repeats anyway (a check's or
			// gate's step_started, gate_opened), so only finished steps it lacks matter.
			return started, fmt.Errorf("run %s: the control plane saw step %d finish but this state file only step %d; "+
				"the executor you are taking over from went further. Restore its state file (the job's artifact) and run again with --take-over",
				st.RunID, started.LastCompletedStepIndex, st.LastCompletedStepIndex)
		}
		st.LeaseEpoch = started.Epoch
		return started, nil
	}
	return cpclient.Started{}, fmt.Errorf("no free run id after %s", st.RunID)
}

// announcer prints how to decide an open gate: the approve command with its token on a
// terminal, each command on a line of its own so a copy takes the token whole; in CI only the
// approval id, because the token is a secret. On the embedded control plane the approval id
// works from another terminal in this folder (the local approver key, embedded.go). RBOOK_SHOW_TOKEN=1
// prints the command anyway (for scripts that read the output; never in shared logs).
func announcer(errw io.Writer, url string, embedded bool) func(a *rbookv1.Approval, token string) {
	target := " --control-plane " + url
	if embedded {
		target = "" // other terminals find the embedded control plane in .rbook/controlplane.url
	}
	interactive := showApprovalToken()
	return func(a *rbookv1.Approval, token string) {
		defer printInputsHint(errw, a)
		defer printPageLink(errw, a)
		id := a.GetApprovalId()
		switch {
		case embedded && interactive:
			fmt.Fprintf(errw, "Approval %s is open on %s. From another terminal in this folder:\n  rbook approve %s\nor with its token, from wherever %s is reachable:\n  rbook approve %s --control-plane %s\n", id, url, id, url, token, url)
		case embedded:
			fmt.Fprintf(errw, "Approval %s is open on the embedded control plane %s; decide it from another terminal in this folder with: rbook approve %s (its token is a secret and is not printed here).\n", id, url, id)
		case interactive:
			fmt.Fprintf(errw, "Approval %s is open on %s. From another terminal:\n  rbook approve %s%s\n", id, url, token, target)
		default:
			fmt.Fprintf(errw, "Approval %s is open on the control plane %s (its token is a secret and is not printed here: %s).\n", id, url, seeTokenHint)
		}
	}
}

// printPageLink prints the gate's page on the console (Approval.approval_url), when the
// control plane has a public URL, after a gate's announcement: the embedded control plane's
// is its loopback address (docs/console-links.md). The link carries no secret.
func printPageLink(errw io.Writer, a *rbookv1.Approval) {
	if u := a.GetApprovalUrl(); u != "" {
		fmt.Fprintf(errw, "Open in a browser: %s\n", u)
	}
}

// seeTokenHint is how to see an open gate's approval token when this output does not show
// it: the one mechanism rbook has, a terminal or RBOOK_SHOW_TOKEN=1 (showApprovalToken).
const seeTokenHint = "run rbook on a terminal, or with RBOOK_SHOW_TOKEN=1 where this output is private, to see it; " +
	"deciding by the approval id instead needs a control plane with --auth-file"

func startedAt(st *state.State) time.Time {
	if t, err := time.Parse(engine.TimeFormat, st.StartedUTC); err == nil {
		return t
	}
	return time.Now().UTC()
}

// stateControlPlane is the one override of a run's control plane by its state file st (at
// statePath): with neither --control-plane nor $RBOOK_CONTROL_PLANE, a run whose state file
// names a separate control plane (one URL or a list of replicas, not the embedded one)
// reports to that control plane again, and ok is true; otherwise c is returned as it is.
// Without it, a resumed run would start an embedded control plane, whose record lacks the
// run's earlier transitions (E_SEQ_GAP at every attempt), and overwrite the state file's
// link. The error (the state file's value is not a control-plane list) names the state file.
func (c Config) stateControlPlane(st *state.State, statePath string) (_ Config, ok bool, err error) {
	if c.ControlPlane != "" || st == nil || st.ControlPlane == "" || st.ControlPlaneEmbedded {
		return c, false, nil
	}
	c.Flag = st.ControlPlane
	c.ControlPlane, c.From = NormURLs(st.ControlPlane), "the state file "+statePath
	c.invalid = CheckURLs(c.ControlPlane, c.From)
	return c, true, c.invalid
}

// noteCPRelink says, on errw, when a resumed run is about to report to another control plane
// than the one its state file names, before the state file's link is rewritten (a link is
// never replaced silently). cpURL and embedded are the control
// plane the run now uses; from names where it came from. Nothing when the run is fresh, when
// the state file names no control plane, or when both are the same (an embedded control
// plane's URL changes at every start: embedded to embedded is the same one).
func noteCPRelink(errw io.Writer, st *state.State, resumed bool, cpURL string, embedded bool, from, embeddedDB string) {
	if !resumed || st == nil || (st.ControlPlane == "" && !st.ControlPlaneEmbedded) {
		return
	}
	if embedded == st.ControlPlaneEmbedded && (embedded || cpURL == st.ControlPlane) {
		return
	}
	old := st.ControlPlane
	if st.ControlPlaneEmbedded {
		old = "the embedded control plane (" + embeddedDB + ")"
	}
	now := cpURL + " (from " + from + ")"
	if embedded {
		now = "the embedded control plane (" + embeddedDB + ", no --control-plane or RBOOK_CONTROL_PLANE given)"
	}
	fmt.Fprintf(errw, "Note: run %s reported to %s; it now reports to %s, and its state file records that. "+
		"A control plane without the run's earlier transitions refuses the next one (E_SEQ_GAP): to go back, stop now (Ctrl-C) and resume with --control-plane %s.\n",
		st.RunID, old, now, cpHint(st))
}

// cpHint is the --control-plane value that reaches st's recorded control plane, for hints:
// its URL list, or "" (leave the flag out) for the embedded one.
func cpHint(st *state.State) string {
	if st.ControlPlaneEmbedded {
		return `"" (leave the flag out)`
	}
	return ShellQuote(st.ControlPlane)
}

// RunbookHints are the resume and cancel commands an interrupted runbook run prints:
// "rbook run NAME" and "rbook cancel NAME", with
// "--control-plane LIST" when the run reports to a separate control plane (cpURL, not
// embedded), so the command printed is the one that reaches it.
func RunbookHints(name, cpURL string, embedded bool) (resume, cancel string) {
	resume, cancel = "rbook run "+name, "rbook cancel "+name
	if cpURL != "" && !embedded {
		resume += " --control-plane " + ShellQuote(cpURL)
		cancel += " --control-plane " + ShellQuote(cpURL)
	}
	return resume, cancel
}

// ShellQuote quotes s for a POSIX shell when it holds anything but [A-Za-z0-9_./:=@%+,-].
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:=@%+,-", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// PlaybookResumeCmd is the command that resumes this playbook run, as a person would paste
// it: rbook playbook run FILE, with --state-file when it is not the default, --control-plane
// when one was named on the command line and --mcp-config when given. The inputs are not
// repeated: a resume reads them from the state file (runPlaybook), which the hint says.
func PlaybookResumeCmd(file, statePath, planName, controlPlane, mcpConfig string) string {
	parts := []string{"rbook", "playbook", "run", ShellQuote(file)}
	if statePath != state.DefaultPlaybookStatePath(planName) {
		parts = append(parts, "--state-file", ShellQuote(statePath))
	}
	if controlPlane != "" {
		parts = append(parts, "--control-plane", ShellQuote(controlPlane))
	}
	if mcpConfig != "" {
		parts = append(parts, "--mcp-config", ShellQuote(mcpConfig))
	}
	return strings.Join(parts, " ") + " (its inputs are read from the state file)"
}

// PlaybookEndHint is how to end an interrupted playbook run instead of resuming it. With a
// separate control plane (cpURL, not embedded) that is rbook playbook cancel RUN_ID
// --control-plane URL; with the embedded one or none, nothing can reach the run once this
// process has exited, so it says what works: resume it and type cancel at an approval node,
// or move the state file aside to drop the run.
func PlaybookEndHint(runID, statePath, cpURL string, embedded bool) string {
	if cpURL != "" && !embedded {
		return fmt.Sprintf("rbook playbook cancel %s --control-plane %s", runID, ShellQuote(cpURL))
	}
	why := "it has no control plane to cancel it on"
	if embedded {
		why = "the embedded control plane that could cancel it ended with this process"
	}
	return fmt.Sprintf("resume it and type cancel at an approval node, or move %s aside to drop the run; %s", ShellQuote(statePath), why)
}

// playbookAnnouncer prints how to decide an open approval node: `rbook playbook approve
// <TOKEN>` on a terminal or with RBOOK_SHOW_TOKEN=1, else only the approval id (the token is
// a secret; the same rule as announcer for runbook gates).
//
// The printed command names the control plane (--control-plane URL) when it is a separate
// one; the embedded one's address changes with every run, so the line says instead that the
// command works from this folder while this run waits.
func playbookAnnouncer(errw io.Writer, url string, embedded bool) func(a *rbookv1.Approval, token string) {
	target := " --control-plane " + url
	where := "From another terminal"
	if embedded {
		target = ""
		where = "From another terminal in this folder, while this run waits (the embedded control plane ends with this process)"
	}
	interactive := showApprovalToken()
	return func(a *rbookv1.Approval, token string) {
		defer printInputsHint(errw, a)
		defer fmt.Fprint(errw, cpclient.PushBackHint(a))
		defer printPageLink(errw, a)
		id := a.GetApprovalId()
		if interactive {
			if embedded {
				fmt.Fprintf(errw, "Approval %s is open on %s. %s:\n  rbook playbook approve %s\n  rbook playbook reject %s\nor with its token:\n  rbook playbook approve %s\n  rbook playbook reject %s\n", id, url, where, id, id, token, token)
				return
			}
			fmt.Fprintf(errw, "Approval %s is open on %s. %s:\n  rbook playbook approve %s%s\n  rbook playbook reject %s%s\n", id, url, where, token, target, token, target)
			return
		}
		if embedded {
			fmt.Fprintf(errw, "Approval %s is open on the embedded control plane %s; decide it from another terminal in this folder with: rbook playbook approve %s (its token is a secret and is not printed here).\n", id, url, id)
			return
		}
		fmt.Fprintf(errw, "Approval %s is open on the control plane %s (its token is a secret and is not printed here: %s); decide it with: rbook approve %s --control-plane %s\n", id, url, seeTokenHint, id, url)
	}
}

// showApprovalToken reports whether an open gate's token may be printed: with
// RBOOK_SHOW_TOKEN=1, else only on a terminal outside CI. CI is GITHUB_ACTIONS=true or CI set
// to anything but "" / "false" / "0" (most CI systems set CI=true; a CI job with a
// pseudo-terminal used to get the token printed into its log).
func showApprovalToken() bool {
	if os.Getenv("RBOOK_SHOW_TOKEN") == "1" {
		return true
	}
	ci := os.Getenv("CI")
	inCI := os.Getenv("GITHUB_ACTIONS") == "true" || ci != "" && ci != "false" && ci != "0"
	return !inCI && term.IsTerminal(int(os.Stderr.Fd()))
}

// printInputsHint lists the approver-input form of an open approval, one field a line as the
// terminal asks for it (steps.FieldPrompt), and how to give the values with rbook approve
// (docs/approver-inputs.md); nothing for a gate without a form.
func printInputsHint(w io.Writer, a *rbookv1.Approval) {
	fields := inputspb.FromProto(a.GetInputs())
	if len(fields) == 0 {
		return
	}
	fmt.Fprintln(w, "The approver gives these inputs with the approval (--input NAME=VALUE, once per field):")
	for _, f := range fields {
		fmt.Fprintln(w, "  "+strings.TrimSuffix(steps.FieldPrompt(f), ": "))
	}
}

// HandlerLines is a Recorder that prints "↻ <node> failed; handler retry: <message>" (or,
// without a message, "↻ <node> failed (<event>); handler retry (on: <on>)") when a node is
// started again by a retry error handler. It only writes to w.
type HandlerLines struct{ W io.Writer }

// Record prints the retry line of a step_started whose message starts with
// engine.RetryNotePrefix; it never fails.
func (h HandlerLines) Record(_ context.Context, t engine.Transition) error {
	if t.Kind != engine.TransitionStepStarted || !strings.HasPrefix(t.Message, engine.RetryNotePrefix) {
		return nil
	}
	fmt.Fprintln(h.W, retryLine(steps.CleanInput(t.StepName), t.Message))
	return nil
}

// retryLine turns a retry note "retry (error handler on: ON) after EVENT[: MSG]" of node id
// into the printed line.
func retryLine(id, note string) string {
	rest := strings.TrimPrefix(note, engine.RetryNotePrefix)
	on, after, ok := strings.Cut(rest, ") after ")
	if !ok {
		return fmt.Sprintf("↻ %s failed; handler retry: %s", id, steps.CleanInput(note))
	}
	event, msg, hasMsg := strings.Cut(after, ": ")
	if hasMsg && msg != "" {
		return fmt.Sprintf("↻ %s failed; handler retry: %s", id, steps.CleanInput(msg))
	}
	return fmt.Sprintf("↻ %s failed (%s); handler retry (on: %s)", id, event, on)
}

// haltedBeforeStart adds to err, a run's failure to start on its control plane, what became
// of the run when the control plane did not answer: a fresh run has no state file yet, so
// nothing is "kept in the state file"; a resumed one keeps everything there. Any other
// error (a refusal, with its own hint) is returned as it is.
func haltedBeforeStart(err error, statePath string) error {
	var ue *cpclient.UnreachableError
	if !errors.As(err, &ue) {
		return err
	}
	if _, serr := os.Stat(statePath); serr == nil {
		return fmt.Errorf("%w\nThe run is halted and everything is kept in the state file %s: run the same command again once the control plane is back", err, statePath)
	}
	return fmt.Errorf("%w\nNothing was run and no state file was written: run the same command again once the control plane is back", err)
}
