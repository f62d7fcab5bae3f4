// Package cpclient connects an executor to the rbook control plane: it starts or resumes the run there, records every transition through
// RecordTransition with retries and back-off, and decides confirm gates through
// RequestApproval and WatchApproval. It meets the control plane only through gen/
// (ARCHITECTURE.md: action/... and controlplane/... never import each other).
package cpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// DefaultDeadline is how long a call keeps retrying an unreachable control plane before the
// run halts ("if the control plane stays unreachable past a deadline the run halts";
// the --control-plane-timeout flag).
const DefaultDeadline = 60 * time.Second

// DefaultAttemptTimeout bounds one attempt of a unary call, and a watch stream until its first
// message: a control plane that accepts connections but never answers (a stopped process, a
// proxy that hangs) costs at most this long per attempt before the attempt is retried. The control plane answers a healthy unary call in milliseconds.
const DefaultAttemptTimeout = 5 * time.Second

// minAttemptTimeout is the least time the last attempt before the deadline still gets, so a
// call that starts just before its deadline is not doomed by a sliver of time.
const minAttemptTimeout = time.Second

// HTTP/2 liveness of the connection to the control plane: after
// PingInterval without a frame from the server the client sends a PING, and closes the
// connection when no answer came within PingTimeout. A WatchApproval stream is silent while a
// gate waits, so this is what tells a live but idle stream from a server that stopped
// answering (SIGSTOP, a dead host behind a live load balancer): its calls then fail and are
// retried. The client speaks HTTP/2 without TLS (h2c) to http:// URLs (rbook serve always
// does) and negotiates HTTP/2 or HTTP/1.1 over TLS for https:// ones; over HTTP/1.1 there
// are no pings and only the per-attempt timeout applies.
const (
	PingInterval = 3 * time.Second
	PingTimeout  = 2 * time.Second
)

// Back-off between retries: exponential from minBackoff, doubling up to maxBackoff, with
// "equal jitter" (a random half of each wait) so executors that lost the same control plane
// do not come back in lockstep. maxBackoff is short so a control plane that restarts in a
// second or two is found again within about as long (docs/control-plane.md, "Delivery and retries").
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// Client talks to one control plane, through one URL or several (replicas; docs/decisions/control-plane-urls.md, see
// failover.go). Every call of the executor (StartRun, RecordTransition(s), RequestApproval,
// Approve, Reject, WatchApproval, WatchRun) goes through its retry loop: transient failures
// are retried with back-off until Deadline — on the next URL when the current one did not
// answer — and definite refusals are returned at once.
type Client struct {
	// URL names the control plane in messages: its URL, or its URLs joined by commas (a
	// value --control-plane takes back).
	URL       string
	Runs      rbookv1connect.RunServiceClient
	Approvals rbookv1connect.ApprovalServiceClient
	// Deadline bounds how long calls keep failing before *UnreachableError; zero means
	// DefaultDeadline. For a watch stream it counts from the moment the stream was lost.
	Deadline time.Duration
	// AttemptTimeout bounds one attempt; zero means DefaultAttemptTimeout. It also applies to
	// unary calls made directly on Runs and Approvals with a context without a deadline.
	AttemptTimeout time.Duration
	// Progress, when set, gets one MoveNotice line each time the client moves to the next URL
	// (docs/decisions/control-plane-urls.md). Writes come from any goroutine making calls, one line per write.
	Progress io.Writer

	// eps are the URLs in order and cur the index of the one calls go to (failover.go);
	// noticed holds the moves written to Progress since a URL last answered.
	eps        []endpoint
	cur        atomic.Int64
	noticeMu   sync.Mutex
	noticed    map[string]bool
	noticedAny atomic.Bool

	// ownerID and epoch are the run's lease (docs/decisions/leases-and-fencing.md): set by StartRun, sent with every
	// write (RecordTransition, RequestApproval, RenewLease).
	ownerID string
	epoch   atomic.Int64
	// credentialed is true when every call carries a bearer token (New with one, or
	// NewWithTokenSource with a source).
	credentialed bool
	// noBatch is set once the control plane answered RecordTransitions with Unimplemented
	// (an older control plane): senders then use RecordTransition (docs/decisions/durability.md).
	noBatch atomic.Bool
}

// Credentialed reports whether the client sends credentials (a static token or a token
// source such as the job's OIDC token). A client without them talks to a control plane that,
// if it accepts the client, very likely runs without an auth file, so nobody can decide its
// gates by approval id there (the CLI then says so instead of printing a command that cannot work).
func (c *Client) Credentialed() bool { return c.credentialed }

