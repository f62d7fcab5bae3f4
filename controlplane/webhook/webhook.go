// Package webhook is the control plane's GitHub webhook endpoint for deployment_protection_rule
// and deployment_review events (docs/approvals.md, "GitHub App webhook"; ARCHITECTURE.md), served at
// Path on the control plane's port.
//
// A delivery is answered as GitHub expects: 401 for a missing or bad X-Hub-Signature-256,
// 400 for missing X-GitHub-Event / X-GitHub-Delivery headers or a malformed payload of an
// event it acts on, 413 over MaxBodyBytes, 405 for a method other than POST, 200 for an
// event it does not act on (acknowledged, ignored, nothing recorded) and for a delivery id
// it already processed (a replay changes nothing), 500 when the Handler failed (GitHub
// shows the delivery as failed and it can be redelivered; it is not recorded as processed),
// and a Handler's Refusal its own status (e.g. 409: the gate a review decides is not open
// yet, redeliver it; 422: the review names no environment), likewise not recorded. A
// deployment_review that names no workflow run at all (GitHub's schema lets workflow_run be
// null; NormalizeReview looks in the job runs' html_url too) is 422.
// With several control-plane replicas on one database a delivery is claimed (its id
// recorded with a lease, DeliveryClaimLease) before the Handler runs, so it is acted on once
// even when two replicas receive it; a failed Handler gives the claim back, and a claim
// whose replica died before finishing is taken over by the next replica that receives the
// delivery once its lease has passed. A delivery another replica is acting on is waited for
// (up to MaxClaimWait) and then answered 409, so GitHub shows it as failed and it can be
// redelivered (docs/control-plane.md, "Two replicas on one PostgreSQL").
// Every refusal is logged with slog (event, delivery id, reason); the secret, the signature
// and the body never are.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/ghapi"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// Path is where the endpoint is mounted on the control plane's mux (docs/approvals.md, "Approve in GitHub").
const Path = "/github/webhook"

// MaxBodyBytes caps a delivery's body (1 MiB); a larger one is refused with 413 before its
// signature is checked, so an unauthenticated sender cannot make the server buffer more.
// GitHub's own cap is 25 MB, which only push-like events approach; the two events rbook acts
// on carry one deployment, one workflow run and its job runs (a few tens of KiB), and an App
// receives only the events it subscribes to.
const MaxBodyBytes = 1 << 20

// MinSecretBytes is the shortest webhook secret accepted (GitHub accepts any; a short one
// is guessable, so New refuses it).
const MinSecretBytes = 16

// The GitHub events the endpoint acts on (docs/approvals.md, "Approve in GitHub").
const (
	EventProtectionRule   = "deployment_protection_rule"
	EventDeploymentReview = "deployment_review"
)

// DeliveryClaimLease is the lease of a replica's claim on a webhook delivery it is acting on
// (store.ClaimGitHubDelivery; docs/decisions/delivery-claims.md: a delivery is processed by one
// replica): 2 minutes, far longer than a Handler may take (GitHub's 10 s delivery timeout),
// so no other replica acts on the delivery while this one may still be acting; a replica
// that dies holding the claim (kill -9 between claiming and finishing) leaves the delivery
// to the next replica that receives it once the lease has passed. A redelivery arriving
// sooner is answered 409. The delivery loop's claim on a protection rule is
// server.ProtectionRuleClaimLease. Tests shorten it with WithClaimLease.
const DeliveryClaimLease = 2 * time.Minute

// MaxClaimWait bounds how long a delivery whose claim another replica holds is waited for
// (its claim re-tried every claimPoll) before it is answered 409: 5 s, within GitHub's 10 s
// delivery timeout. Two replicas receiving one delivery together (a load balancer's retry)
// then both answer 200 once the first has acted.
const MaxClaimWait = 5 * time.Second

// claimPoll is how often a held claim is re-tried while waiting (MaxClaimWait).
const claimPoll = 50 * time.Millisecond

// Delivery identifies one webhook delivery for a Handler: its X-GitHub-Delivery id, the
// X-GitHub-Event name and the payload's action.
type Delivery struct {
	ID, Event, Action string
}

