package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/go-github/v90/github"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/consolelink"
	"github.com/rbookhq/rbook-action/controlplane/ghapp"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/controlplane/webhook"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// SourceGitHub is the decided_by_source of a vote cast by a deployment_review in GitHub's UI
// (docs/approvals.md, "Approve in GitHub").
const SourceGitHub = "github"

// GitHubIdentityPrefix prefixes a GitHub reviewer's login to make its rbook identity
// ("github:<login>", docs/decisions/identity.md's spelling; the gate policy's allowed approvers use it).
const GitHubIdentityPrefix = "github:"

// Back-off of the protection rule delivery loop (docs/approvals.md, "Approve in GitHub": "a GitHub API failure is
// retried with back-off"): the n-th consecutive failure of a rule waits
// DefaultGitHubRetryBase·2^(n-1), at most MaxGitHubRetry.
const (
	DefaultGitHubRetryBase = time.Second
	MaxGitHubRetry         = 5 * time.Minute
)

// Give-up limits of the protection rule delivery loop, so a verdict GitHub answers with 422
// forever is not retried forever (docs/decisions/outbox.md: delivery has a bound): a rule
// whose delivery failed MaxGitHubDeliveryAttempts times in a row (with the
// back-off above, about 1 h 24 min), or MaxGitHubRefusedAttempts times in a row with a
// client error GitHub will not change its mind about (4xx other than 401, 403, 408, 429:
// e.g. 422 "no pending deployment", 404), is given up: logged at error level with the
// reason, recorded (given_up_at), never tried again. A failed status report whose verdict is
// not ready is abandoned instead, and the verdict still goes when the gate is decided.
const (
	MaxGitHubDeliveryAttempts = 25
	MaxGitHubRefusedAttempts  = 3
)

// gitHubDueBatch is how many due rules one pass of the delivery loop delivers.
const gitHubDueBatch = 50

// ProtectionRuleClaimLease is the lease of a replica's claim on a protection rule its
// delivery loop is delivering (store.ClaimProtectionRule; docs/decisions/delivery-claims.md: a verdict
// is posted to GitHub by one replica): 2 minutes, longer than the three GitHub calls of one
// delivery (ghapp.RequestTimeout each) plus slack, so no other replica starts the same
// delivery while this one may still be talking to GitHub; a replica that dies holding the
// claim leaves the rule to the others once the lease has passed. The webhook's claim on a
// delivery is webhook.DeliveryClaimLease.
const ProtectionRuleClaimLease = 3*ghapp.RequestTimeout + 30*time.Second

// githubGates is the webhook.Handler of a control plane configured as a GitHub App (docs/approvals.md, "Approve in GitHub") and the delivery loop of the protection rule outbox (migration 0008).
type githubGates struct {
	outboxLoop
	s         *Server
	app       *ghapp.App
	log       *slog.Logger
	retryBase time.Duration
}

func newGitHubGates(s *Server, app *ghapp.App, retryBase time.Duration) *githubGates {
	if retryBase <= 0 {
		retryBase = DefaultGitHubRetryBase
	}
	return &githubGates{outboxLoop: newOutboxLoop(), s: s, app: app, log: s.log, retryBase: retryBase}
}

// ProtectionRuleRequested stores the rule; the delivery loop learns the run's current attempt
// from GitHub (ghapp.App.RunAttempt, retried with back-off) and binds the rule to the gate of
// that workflow run, attempt and environment, now or when that gate opens
// (store.SetProtectionRuleAttempt), then posts the status report and, once the gate is
// decided, the verdict.
func (g *githubGates) ProtectionRuleRequested(ctx context.Context, d webhook.Delivery, ev *github.DeploymentProtectionRuleEvent) error {
	runID, err := ev.GetRunID()
	if err != nil {
		return fmt.Errorf("deployment_callback_url has no run id")
	}
	r, err := g.s.st.RequestProtectionRule(ctx, store.ProtectionRule{CallbackURL: ev.GetDeploymentCallbackURL(),
		DeploymentID: ev.GetDeployment().GetID(), InstallationID: ev.GetInstallation().GetID(),
		Repository: ev.GetRepo().GetFullName(), RunID: strconv.FormatInt(runID, 10), Environment: ev.GetEnvironment()})
	if err != nil {
		return err
	}
	g.log.InfoContext(ctx, "github protection rule requested", "delivery", d.ID, "repository", r.Repository, "run_id", r.RunID,
		"environment", r.Environment, "deployment", r.DeploymentID, "approval_id", r.ApprovalID, "bound", r.ApprovalID != "")
	g.poke()
	return nil
}