// Fence returns the owner id and lease epoch the client writes with (zero before StartRun).
func (c *Client) Fence() (ownerID string, epoch int64) { return c.ownerID, c.epoch.Load() }

// SetFence sets the lease the client writes with, for a caller that delivers an outbox of a
// run it started earlier (the epoch the state file kept).
func (c *Client) SetFence(ownerID string, epoch int64) { c.ownerID = ownerID; c.epoch.Store(epoch) }

// New returns a client for baseURL (http://host:port or https://…). bearer, when set, is sent
// as "Authorization: Bearer …" on every call; it is never logged. The HTTP client is h2c for
// http:// URLs and HTTP/2-or-HTTP/1.1 over TLS for https:// ones, with HTTP/2 pings (see
// PingInterval); unary calls get AttemptTimeout when their context has no deadline. See
// NewWithTokenSource for a token that changes (a GitHub OIDC token).
func New(baseURL, bearer string) *Client {
	var ts TokenSource
	if bearer != "" {
		ts = StaticToken(bearer)
	}
	return NewWithTokenSource(baseURL, ts)
}

// transport is the HTTP transport for baseURL: h2c prior knowledge for http:// (HTTP/1.1 has
// no liveness check for an idle stream), ALPN for https://; HTTP/2 pings either way.
func transport(baseURL string) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Protocols = new(http.Protocols)
	if strings.HasPrefix(strings.ToLower(baseURL), "http://") {
		t.Protocols.SetUnencryptedHTTP2(true)
	} else {
		t.Protocols.SetHTTP1(true)
		t.Protocols.SetHTTP2(true)
	}
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: PingInterval, PingTimeout: PingTimeout}
	if tc, err := processTLS(); err == nil {
		t.TLSClientConfig = tc.Clone() // RBOOK_CA_FILE, RBOOK_CLIENT_CERT, RBOOK_CLIENT_KEY (an error fails each call: router.Do)
	}
	made.Lock()
	made.transports = append(made.transports, t)
	made.Unlock()
	return t
}

// made lists every transport this process's Clients created, for CloseIdleConnections.
var made struct {
	sync.Mutex
	transports []*http.Transport
}

// CloseIdleConnections closes the idle connections of every Client this process made. The
// embedded control plane calls it before it shuts down: a graceful HTTP/2 shutdown otherwise
// waits for the client to hang up after GOAWAY, about a second (net/http's goAwayTimeout),
// which every embedded `rbook run` paid at exit. Connections with calls in flight are left.
func CloseIdleConnections() {
	made.Lock()
	ts := append([]*http.Transport(nil), made.transports...)
	made.Unlock()
	for _, t := range ts {
		t.CloseIdleConnections()
	}
}

func (c *Client) deadline() time.Duration {
	if c.Deadline > 0 {
		return c.Deadline
	}
	return DefaultDeadline
}

func (c *Client) attemptTimeout() time.Duration {
	if c.AttemptTimeout > 0 {
		return c.AttemptTimeout
	}
	return DefaultAttemptTimeout
}

// Code returns the rbook error code (E_…) carried by err's rbook.v1.ErrorInfo detail, or "".
func Code(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if info, ok := v.(*rbookv1.ErrorInfo); ok {
			return info.GetCode()
		}
	}
	return ""
}