// Handler acts on the deliveries the endpoint verified and parsed. Its methods must be
// idempotent (GitHub redelivers, and two copies of one delivery can race past the seen
// check in different processes) and should return within GitHub's 10 s delivery timeout.
// A nil error marks the delivery processed; an error answers 500 and leaves it unrecorded,
// so a redelivery runs the method again. Errors must not carry secrets (they are logged).
type Handler interface {
	// ProtectionRuleRequested is a deployment_protection_rule "requested" delivery (docs/approvals.md, "Approve in GitHub"): ev has a deployment_callback_url with a run id (ev.GetRunID()), an
	// environment, a repository and an installation id (checked by the endpoint).
	ProtectionRuleRequested(ctx context.Context, d Delivery, ev *ghapi.DeploymentProtectionRuleEvent) error
	// DeploymentReviewed is a deployment_review "approved" or "rejected" delivery: ev has an
	// approver login and id, a workflow run id and a repository (checked by the endpoint, after NormalizeReview filled them from the payload's other places);
	// Comment may be empty; the environments it decides are ReviewEnvironments(ev), which
	// may be none.
	DeploymentReviewed(ctx context.Context, d Delivery, ev *ghapi.DeploymentReviewEvent) error
}

// Refusal is a Handler error that answers its own status instead of 500: a delivery the
// Handler could not act on for a reason the response should name (e.g. 409 "no gate of this
// workflow run is open yet: redeliver it once it is", 422 "names no environment"). Like
// every Handler error it leaves the delivery unrecorded, so a redelivery is acted on again.
// Reason is sent to GitHub (shown in the App's Recent Deliveries) and logged: it must not
// carry secrets or payload text beyond ids and names.
type Refusal struct {
	Status int
	Reason string
}

func (r *Refusal) Error() string { return fmt.Sprintf("%d: %s", r.Status, r.Reason) }

// Deliveries is where delivery claims and processed delivery ids are kept; *store.Store
// implements it (migrations 0006, 0011). ClaimGitHubDelivery is the claim a delivery is
// acted on under (a lease), FinishGitHubDelivery marks it processed once the Handler
// succeeded, and ReleaseGitHubDelivery gives the claim back when the Handler failed
// (docs/decisions/delivery-claims.md).
type Deliveries interface {
	GitHubDeliverySeen(ctx context.Context, id string) (bool, error)
	ClaimGitHubDelivery(ctx context.Context, d store.GitHubDelivery, lease time.Duration) (store.DeliveryClaim, error)
	FinishGitHubDelivery(ctx context.Context, id string) (bool, error)
	ReleaseGitHubDelivery(ctx context.Context, id string) (bool, error)
}

// Option configures an Endpoint (New).
type Option func(*Endpoint)

// WithClaimLease sets the lease of the endpoint's delivery claims (default
// DeliveryClaimLease; tests shorten it). A value that is not positive keeps the default.
func WithClaimLease(d time.Duration) Option {
	return func(e *Endpoint) {
		if d > 0 {
			e.lease = d
		}
	}
}

// WithClaimWait sets how long a delivery another replica holds is waited for (default
// MaxClaimWait; 0 answers 409 at once). A negative value keeps the default.
func WithClaimWait(d time.Duration) Option {
	return func(e *Endpoint) {
		if d >= 0 {
			e.claimWait = d
		}
	}
}

// WithPreviousSecret makes deliveries signed with previous verify too, beside the secret New
// was given: during a rotation of the App's webhook secret GitHub signs with the new one once
// it is saved, and a delivery signed before may still arrive (docs/tls.md, "Rotating the
// GitHub webhook secret"). A secret shorter than MinSecretBytes is ignored; New's caller
// checks it.
func WithPreviousSecret(previous []byte) Option {
	return func(e *Endpoint) {
		if len(previous) >= MinSecretBytes {
			e.previous = append([]byte(nil), previous...)
		}
	}
}

// Outcomes of a delivery, as WithOutcome reports them: processed (acted on and recorded),
// duplicate (already processed), ignored (an event or action the control plane does not act
// on), held (another replica is processing it: 409), refused (malformed, or the Handler
// refused it), unauthorized (the signature does not match), error (storage or Handler failure).
const (
	OutcomeProcessed    = "processed"
	OutcomeDuplicate    = "duplicate"
	OutcomeIgnored      = "ignored"
	OutcomeHeld         = "held"
	OutcomeRefused      = "refused"
	OutcomeUnauthorized = "unauthorized"
	OutcomeError        = "error"
)

