package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// checkCPURL refuses a control-plane URL that no call could reach: it needs the scheme
// http:// or https:// and a host. Without it every call failed as "unavailable" and was
// retried, so 'rbook run --control-plane 127.0.0.1:7070' (grpcurl's spelling) hung for
// --control-plane-timeout before halting (found trying the README as a new user). "" and
// "off" pass (no URL). from names where u came from: "--control-plane" or
// "RBOOK_CONTROL_PLANE". The error says what to write instead.
func checkCPURL(u, from string) error {
	if u == "" || u == "off" {
		return nil
	}
	p, err := url.Parse(u)
	if err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" {
		return nil
	}
	hint := "http://127.0.0.1:7070"
	if !strings.Contains(u, "://") {
		hint = "http://" + u
	}
	return fmt.Errorf("%s %q is not a control plane URL: give its scheme (http:// or https://) and host, as in %s", from, u, hint)
}

// checkCPURLs is checkCPURL for a control-plane value (--control-plane, $RBOOK_CONTROL_PLANE,
// the Action's control-plane input): one URL or several separated by commas, tried in order
// and moved through on failure (issue 10, item 2; D10-6). Spaces around items are trimmed;
// an empty item, an item without http:// or https:// and a host, or more than
// cpclient.MaxURLs items is refused with an error naming from and the item. "" and "off"
// pass. A single URL gets checkCPURL's message word for word.
func checkCPURLs(u, from string) error {
	if u == "" || u == "off" {
		return nil
	}
	if _, err := cpclient.SplitURLs(u); err != nil {
		return fmt.Errorf("%s %v", from, err)
	}
	return nil
}

// cpURLFrom is the URL a run or delivery would use from flag or $RBOOK_CONTROL_PLANE, and
// where it came from, for checkCPURLs.
func cpURLFrom(flag string) (u, from string) {
	if flag != "" {
		return normCPURLs(flag), "--control-plane"
	}
	return normCPURLs(os.Getenv("RBOOK_CONTROL_PLANE")), "RBOOK_CONTROL_PLANE"
}

// normCPURLs is a valid control-plane list in one spelling: its URLs joined by commas,
// without spaces or trailing slashes (what the state file records and a printed
// "--control-plane …" hint repeats, so a shell takes it as one word). Anything else ("",
// "off", a list checkCPURLs refuses) is returned as it is.
func normCPURLs(u string) string {
	if u == "" || u == "off" {
		return u
	}
	urls, err := cpclient.SplitURLs(u)
	if err != nil {
		return u
	}
	return strings.Join(urls, ",")
}

// controlPlaneURL picks the control plane a run reports to: the flag, else
// $RBOOK_CONTROL_PLANE, else an embedded one started in-process ("off" means none).
func controlPlaneURL(ctx context.Context, flag string, errw io.Writer) (url string, embedded bool, stop func(), err error) {
	u, _ := cpURLFrom(flag)
	switch u {
	case "off":
		return "", false, func() {}, nil
	case "":
		url, stop, err := startEmbedded(ctx, errw)
		return url, true, stop, err
	}
	return u, false, func() {}, nil
}

// startOnControlPlane creates the run on the control plane, or resumes it there, under the
// lease rule of DESIGN D12. A fresh run whose id the control plane holds as final, or that
// another executor owns (another workspace started the same runbook the same day), takes the
// next suffix (DESIGN D6): N workspaces starting one runbook at once all run, each under its
// own id. A resumed run that another executor owns is refused unless takeOver is set.
// takeOver starts the resumed run under a fresh owner id, kept only when the take-over
// succeeds (hostile test TestTakeOverOfACopiedStateFileChecksTheLease).
//
// A fresh run never continues a run with transitions: when the control plane hands back an
// existing run of this folder's own owner id (its previous run, final here but not yet there)
// the fresh run moves on too; one without transitions (a run that died between StartRun and
// its first write) is taken as this one.
func startOnControlPlane(ctx context.Context, c *cpclient.Client, plan *runbook.Plan, opened *state.Opened, takeOver bool, lease time.Duration, who string) (_ cpclient.Started, err error) {
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
	for range 1000 {
		started, err := c.StartRun(ctx, cpclient.RunInfo{
			RunID: st.RunID, RunbookName: plan.Name, PlanDigest: plan.ContentHash, SchemaHash8: plan.SchemaHash8,
			StartedBy: who, TotalSteps: len(plan.Steps), StartedAt: startedAt(st), OwnerID: st.OwnerID,
			TakeOver: takeOver && resumed, Lease: lease, Reported: reportedWorkflowRun(""), Plan: runPlan,
		})
		taken := errors.Is(err, cpclient.ErrRunFinal) || errors.Is(err, cpclient.ErrRunOwned) ||
			err == nil && !started.Created && started.LastSeq > 0
		switch {
		case !resumed && taken:
			st.RunID = opened.NextFreeRunID(st.RunID)
			continue
		case errors.Is(err, cpclient.ErrRunFinal):
			return started, fmt.Errorf("run %s on the control plane %s: %w", st.RunID, c.URL, errFinalThere)
		case errors.Is(err, cpclient.ErrRunOwned):
			return started, fmt.Errorf("%v\nThis state file's executor does not own run %s any more. If the other executor is gone, "+
				"run the same command with --take-over once its lease expired", err, st.RunID)
		case errors.Is(err, cpclient.ErrLeaseHeld):
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
// it (issue 10, new-user finding 5): the one mechanism rbook has, a terminal or
// RBOOK_SHOW_TOKEN=1 (showApprovalToken).
const seeTokenHint = "run rbook on a terminal, or with RBOOK_SHOW_TOKEN=1 where this output is private, to see it; " +
	"deciding by the approval id instead needs a control plane with --auth-file"

func startedAt(st *state.State) time.Time {
	if t, err := time.Parse(engine.TimeFormat, st.StartedUTC); err == nil {
		return t
	}
	return time.Now().UTC()
}