// maxGitHubReason caps the reason taken from a review's comment (bytes; the RPCs' limit).
const maxGitHubReason = maxReasonBytes

// reasonOf is a review comment as a one-line reason: control and bidi characters become
// spaces (a Markdown comment has newlines), cut to maxGitHubReason bytes on a rune boundary.
func reasonOf(comment string) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, comment)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxGitHubReason {
		s = strings.ToValidUTF8(s[:maxGitHubReason-len("…")], "") + "…"
	}
	return s
}

// DeploymentReviewed casts the reviewer's vote on each pending gate of the review's
// repository, workflow run, attempt (workflow_run.run_attempt) and environments
// (webhook.ReviewEnvironments), through the same compare-and-set and gate
// policy as Approve: identity "github:<login>" from the signed webhook only, verified,
// source "github", the comment as the reason. A review one of whose gates it reached, even
// if the policy refused the vote or the gate was already closed, is logged (nil: GitHub gets
// 200). A review that reached no pending gate is answered by unmatchedReview. Storage errors
// are returned (500: GitHub may redeliver).
func (g *githubGates) DeploymentReviewed(ctx context.Context, d webhook.Delivery, ev *github.DeploymentReviewEvent) error {
	repo, runID := ev.GetRepo().GetFullName(), strconv.FormatInt(ev.GetWorkflowRun().GetID(), 10)
	attempt := "" // a payload without workflow_run.run_attempt matches every attempt
	if n := ev.GetWorkflowRun().GetRunAttempt(); n > 0 {
		attempt = strconv.Itoa(n)
	}
	login, approverID := ev.GetApprover().GetLogin(), ev.GetApprover().GetID()
	verdict := store.ApprovalApproved
	if d.Action == "rejected" {
		verdict = store.ApprovalRejected
	}
	voter := g.s.withPerson(approval.Voter{Identity: GitHubIdentityPrefix + login, Verified: true, GitHub: login})
	reason := reasonOf(ev.GetComment())
	var outcomes, unmatched []string
	envs := webhook.ReviewEnvironments(ev)
	for _, env := range envs {
		gates, err := g.s.st.PendingGitHubGates(ctx, repo, runID, attempt, env)
		if err != nil {
			return err
		}
		if len(gates) == 0 {
			unmatched = append(unmatched, env)
		}
		for _, a := range gates {
			outcome, err := g.vote(ctx, a, voter, verdict, reason)
			if err != nil {
				return err
			}
			outcomes = append(outcomes, a.ApprovalID+": "+outcome)
		}
	}
	if len(envs) == 0 || len(unmatched) > 0 {
		outcome, refusal, err := g.unmatchedReview(ctx, repo, runID, attempt, envs, unmatched)
		if err != nil {
			return err
		}
		outcomes = append(outcomes, outcome)
		if refusal != nil {
			g.log.WarnContext(ctx, "github deployment review not acted on in full", "delivery", d.ID, "action", d.Action, "repository", repo,
				"run_id", runID, "run_attempt", attempt, "environments", strings.Join(envs, ","), "approver", voter.Identity,
				"approver_id", approverID, "outcome", strings.Join(outcomes, "; "))
			return refusal
		}
	}
	g.log.InfoContext(ctx, "github deployment review", "delivery", d.ID, "action", d.Action, "repository", repo, "run_id", runID, "run_attempt", attempt,
		"environments", strings.Join(envs, ","), "approver", voter.Identity, "approver_id", approverID,
		"outcome", strings.Join(outcomes, "; "))
	return nil
}