// Retryable reports whether a failed call may succeed if sent again (docs/control-plane.md, "Delivery and retries"). Every
// call the executor retries is idempotent (RecordTransition on run_id + seq, StartRun,
// RequestApproval on run + node, Approve and Reject through one compare-and-set), so the
// rule is about what the failure says, not about the call:
//
//   - An error carrying an rbook code (rbook.v1.ErrorInfo) is the control plane's own answer.
//     E_RETRY (a concurrent change, a shutdown) and E_INTERNAL (a storage failure, which may
//     pass) are retried; every other code (E_SEQ_CONFLICT, E_PERMISSION_DENIED,
//     E_INVALID_ARGUMENT, E_RUN_FINAL, …) is a definite refusal and is not.
//   - An error without one never came from rbook's handlers: the network, a proxy or the HTTP
//     transport failed. Connect maps those to unavailable (refused or reset connections, HTTP
//     429, 502, 503, 504), unknown (other HTTP statuses, a read that broke), internal (an
//     incomplete envelope, "protocol error: unexpected EOF"), deadline_exceeded (an attempt
//     timed out), canceled (a stream reset by the peer), aborted or data_loss: all retried.
//     invalid_argument, unauthenticated, permission_denied, not_found, unimplemented,
//     resource_exhausted (a message over a size limit), failed_precondition and the rest say
//     the request itself cannot succeed: not retried.
//   - A TLS failure no retry mends (the client's RBOOK_CA_FILE, RBOOK_CLIENT_CERT or
//     RBOOK_CLIENT_KEY cannot be read, the control plane's certificate is not trusted, or it
//     refused the client's certificate) is not retried either; its message names what to set.
func Retryable(err error) bool {
	var te *tlsError
	if errors.As(err, &te) {
		return false // the client's TLS files, or a certificate one side does not trust
	}
	var re *retryableError
	if errors.As(err, &re) {
		return true
	}
	switch Code(err) {
	case "E_RETRY", "E_INTERNAL":
		return true
	case "":
	default:
		return false
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code() {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeInternal, connect.CodeDeadlineExceeded,
		connect.CodeCanceled, connect.CodeAborted, connect.CodeDataLoss:
		return true
	}
	return false
}

// UnreachableError means the control plane did not answer within the deadline: every attempt
// failed with a transient error (Retryable) for Deadline. Its message names the URL; what
// became of the run (halted, kept in a state file or not) is the caller's to say. It deliberately does not unwrap to
// Last: a timed-out attempt is not a timed-out gate, and a last E_RETRY is not a refusal.
type UnreachableError struct {
	URL      string
	Deadline time.Duration
	Last     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the control plane at %s did not answer for %s (last error: %v)", e.URL, e.Deadline, e.Last)
}

// errAttemptTimeout is the cause of an attempt's context when AttemptTimeout passed.
var errAttemptTimeout = errors.New("no answer within the attempt timeout")

// backoff is the wait before retry n (0-based): exponential, capped, with equal jitter.
func backoff(n int) time.Duration {
	d := maxBackoff
	if n < 16 {
		d = min(minBackoff<<n, maxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

// retry calls f until it succeeds, fails for good (not Retryable), ctx ends (ctx.Err() is
// returned), or calls kept failing for Deadline (*UnreachableError). Each attempt gets its
// own context, cancelled after AttemptTimeout (clipped to what is left of the deadline, but
// at least minAttemptTimeout).
func (c *Client) retry(ctx context.Context, f func(context.Context) error) error {
	return c.retryAlive(ctx, func(ctx context.Context, _ func()) error { return f(ctx) })
}

// retryAlive is retry for a long-lived stream: f calls alive() once the stream has proved
// the control plane answers (its first message). That lifts the attempt timeout for the rest
// of the stream and restarts the failure clock, so a stream that broke after an hour gets a
// full Deadline to come back.
//
// With several URLs (docs/decisions/control-plane-urls.md) each attempt goes to the current one; a transport failure there
// (transportFailure, or the attempt timeout) moves the client to the next URL and the next
// attempt follows at once, and the back-off comes only after a full round of URLs failed.
// With one URL every failure backs off, as before.
func (c *Client) retryAlive(ctx context.Context, f func(ctx context.Context, alive func()) error) error {
	limit := c.deadline()
	since := time.Now() // when the current run of failures began
	tried := 0          // URLs that failed in the current round
	for n := 0; ; {
		at := min(c.attemptTimeout(), max(limit-time.Since(since), minAttemptTimeout))
		i := c.current()
		actx, cancel := context.WithCancelCause(withRoute(ctx, i, true))
		timer := time.AfterFunc(at, func() { cancel(errAttemptTimeout) })
		progressed := false
		err := f(actx, func() {
			if !progressed {
				progressed = true
				timer.Stop()
				c.answered()
			}
		})
		timer.Stop()
		timedOut := errors.Is(context.Cause(actx), errAttemptTimeout)
		cancel(nil)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err() // the caller stopped: not the control plane's failure
		}
		moved := timedOut || transportFailure(err)
		if timedOut {
			err = fmt.Errorf("no answer within %s: %w", at, err)
		} else if !Retryable(err) {
			return err
		}
		if progressed {
			since, n, tried = time.Now(), 0, 0
		}
		left := limit - time.Since(since)
		if left <= 0 {
			return &UnreachableError{URL: c.URL, Deadline: limit, Last: err}
		}
		if !moved {
			tried = 0 // the URL answered (E_RETRY, …): retry it after the back-off
		} else if len(c.eps) > 1 {
			c.moveFrom(i)
			if tried++; tried < len(c.eps) {
				continue // the next URL at once
			}
			tried = 0
		}
		t := time.NewTimer(min(backoff(n), left))
		n++
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// LastSeq returns the last sequence number the control plane holds for runID (GetRun's
// run.last_seq), with the client's retries. A verb that records into a run another process
// started (rbook cancel) continues after it: the state file does not write every transition
// (gate_opened, a check's step_started), so the control plane may hold more than the file.
// Errors: *UnreachableError, or the control plane's refusal (E_RUN_NOT_FOUND, …).
func (c *Client) LastSeq(ctx context.Context, runID string) (int64, error) {
	last, _, err := c.LastLink(ctx, runID)
	return last, err
}

// LastLink is LastSeq with the hash of that transition, the head of the run's hash chain on
// the control plane ("" for a run without the chain; docs/evidence-chain.md): a transition
// recorded after it continues the chain from there. Errors: those of LastSeq.
func (c *Client) LastLink(ctx context.Context, runID string) (seq int64, head string, err error) {
	err = c.retry(ctx, func(ctx context.Context) error {
		resp, err := c.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: runID, PageSize: 1})
		seq, head = resp.GetRun().GetLastSeq(), resp.GetRun().GetChainHead()
		return err
	})
	if err != nil {
		return 0, "", fmt.Errorf("control plane %s: GetRun: %w", c.URL, err)
	}
	return seq, head, nil
}

// RunInfo describes the run for StartRun.
type RunInfo struct {
	RunID, RunbookName, PlanDigest, SchemaHash8, StartedBy string
	TotalSteps                                             int
	StartedAt                                              time.Time
	// OwnerID is the executor's owner id (state.NewOwnerID; docs/decisions/leases-and-fencing.md). Required.
	OwnerID string
	// TakeOver asks to take the run over from another owner whose lease expired.
	TakeOver bool
	// Lease is how long the lease lasts without renewal (whole seconds, 5 s..1 h); zero means
	// the control plane's default (DefaultLease).
	Lease time.Duration
	// Reported is the workflow run the executor runs in, from the runner's environment
	// (StartRunRequest.reported_workflow_run; docs/approvals.md, "Approve in GitHub"), nil outside a runner.
	Reported *rbookv1.GitHubWorkflowRun
	// Kind is the run's format: RUN_KIND_PLAYBOOK for a .cantbook; the zero value
	// (RUN_KIND_UNSPECIFIED) is sent as RUN_KIND_RUNBOOK (docs/playbooks.md, "Running").
	Kind rbookv1.RunKind
	// Bindings is a playbook run's validated inputs (defaults applied) as a JSON object, the
	// run's first bindings (StartRunRequest.bindings, column playbook_runs.bindings; at most
	// 1 MiB, the control plane refuses more with E_INVALID_ARGUMENT). Empty means {}.
	Bindings string
	// EpicID and SessionID link a playbook run to a task epic and a session (columns epic_id,
	// session_id; docs/spec/playbooks.md); optional, each at most 128 bytes.
	EpicID, SessionID string
	// Plan is what the run executes (PlanOf), sent bound to PlanDigest so a person deciding a
	// gate sees what is still to come; nil sends none.
	Plan *rbookv1.RunPlan
}

// Sentinel errors of StartRun (docs/decisions/run-ids.md, docs/decisions/leases-and-fencing.md).
var (
	// ErrRunFinal means the control plane already holds a final run with this id: a fresh
	// run takes the next id suffix.
	ErrRunFinal = errors.New("the control plane already has a final run with this id")
	// ErrRunOwned means another executor owns the (unfinished) run: a fresh run takes the next
	// id suffix; a resume needs --take-over once that executor's lease expired.
	ErrRunOwned = errors.New("another executor owns this run on the control plane")
	// ErrLeaseHeld means take-over was asked while the owner's lease is still live.
	ErrLeaseHeld = errors.New("the run's lease is still held by its executor")
)

// Started is what StartRun reports.
type Started struct {
	// LastSeq is the highest seq the control plane holds for the run.
	LastSeq int64
	// ChainHead is the hash of transition LastSeq, the head of the run's hash chain on the
	// control plane ("" for a new run, a run without the chain, or an older control plane;
	// docs/evidence-chain.md).
	ChainHead string
	// LastCompletedStepIndex is the last step the control plane saw finish (-1 before one).
	LastCompletedStepIndex int
	// Created is true when the call created the run.
	Created bool
	// Epoch is the lease epoch every later write carries.
	Epoch int64
	// Lease is how long the lease lasts without renewal (the heartbeat renews it at a third).
	Lease time.Duration
}

// StartRun creates the run on the control plane, or resumes (or, with ri.TakeOver, takes
// over) the one with this id, and keeps the lease for the client's later writes. Errors:
// ErrRunFinal, ErrRunOwned, ErrLeaseHeld (each wrapped with the server's message),
// *UnreachableError, or another refusal naming the control plane.
func (c *Client) StartRun(ctx context.Context, ri RunInfo) (Started, error) {
	req := &rbookv1.StartRunRequest{
		RunId: ri.RunID, Name: ri.RunbookName, ContentHash: ri.PlanDigest, SchemaHash8: ri.SchemaHash8,
		TotalSteps: int32(ri.TotalSteps), StartedBy: ri.StartedBy, StartedAt: timestamppb.New(ri.StartedAt),
		Kind: rbookv1.RunKind_RUN_KIND_RUNBOOK, OwnerId: ri.OwnerID, TakeOver: ri.TakeOver,
		LeaseSeconds: int32(ri.Lease / time.Second), ReportedWorkflowRun: ri.Reported,
		Bindings: ri.Bindings, EpicId: ri.EpicID, SessionId: ri.SessionID, Plan: ri.Plan,
	}
	if ri.Kind != rbookv1.RunKind_RUN_KIND_UNSPECIFIED {
		req.Kind = ri.Kind
	}
	var resp *rbookv1.StartRunResponse
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = c.Runs.StartRun(ctx, req)
		return err
	})
	switch Code(err) {
	case "":
	case "E_RUN_FINAL":
		return Started{}, fmt.Errorf("%w: %v", ErrRunFinal, err)
	case "E_RUN_OWNED":
		return Started{}, fmt.Errorf("%w: %v", ErrRunOwned, err)
	case "E_LEASE_HELD":
		return Started{}, fmt.Errorf("%w: %v", ErrLeaseHeld, err)
	}
	if err != nil {
		return Started{}, fmt.Errorf("control plane %s: StartRun: %w", c.URL, err)
	}
	run := resp.GetRun()
	c.SetFence(ri.OwnerID, run.GetLease().GetEpoch())
	lease := DefaultLease
	if exp := run.GetLease().GetExpiresAt(); exp != nil && run.GetUpdatedAt() != nil {
		if d := exp.AsTime().Sub(run.GetUpdatedAt().AsTime()); d > 0 {
			lease = d
		}
	}
	return Started{LastSeq: run.GetLastSeq(), ChainHead: run.GetChainHead(), LastCompletedStepIndex: int(run.GetLastCompletedStepIndex()),
		Created: resp.GetCreated(), Epoch: run.GetLease().GetEpoch(), Lease: lease}, nil
}

// DefaultLease is the lease the control plane grants when StartRun asks for none (60 s).
const DefaultLease = 60 * time.Second

// ErrLeaseLost means the control plane refused a write because another executor resumed or
// took over the run: this executor must stop writing (docs/decisions/leases-and-fencing.md).
var ErrLeaseLost = errors.New("this executor lost the run's lease")

// KeepLease renews the lease every third of its duration until ctx ends, so a long step or a
// gate that waits for hours keeps the run owned. When the control plane says the lease is
// lost (E_LEASE_LOST) it calls lost once and stops; other failures are retried at the next
// tick (a RecordTransition renews the lease too).
func (c *Client) KeepLease(ctx context.Context, runID string, lease time.Duration, lost func(error)) {
	every := max(lease/3, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		owner, epoch := c.Fence()
		cctx, cancel := context.WithTimeout(ctx, every)
		_, err := c.Runs.RenewLease(cctx, &rbookv1.RenewLeaseRequest{RunId: runID, OwnerId: owner, Epoch: epoch})
		cancel()
		switch Code(err) {
		case "E_LEASE_LOST", "E_PERMISSION_DENIED":
			lost(fmt.Errorf("%w: %v", ErrLeaseLost, err))
			return
		case "E_RUN_FINAL", "E_RUN_CANCELLED":
			return
		}
	}
}
