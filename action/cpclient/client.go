// Package cpclient connects an executor to the rbook control plane (issue 3, "Executor
// integration"): it starts or resumes the run there, records every transition through
// RecordTransition with retries and back-off, and decides confirm gates through
// RequestApproval and WatchApproval. It meets the control plane only through gen/ (DESIGN,
// "Boundaries").
package cpclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// DefaultDeadline is how long a call keeps retrying an unreachable control plane before the
// run halts (issue 3: "if the control plane stays unreachable past a deadline the run halts";
// the --control-plane-timeout flag).
const DefaultDeadline = 60 * time.Second

// DefaultAttemptTimeout bounds one attempt of a unary call, and a watch stream until its first
// message: a control plane that accepts connections but never answers (a stopped process, a
// proxy that hangs) costs at most this long per attempt before the attempt is retried (issue 6,
// item 1.4). The control plane answers a healthy unary call in milliseconds.
const DefaultAttemptTimeout = 5 * time.Second

// minAttemptTimeout is the least time the last attempt before the deadline still gets, so a
// call that starts just before its deadline is not doomed by a sliver of time.
const minAttemptTimeout = time.Second

// HTTP/2 liveness of the connection to the control plane (issue 6, item 1.4): after
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
// second or two is found again within about as long (issue 6, item 1.5).
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// Client talks to one control plane. Every call of the executor (StartRun, RecordTransition,
// RequestApproval, Approve, Reject, WatchApproval) goes through its retry loop: transient
// failures are retried with back-off until Deadline, definite refusals are returned at once.
type Client struct {
	URL       string
	Runs      rbookv1connect.RunServiceClient
	Approvals rbookv1connect.ApprovalServiceClient
	// Deadline bounds how long calls keep failing before *UnreachableError; zero means
	// DefaultDeadline. For a watch stream it counts from the moment the stream was lost.
	Deadline time.Duration
	// AttemptTimeout bounds one attempt; zero means DefaultAttemptTimeout. It also applies to
	// unary calls made directly on Runs and Approvals with a context without a deadline.
	AttemptTimeout time.Duration
}

// New returns a client for baseURL (http://host:port or https://…). bearer, when set, is sent
// as "Authorization: Bearer …" on every call; it is never logged. The HTTP client is h2c for
// http:// URLs and HTTP/2-or-HTTP/1.1 over TLS for https:// ones, with HTTP/2 pings (see
// PingInterval); unary calls get AttemptTimeout when their context has no deadline.
func New(baseURL, bearer string) *Client {
	baseURL = strings.TrimRight(baseURL, "/")
	c := &Client{URL: baseURL}
	opts := []connect.ClientOption{connect.WithInterceptors(attemptInterceptor{c})}
	if bearer != "" {
		opts = append(opts, connect.WithInterceptors(bearerInterceptor(bearer)))
	}
	hc := &http.Client{Transport: transport(baseURL)}
	c.Runs = rbookv1connect.NewRunServiceClient(hc, baseURL, opts...)
	c.Approvals = rbookv1connect.NewApprovalServiceClient(hc, baseURL, opts...)
	return c
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
	return t
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

// attemptInterceptor gives a unary call without a deadline the client's AttemptTimeout, so no
// caller (the CLI's get, runs, approve) can wait forever on a silent control plane.
type attemptInterceptor struct{ c *Client }

func (a attemptInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, a.c.attemptTimeout())
			defer cancel()
		}
		return next(ctx, req)
	}
}

func (a attemptInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next // streams are long-lived; the watch loop bounds them until their first message
}

func (a attemptInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

type bearerInterceptor string

func (b bearerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (b bearerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
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

// Retryable reports whether a failed call may succeed if sent again (issue 6, item 1.5). Every
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
func Retryable(err error) bool {
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
// failed with a transient error (Retryable) for Deadline. It deliberately does not unwrap to
// Last: a timed-out attempt is not a timed-out gate, and a last E_RETRY is not a refusal.
type UnreachableError struct {
	URL      string
	Deadline time.Duration
	Last     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the control plane at %s did not answer for %s (last error: %v); the run is halted and everything is kept in the state file — run the same command again once the control plane is back", e.URL, e.Deadline, e.Last)
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
func (c *Client) retryAlive(ctx context.Context, f func(ctx context.Context, alive func()) error) error {
	limit := c.deadline()
	since := time.Now() // when the current run of failures began
	for n := 0; ; n++ {
		at := min(c.attemptTimeout(), max(limit-time.Since(since), minAttemptTimeout))
		actx, cancel := context.WithCancelCause(ctx)
		timer := time.AfterFunc(at, func() { cancel(errAttemptTimeout) })
		progressed := false
		err := f(actx, func() {
			if !progressed {
				progressed = true
				timer.Stop()
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
		if timedOut {
			err = fmt.Errorf("no answer within %s: %w", at, err)
		} else if !Retryable(err) {
			return err
		}
		if progressed {
			since, n = time.Now(), 0
		}
		left := limit - time.Since(since)
		if left <= 0 {
			return &UnreachableError{URL: c.URL, Deadline: limit, Last: err}
		}
		t := time.NewTimer(min(backoff(n), left))
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
	var last int64
	err := c.retry(ctx, func(ctx context.Context) error {
		resp, err := c.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: runID})
		last = resp.GetRun().GetLastSeq()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("control plane %s: GetRun: %w", c.URL, err)
	}
	return last, nil
}

// RunInfo describes the run for StartRun.
type RunInfo struct {
	RunID, RunbookName, PlanDigest, SchemaHash8, StartedBy string
	TotalSteps                                             int
	StartedAt                                              time.Time
}

// ErrRunFinal means the control plane already holds a final run with this id (DESIGN D6:
// the caller picks the next id suffix).
var ErrRunFinal = errors.New("the control plane already has a final run with this id")

// StartRun creates the run on the control plane, or returns the one to resume. It returns the
// last sequence number the control plane holds for the run.
func (c *Client) StartRun(ctx context.Context, ri RunInfo) (lastSeq int64, created bool, err error) {
	req := &rbookv1.StartRunRequest{
		RunId: ri.RunID, RunbookName: ri.RunbookName, PlanDigest: ri.PlanDigest, SchemaHash8: ri.SchemaHash8,
		TotalSteps: int32(ri.TotalSteps), StartedBy: ri.StartedBy, Idempotent: true, StartedAt: timestamppb.New(ri.StartedAt),
	}
	var resp *rbookv1.StartRunResponse
	err = c.retry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = c.Runs.StartRun(ctx, req)
		return err
	})
	if Code(err) == "E_RUN_FINAL" {
		return 0, false, ErrRunFinal
	}
	if err != nil {
		return 0, false, fmt.Errorf("control plane %s: StartRun: %w", c.URL, err)
	}
	return resp.GetRun().GetLastSeq(), resp.GetCreated(), nil
}