// unmatchedReview says what it means that a review reached no pending gate in the
// environments unmatched (or, when envs is empty, that it names no environment at all), from
// what the store holds of its workflow run (store.GitHubTrace), and whether GitHub must be
// told with a refusal (the delivery is then not recorded, and GitHub shows it failed with
// the reason, so it can be redelivered; a redelivery's vote on a gate this delivery already
// decided changes nothing):
//   - rbook expects a gate of one of unmatched that is not open (for this attempt) yet: a
//     protection rule of the run and environment waits for a verdict, or an rbook run that
//     is not final reported the workflow run and environment: 409, redeliver once the gate
//     is open;
//   - the review names no environment (GitHub's schema makes all three places optional) but
//     the run has rbook gates, waiting rules or open runs: 422, rbook cannot tell which gate
//     it decides, so the gate must be decided in rbook;
//   - otherwise (the gate is closed, an environment rbook does not guard, a workflow run
//     rbook never saw): nothing to do (200).
func (g *githubGates) unmatchedReview(ctx context.Context, repo, runID, attempt string, envs, unmatched []string) (string, *webhook.Refusal, error) {
	if len(envs) == 0 {
		t, err := g.s.st.GitHubTrace(ctx, repo, runID, "")
		if err != nil {
			return "", nil, err
		}
		if len(t.Gates) == 0 && t.WaitingRules == 0 && t.OpenRuns == 0 {
			return "no pending rbook gate of this run (the review names no environment): nothing changed", nil, nil
		}
		msg := fmt.Sprintf("deployment_review names no environment (no environment, workflow_job_run or workflow_job_runs), "+
			"and workflow run %s of %s has rbook gates: rbook cannot tell which one it decides; decide it with rbook approve or rbook reject", runID, repo)
		return msg, &webhook.Refusal{Status: http.StatusUnprocessableEntity, Reason: msg}, nil
	}
	var expected, notes []string
	for _, env := range unmatched {
		t, err := g.s.st.GitHubTrace(ctx, repo, runID, env)
		if err != nil {
			return "", nil, err
		}
		closed := ""
		for _, a := range t.Gates {
			if attempt == "" || gateAttempt(a) == attempt {
				closed = string(a.Status)
			}
		}
		switch {
		case closed != "":
			notes = append(notes, fmt.Sprintf("the rbook gate of environment %s is closed (%s)", env, closed))
		case t.WaitingRules > 0 || t.OpenRuns > 0:
			expected = append(expected, env)
		default:
			notes = append(notes, "no pending rbook gate of this run and environment "+env)
		}
	}
	if len(expected) == 0 {
		return strings.Join(notes, "; ") + ": nothing changed", nil, nil
	}
	msg := fmt.Sprintf("no rbook gate of workflow run %s of %s (attempt %s) and environment %s is open yet; "+
		"redeliver this delivery once it is, or decide the gate with rbook approve or rbook reject",
		runID, repo, cmp.Or(attempt, "any"), strings.Join(expected, ", "))
	return msg, &webhook.Refusal{Status: http.StatusConflict, Reason: msg}, nil
}

// gateAttempt is the workflow run attempt gate a was opened in ("1" when the executor did
// not report one, as the store counts it).
func gateAttempt(a store.Approval) string {
	if a.GitHub == nil || a.GitHub.RunAttempt == "" {
		return "1"
	}
	return a.GitHub.RunAttempt
}