// WithOutcome has the endpoint call fn once per request with the X-GitHub-Event header (as
// sent: fn must bound it before using it as a label) and the request's outcome (the
// Outcome constants); the control plane's metrics count them (docs/metrics.md).
func WithOutcome(fn func(event, outcome string)) Option {
	return func(e *Endpoint) { e.outcome = fn }
}

// Endpoint is the http.Handler for Path. Create it with New.
type Endpoint struct {
	secret     []byte
	previous   []byte // WithPreviousSecret; nil without
	deliveries Deliveries
	handler    Handler
	log        *slog.Logger
	lease      time.Duration // claims' lease (DeliveryClaimLease)
	claimWait  time.Duration // how long a held claim is waited for (MaxClaimWait)
	outcome    func(event, outcome string)

	mu       sync.Mutex
	inFlight map[string]*deliveryLock // one delivery id processed at a time in this process
}

type deliveryLock struct {
	mu   sync.Mutex
	refs int
}

// New returns the endpoint. secret is the App's webhook secret (at least MinSecretBytes;
// surrounding whitespace of a secret file is the caller's to trim); deliveries and handler
// are required; log nil means slog.Default(); opts adjust the claim lease and wait (tests).
// Errors: a short secret, a nil dependency.
func New(secret []byte, deliveries Deliveries, handler Handler, log *slog.Logger, opts ...Option) (*Endpoint, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("webhook secret is %d bytes, need at least %d", len(secret), MinSecretBytes)
	}
	if deliveries == nil || handler == nil {
		return nil, errors.New("webhook: a delivery store and a handler are required")
	}
	if log == nil {
		log = slog.Default()
	}
	e := &Endpoint{secret: append([]byte(nil), secret...), deliveries: deliveries, handler: handler,
		log: log, lease: DeliveryClaimLease, claimWait: MaxClaimWait, inFlight: map[string]*deliveryLock{}}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// ServeHTTP verifies, de-duplicates, parses and dispatches one delivery (see the package
// comment for the answers).
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	event := r.Header.Get(ghapi.EventTypeHeader)
	id := r.Header.Get(ghapi.DeliveryIDHeader)
	outcome := OutcomeRefused
	if e.outcome != nil {
		defer func() { e.outcome(event, outcome) }()
	}
	refuse := func(code int, reason string, attrs ...any) {
		e.log.Warn("github webhook refused", append([]any{"event", logValue(event), "delivery", logValue(id),
			"status", code, "reason", reason, "remote", r.RemoteAddr}, attrs...)...)
		http.Error(w, reason, code)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: GitHub posts deliveries")
		return
	}
	if event == "" || id == "" {
		refuse(http.StatusBadRequest, "missing "+ghapi.EventTypeHeader+" or "+ghapi.DeliveryIDHeader+" header")
		return
	}
	if len(event) > store.MaxIDBytes || len(id) > store.MaxIDBytes {
		refuse(http.StatusBadRequest, fmt.Sprintf("%s or %s header over %d bytes", ghapi.EventTypeHeader, ghapi.DeliveryIDHeader, store.MaxIDBytes))
		return
	}
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		refuse(http.StatusUnsupportedMediaType, "Content-Type must be application/json (the App's webhook content type)")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", MaxBodyBytes))
			return
		}
		refuse(http.StatusBadRequest, "reading the body failed")
		return
	}
	sig := r.Header.Get(ghapi.SHA256SignatureHeader)
	if !strings.HasPrefix(sig, "sha256=") {
		refuse(http.StatusUnauthorized, "missing "+ghapi.SHA256SignatureHeader+" (sha256=…) header")
		return
	}
	// ValidateSignature compares the HMAC-SHA256 with hmac.Equal (constant time); the
	// previous secret, during a rotation, is tried when the current one does not match.
	if err := ghapi.ValidateSignature(sig, body, e.secret); err != nil && (e.previous == nil || ghapi.ValidateSignature(sig, body, e.previous) != nil) {
		outcome = OutcomeUnauthorized
		refuse(http.StatusUnauthorized, "signature does not match the webhook secret")
		return
	}

	if event != EventProtectionRule && event != EventDeploymentReview {
		e.log.Info("github webhook ignored", "event", logValue(event), "delivery", logValue(id), "reason", "event not handled")
		outcome = OutcomeIgnored
		w.WriteHeader(http.StatusOK)
		return
	}

	unlock := e.lock(id)
	defer unlock()
	seen, err := e.deliveries.GitHubDeliverySeen(r.Context(), id)
	if err != nil {
		e.log.Error("github webhook: reading processed deliveries failed", "event", event, "delivery", id, "error", err.Error())
		outcome = OutcomeError
		http.Error(w, "storage unavailable", http.StatusInternalServerError)
		return
	}
	if seen {
		e.log.Info("github webhook ignored", "event", event, "delivery", id, "reason", "delivery already processed")
		outcome = OutcomeDuplicate
		w.WriteHeader(http.StatusOK)
		return
	}

	d := Delivery{ID: id, Event: event}
	var handle func() error
	switch event {
	case EventProtectionRule:
		var ev ghapi.DeploymentProtectionRuleEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			refuse(http.StatusBadRequest, "payload is not a deployment_protection_rule event: "+jsonReason(err))
			return
		}
		d.Action = ev.GetAction()
		if d.Action == "requested" {
			NormalizeProtectionRule(&ev)
			if reason := checkProtectionRule(&ev); reason != "" {
				refuse(http.StatusBadRequest, reason, "action", logValue(d.Action))
				return
			}
			handle = func() error { return e.handler.ProtectionRuleRequested(r.Context(), d, &ev) }
		}
	case EventDeploymentReview:
		var ev ghapi.DeploymentReviewEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			refuse(http.StatusBadRequest, "payload is not a deployment_review event: "+jsonReason(err))
			return
		}
		d.Action = ev.GetAction()
		if d.Action == "approved" || d.Action == "rejected" {
			NormalizeReview(&ev)
			if code, reason := checkReview(&ev); reason != "" {
				refuse(code, reason, "action", logValue(d.Action))
				return
			}
			handle = func() error { return e.handler.DeploymentReviewed(r.Context(), d, &ev) }
		}
	}
	if len(d.Action) > store.MaxIDBytes {
		refuse(http.StatusBadRequest, fmt.Sprintf("action over %d bytes", store.MaxIDBytes))
		return
	}
	// Claim the delivery before acting on it (docs/decisions/delivery-claims.md): with several
	// control-plane replicas on one database, GitHub (or a load balancer retrying) may hand
	// the same delivery to two of them; only the one holding the claim acts. The in-process
	// lock above already serialises copies arriving at this process.
	claim, err := e.claim(r.Context(), store.GitHubDelivery{ID: id, Event: event, Action: d.Action})
	if err != nil {
		e.log.Error("github webhook: claiming the delivery failed", "event", event, "delivery", id, "error", err.Error())
		outcome = OutcomeError
		http.Error(w, "storage unavailable", http.StatusInternalServerError)
		return
	}
	switch claim.State {
	case store.DeliveryDone:
		e.log.Info("github webhook ignored", "event", event, "delivery", id, "reason", "delivery already processed")
		outcome = OutcomeDuplicate
		w.WriteHeader(http.StatusOK)
		return
	case store.DeliveryHeld:
		until := claim.Until.UTC().Format(time.RFC3339)
		outcome = OutcomeHeld
		e.log.Warn("github webhook refused", "event", event, "delivery", id, "status", http.StatusConflict,
			"reason", "delivery being processed by another control-plane replica", "claimed_by", claim.By, "claimed_until", until)
		http.Error(w, "delivery is being processed by another control-plane replica (claimed until "+until+
			"); redeliver it after that if it was not processed", http.StatusConflict)
		return
	case store.DeliveryTakenOver:
		e.log.Warn("github webhook: taking over the expired claim of a delivery (its replica stopped before finishing it)",
			"event", event, "delivery", id, "claimed_by", claim.By)
	}
	outcome = OutcomeProcessed
	if handle == nil {
		// e.g. deployment_review "requested": nothing to decide; recorded so a replay is a no-op.
		e.log.Info("github webhook: action not acted on", "event", event, "delivery", id, "action", logValue(d.Action))
		outcome = OutcomeIgnored
	} else if err := handle(); err != nil {
		// Give the claim back, so GitHub's redelivery (to any replica) acts on it again.
		if _, rerr := e.deliveries.ReleaseGitHubDelivery(context.WithoutCancel(r.Context()), id); rerr != nil {
			e.log.Error("github webhook: releasing the claim of a failed delivery failed; a redelivery is processed once its lease has passed",
				"event", event, "delivery", id, "error", rerr.Error())
		}
		var ref *Refusal
		if errors.As(err, &ref) {
			outcome = OutcomeRefused
			refuse(ref.Status, ref.Reason, "action", logValue(d.Action))
			return
		}
		e.log.Error("github webhook: handler failed; not recorded, GitHub may redeliver", "event", event,
			"delivery", id, "action", d.Action, "error", err.Error())
		outcome = OutcomeError
		http.Error(w, "processing failed", http.StatusInternalServerError)
		return
	}
	// The Handler's writes are committed; mark the delivery done right after them. Should
	// this fail (or the process die first), the claim's lease passes and a redelivery acts
	// again, which the Handler's idempotence makes harmless.
	if ok, err := e.deliveries.FinishGitHubDelivery(context.WithoutCancel(r.Context()), id); err != nil {
		e.log.Error("github webhook: marking the delivery processed failed; a redelivery is processed again once its lease has passed",
			"event", event, "delivery", id, "error", err.Error())
	} else if !ok {
		e.log.Warn("github webhook: the delivery's claim was taken over by another replica before it was finished",
			"event", event, "delivery", id)
	}
	e.log.Info("github webhook processed", "event", event, "delivery", id, "action", d.Action)
	w.WriteHeader(http.StatusOK)
}