// vote casts one GitHub reviewer's vote on gate a and says what came of it. A refusal (policy,
// already decided, expired, superseded) is an outcome, not an error.
func (g *githubGates) vote(ctx context.Context, a store.Approval, voter approval.Voter, verdict store.ApprovalStatus, reason string) (string, error) {
	approve := verdict == store.ApprovalApproved
	reported := ""
	if a.GitHub != nil {
		reported = a.GitHub.Actor
	}
	decided, err := g.s.st.DecideApproval(ctx, store.Decision{ApprovalID: a.ApprovalID, Verdict: verdict, Approver: voter.Identity,
		Verified: true, Person: voter.Person, Reason: reason, Source: SourceGitHub, At: time.Now(),
		Authorize: func(cur store.Approval, st store.RunStarter) error {
			starter := approval.Starter{StartedBy: st.StartedBy, GitHubActor: st.GitHubActor}
			if starter.GitHubActor == "" {
				// Four-eyes against the actor the job reported when no verified job started
				// the run: it can only refuse a vote, never grant one.
				starter.GitHubActor = reported
			}
			return approval.CheckVote(requirementOf(cur), starter, voter, approve)
		}})
	var inputErr *gateinputs.Error
	switch {
	case errors.Is(err, approval.ErrSelfApproval):
		return fmt.Sprintf("refused: %s started the run (%s: starter_may_approve is false)", voter.Identity, requirementOf(decided).Rule), nil
	case errors.Is(err, approval.ErrNotAllowedApprover):
		r := requirementOf(decided)
		return fmt.Sprintf("refused: %s allows only %s", r.Rule, strings.Join(r.AllowedApprovers, ", ")), nil
	case errors.Is(err, approval.ErrUnverifiedCount):
		return "refused: " + err.Error(), nil
	case errors.Is(err, store.ErrExpired):
		return "refused: the gate's deadline had passed; it is closed as timed out", nil
	case errors.Is(err, store.ErrAlreadyDecided), errors.Is(err, store.ErrPlanDigestMismatch):
		return "refused: the gate is closed (" + string(decided.Status) + ")", nil
	case errors.Is(err, store.ErrNotFound):
		return "refused: the gate no longer exists", nil
	case errors.As(err, &inputErr):
		// A review carries no input values: a form its defaults cannot fill waits for a
		// channel that asks the person (docs/approver-inputs.md, "Every channel").
		return "refused: the gate's form needs values a GitHub review cannot give (" + inputErr.Error() + "); approve it with rbook approve --input or on the console", nil
	case err != nil:
		return "", err
	}
	if decided.Status == store.ApprovalPending {
		return fmt.Sprintf("vote counted (%d of %d approvals)", len(decided.ApprovedPeople()), max(decided.ApprovalsRequired, 1)), nil
	}
	g.log.InfoContext(ctx, "gate decided", "approval_id", decided.ApprovalID, "run_id", decided.RunID,
		"status", string(decided.Status), "approver", decided.Approver, "source", SourceGitHub)
	g.s.reviewAttestation(ctx, decided) // as decide does: signed after the commit, or at the next read
	return "gate " + string(decided.Status), nil
}

// loop delivers the protection rule outbox until ctx ends: status reports of bound rules,
// then verdicts of decided gates, each retried with back-off. It wakes on gate changes (the
// store's change feed), on a rule request and when the earliest retry comes due.
func (g *githubGates) loop(ctx context.Context, done chan<- struct{}) {
	g.run(ctx, done, g.deliverDue)
}

// deliverDue delivers every due rule and returns how long until the next retry (ok=false: none).
func (g *githubGates) deliverDue(ctx context.Context) (time.Duration, bool) {
	for ctx.Err() == nil {
		due, err := g.s.st.DueProtectionRules(ctx, time.Now(), gitHubDueBatch)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, store.ErrClosed) {
				g.log.Error("reading the protection rule outbox failed", "err", err)
			}
			return deadlineRetry, true
		}
		if len(due) == 0 {
			break
		}
		for _, r := range due {
			g.deliver(ctx, r)
		}
		if len(due) < gitHubDueBatch {
			break
		}
	}
	next, ok, err := g.s.st.NextProtectionRuleAttempt(ctx)
	if err != nil {
		return deadlineRetry, true
	}
	if !ok {
		return 0, false
	}
	return max(time.Until(next), 0), true
}