// claim takes the delivery's claim (store.ClaimGitHubDelivery, e.lease), waiting up to
// e.claimWait while another replica holds it: that replica finishes (DeliveryDone), gives
// it back (this one claims it) or its lease passes (taken over).
func (e *Endpoint) claim(ctx context.Context, d store.GitHubDelivery) (store.DeliveryClaim, error) {
	deadline := time.Now().Add(e.claimWait)
	for {
		c, err := e.deliveries.ClaimGitHubDelivery(ctx, d, e.lease)
		if err != nil || c.State != store.DeliveryHeld || !time.Now().Add(claimPoll).Before(deadline) {
			return c, err
		}
		t := time.NewTimer(claimPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return c, nil
		case <-t.C:
		}
	}
}

// NormalizeProtectionRule fills what rbook needs of a deployment_protection_rule "requested"
// payload from the payload's other places, since GitHub's published schema makes every
// field but action, repository and sender optional: a missing environment is taken from
// deployment.environment. It changes nothing that is present.
func NormalizeProtectionRule(ev *ghapi.DeploymentProtectionRuleEvent) {
	if ev.GetEnvironment() == "" && ev.GetDeployment().GetEnvironment() != "" {
		ev.Environment = ev.GetDeployment().GetEnvironment()
	}
}

// NormalizeReview fills what rbook needs of a deployment_review "approved" or "rejected"
// payload from the payload's other places, since GitHub's published schema makes them
// optional or nullable: a missing approver is the sender (the user who reviewed; sender is
// required); a null or missing workflow_run, or one without an id, takes the run id from a
// workflow_job_run's html_url (…/actions/runs/{run_id}/job/{job_id}), its attempt then
// unknown (every attempt matches). It changes nothing that is present.
func NormalizeReview(ev *ghapi.DeploymentReviewEvent) {
	if ev.GetApprover().GetLogin() == "" && ev.GetSender().GetLogin() != "" {
		ev.Approver = ev.Sender
	}
	if ev.GetWorkflowRun().GetID() != 0 {
		return
	}
	jobs := append([]*ghapi.WorkflowJobRun{ev.GetWorkflowJobRun()}, ev.WorkflowJobRuns...)
	for _, j := range jobs {
		if id := runIDOfJobURL(j.GetHTMLURL()); id != 0 {
			if ev.WorkflowRun == nil {
				ev.WorkflowRun = &ghapi.WorkflowRun{}
			}
			ev.WorkflowRun.ID = id
			return
		}
	}
}

// runIDOfJobURL is the run id of a job's html_url ("https://ghapi.com/o/r/actions/runs/42/job/7";
// GHES: its own host), or 0.
func runIDOfJobURL(u string) int64 {
	_, rest, ok := strings.Cut(u, "/actions/runs/")
	if !ok {
		return 0
	}
	run, _, _ := strings.Cut(rest, "/")
	id, err := strconv.ParseInt(run, 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

// ReviewEnvironments are the environments a deployment_review decides, without repeats or
// empty names, in the order the payload gives them: its top-level environment (GitHub sends
// it with "requested"), workflow_job_run's (GitHub's schema allows it alone) and each of
// workflow_job_runs' (several when a reviewer decides several environments at once). All
// three are optional in GitHub's schema, so the result may be empty.
func ReviewEnvironments(ev *ghapi.DeploymentReviewEvent) []string {
	var out []string
	add := func(e string) {
		if e != "" && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	add(ev.GetEnvironment())
	add(ev.GetWorkflowJobRun().GetEnvironment())
	for _, j := range ev.WorkflowJobRuns {
		add(j.GetEnvironment())
	}
	return out
}

// checkProtectionRule returns why a requested rule cannot be acted on, or "".
func checkProtectionRule(ev *ghapi.DeploymentProtectionRuleEvent) string {
	switch {
	case ev.GetDeploymentCallbackURL() == "":
		return "deployment_protection_rule: no deployment_callback_url"
	case ev.GetEnvironment() == "":
		return "deployment_protection_rule: no environment"
	case ev.GetRepo().GetFullName() == "":
		return "deployment_protection_rule: no repository.full_name"
	case ev.GetInstallation().GetID() == 0:
		return "deployment_protection_rule: no installation.id (the App's installation)"
	}
	if _, err := ev.GetRunID(); err != nil {
		return "deployment_protection_rule: deployment_callback_url has no run id"
	}
	return ""
}

// checkReview returns why an approved/rejected review cannot be acted on and the status
// that says so, or "": 400 when a field GitHub's schema requires is missing (repository,
// sender), 422 when the payload is valid by the schema but names no workflow run (the
// schema lets workflow_run be null), so no gate can be found; the response says how the
// gate can still be decided.
func checkReview(ev *ghapi.DeploymentReviewEvent) (int, string) {
	switch {
	case ev.GetRepo().GetFullName() == "":
		return http.StatusBadRequest, "deployment_review: no repository.full_name"
	case ev.GetApprover().GetLogin() == "" || ev.GetApprover().GetID() == 0:
		return http.StatusBadRequest, "deployment_review: no approver (or sender) login and id"
	case ev.GetWorkflowRun().GetID() == 0:
		return http.StatusUnprocessableEntity, "deployment_review: no workflow_run.id, and no workflow_job_run html_url names the run: " +
			"rbook cannot tell which gate it decides; decide the gate with rbook approve or rbook reject"
	}
	return 0, ""
}

// lock serialises the processing of one delivery id in this process, so two copies of a
// delivery arriving together run the Handler once.
func (e *Endpoint) lock(id string) func() {
	e.mu.Lock()
	l := e.inFlight[id]
	if l == nil {
		l = &deliveryLock{}
		e.inFlight[id] = l
	}
	l.refs++
	e.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		e.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(e.inFlight, id)
		}
		e.mu.Unlock()
	}
}

// maxLoggedHeader bounds a header value copied into a log line.
const maxLoggedHeader = 100

// logValue is a header value as logged: at most maxLoggedHeader bytes, quoted by slog.
func logValue(s string) string {
	if len(s) > maxLoggedHeader {
		return s[:maxLoggedHeader] + "…"
	}
	return s
}

// jsonReason is a JSON error without payload text (a syntax error's offset, a type error's field).
func jsonReason(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q has the wrong type", typ.Field)
	}
	return "invalid JSON"
}

// LogHandler is a Handler that only logs what it receives and acts on nothing
// (docs/approvals.md, "GitHub App webhook"). It logs ids, names and logins, never
// comments in full.
type LogHandler struct{ Log *slog.Logger }

func (h LogHandler) logger() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}

// ProtectionRuleRequested logs the rule request and returns nil.
func (h LogHandler) ProtectionRuleRequested(_ context.Context, d Delivery, ev *ghapi.DeploymentProtectionRuleEvent) error {
	runID, _ := ev.GetRunID()
	h.logger().Info("github deployment protection rule requested", "delivery", d.ID, "repository", ev.GetRepo().GetFullName(),
		"environment", ev.GetEnvironment(), "run_id", runID, "installation", ev.GetInstallation().GetID())
	return nil
}

// DeploymentReviewed logs the review and returns nil.
func (h LogHandler) DeploymentReviewed(_ context.Context, d Delivery, ev *ghapi.DeploymentReviewEvent) error {
	h.logger().Info("github deployment review", "delivery", d.ID, "action", d.Action, "repository", ev.GetRepo().GetFullName(),
		"run_id", ev.GetWorkflowRun().GetID(), "approver", ev.GetApprover().GetLogin())
	return nil
}