// deliver posts what rule r is owed: the status report first, then the verdict. A failure
// is recorded with the next attempt's time; a failed report is given up when the verdict is
// ready (the verdict is what GitHub waits for).
//
// Every step that calls GitHub first claims the rule (claim), so with several replicas on
// one database only one of them delivers it (docs/control-plane.md, "Two replicas on one PostgreSQL"); recording a step's outcome
// ends the claim, so the next step claims again.
func (g *githubGates) deliver(ctx context.Context, r store.ProtectionRule) {
	if !g.claim(ctx, r) {
		return
	}
	owner, name, err := ghapp.SplitFullName(r.Repository)
	runID, perr := strconv.ParseInt(r.RunID, 10, 64)
	if err != nil || perr != nil {
		g.fail(ctx, r, fmt.Errorf("repository %q / run id %q unusable", r.Repository, r.RunID))
		return
	}
	repo := ghapp.Repo{InstallationID: r.InstallationID, Owner: owner, Name: name}
	if r.RunAttempt == "" {
		// The payload does not say which attempt of the run asks; binding without knowing
		// could hand a re-run the verdict of an earlier attempt's gate.
		attempt, err := g.app.RunAttempt(ctx, repo, runID)
		if err != nil {
			g.fail(ctx, r, err)
			return
		}
		b, err := g.s.st.SetProtectionRuleAttempt(ctx, r.ID, strconv.Itoa(attempt))
		if err != nil {
			g.fail(ctx, r, err)
			return
		}
		g.log.Info("github protection rule attempt learned", "rule", r.ID, "run_attempt", b.RunAttempt,
			"approval_id", b.ApprovalID, "bound", b.ApprovalID != "")
		if b.ApprovalID == "" {
			return
		}
		r = b
		if !g.claim(ctx, r) {
			return
		}
	}
	if r.ReportState == store.ReportDue {
		a, err := g.s.st.GetApproval(ctx, r.ApprovalID)
		if err == nil {
			err = g.app.ReportProtectionRuleStatus(ctx, repo, runID, r.Environment, g.statusReport(ctx, a))
		}
		switch {
		case err == nil:
			if err := g.s.st.MarkProtectionRuleReported(ctx, r.ID, store.ReportSent); err != nil {
				g.log.Error("recording a protection rule status report failed", "rule", r.ID, "err", err)
				return
			}
			g.log.Info("github protection rule status reported", "rule", r.ID, "approval_id", r.ApprovalID)
		case r.VerdictState != "":
			g.log.Warn("github protection rule status report failed; delivering the verdict without it", "rule", r.ID, "err", err.Error())
			if err := g.s.st.MarkProtectionRuleReported(ctx, r.ID, store.ReportAbandoned); err != nil {
				g.log.Error("recording a protection rule status report failed", "rule", r.ID, "err", err)
				return
			}
		default:
			g.fail(ctx, r, err)
			return
		}
	}
	if r.VerdictState == "" {
		return
	}
	if r.ReportState == store.ReportDue && !g.claim(ctx, r) { // the report's record ended the claim
		return
	}
	comment := r.VerdictComment
	if u := consolelink.ApprovalURL(g.s.opts.PublicURL, r.ApprovalID); u != "" {
		comment = ghapp.CommentWithTail(comment, "\n\nGate page: "+u)
	}
	if err := g.app.ReviewProtectionRule(ctx, repo, runID, r.Environment, r.VerdictState, comment); err != nil {
		g.s.metrics.ProtectionVerdict(r.VerdictState, "failed")
		g.fail(ctx, r, err)
		return
	}
	g.s.metrics.ProtectionVerdict(r.VerdictState, "delivered")
	// GitHub has the verdict. Should this write fail (or the process die first), the
	// verdict is posted again later; GitHub keeps the first verdict of a deployment.
	if err := g.s.st.MarkProtectionRuleVerdictSent(ctx, r.ID, time.Now()); err != nil {
		g.log.Error("recording a delivered protection rule verdict failed", "rule", r.ID, "err", err)
		return
	}
	g.log.Info("github protection rule verdict delivered", "rule", r.ID, "approval_id", r.ApprovalID, "state", r.VerdictState)
}

// claim takes rule r for one delivery step (store.ClaimProtectionRule, ProtectionRuleClaimLease);
// false means another replica has it, it has no work left, or the claim could not be
// written (logged): the step is skipped, and the rule comes due again if it still has work.
func (g *githubGates) claim(ctx context.Context, r store.ProtectionRule) bool {
	now := time.Now()
	ok, err := g.s.st.ClaimProtectionRule(ctx, r.ID, now, now.Add(ProtectionRuleClaimLease))
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, store.ErrClosed) {
			g.log.Error("claiming a protection rule for delivery failed", "rule", r.ID, "err", err)
		}
		return false
	}
	if !ok {
		g.log.Debug("github protection rule is being delivered elsewhere", "rule", r.ID)
	}
	return ok
}

// fail records a failed delivery and schedules the next attempt with back-off, or gives the
// rule up (or only its status report) at the limits above.
func (g *githubGates) fail(ctx context.Context, r store.ProtectionRule, err error) {
	attempt := r.Attempts + 1
	if limit, why := giveUpLimit(err); attempt >= limit {
		reason := fmt.Sprintf("gave up after %d failed attempts (%s): %s", attempt, why, err.Error())
		if r.ApprovalID != "" && r.VerdictState == "" && r.ReportState == store.ReportDue {
			g.log.Error("github protection rule status report given up; the verdict will still be delivered", "rule", r.ID,
				"approval_id", r.ApprovalID, "attempts", attempt, "reason", reason)
			if werr := g.s.st.MarkProtectionRuleReported(ctx, r.ID, store.ReportAbandoned); werr != nil {
				g.log.Error("recording an abandoned protection rule status report failed", "rule", r.ID, "err", werr)
			}
			return
		}
		g.log.Error("github protection rule delivery given up; GitHub will not get rbook's verdict for this deployment",
			"rule", r.ID, "approval_id", r.ApprovalID, "state", r.VerdictState, "attempts", attempt, "reason", reason)
		if werr := g.s.st.GiveUpProtectionRule(ctx, r.ID, reason, time.Now()); werr != nil {
			g.log.Error("recording a given-up protection rule failed", "rule", r.ID, "err", werr)
		}
		return
	}
	delay := retryDelay(g.retryBase, attempt, MaxGitHubRetry)
	next := time.Now().Add(delay)
	g.log.Warn("github protection rule delivery failed; retrying", "rule", r.ID, "attempt", attempt, "retry_in", delay.String(), "err", err.Error())
	if werr := g.s.st.ProtectionRuleAttemptFailed(ctx, r.ID, err.Error(), next); werr != nil {
		g.log.Error("recording a failed protection rule delivery failed", "rule", r.ID, "err", werr)
	}
}

// giveUpLimit is how many consecutive failures like err a rule is allowed, and why.
func giveUpLimit(err error) (int, string) {
	var ge *github.ErrorResponse
	if errors.As(err, &ge) && ge.Response != nil {
		switch c := ge.Response.StatusCode; {
		case c >= 400 && c < 500 && c != 401 && c != 403 && c != 408 && c != 429:
			return MaxGitHubRefusedAttempts, fmt.Sprintf("GitHub refused it with %d", c)
		}
	}
	return MaxGitHubDeliveryAttempts, "GitHub unreachable or failing"
}

// statusReport is the Markdown status report of gate a (≤ ghapp.MaxCommentChars once cut):
// the gate, the run, the plan digest, the approval id and how to decide it, ending with the
// gate's page on the console when the server has a public URL (kept whole under the cap).
func (g *githubGates) statusReport(ctx context.Context, a store.Approval) string {
	runbook := ""
	if run, err := g.s.st.Run(ctx, a.RunID); err == nil {
		runbook = " of runbook `" + run.PlaybookName + "`"
	}
	state := "is waiting for a decision"
	if a.Status != store.ApprovalPending {
		state = "was " + string(a.Status) + " in rbook"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rbook gate `%s`%s (run `%s`) %s.\n\n", a.NodeID, runbook, a.RunID, state)
	fmt.Fprintf(&b, "- approval id: `%s`\n- plan digest: `%s`\n", a.ApprovalID, a.PlanDigest)
	if !a.Deadline.IsZero() {
		fmt.Fprintf(&b, "- deadline: %s (then rejected as timed out)\n", a.Deadline.UTC().Format(time.RFC3339))
	}
	if n := max(a.ApprovalsRequired, 1); n > 1 {
		fmt.Fprintf(&b, "- needs %d approvals\n", n)
	}
	fmt.Fprintf(&b, "\nDecide it with `rbook approve %s --reason \"…\"` or `rbook reject %s --reason \"…\"` against the control plane, or by reviewing this deployment in GitHub.", a.ApprovalID, a.ApprovalID)
	if u := consolelink.ApprovalURL(g.s.opts.PublicURL, a.ApprovalID); u != "" {
		return ghapp.CommentWithTail(b.String(), "\n\nDecide it at "+u)
	}
	return b.String()
}
