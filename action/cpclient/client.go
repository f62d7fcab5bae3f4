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
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// DefaultDeadline is how long a call keeps retrying an unreachable control plane before the
// run halts (issue 3: "if the control plane stays unreachable past a deadline the run halts").
const DefaultDeadline = 60 * time.Second

// Back-off between retries: it doubles from minBackoff up to maxBackoff.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// Client talks to one control plane.
type Client struct {
	URL       string
	Runs      rbookv1connect.RunServiceClient
	Approvals rbookv1connect.ApprovalServiceClient
	// Deadline bounds the retries of one call; zero means DefaultDeadline.
	Deadline time.Duration
}

// New returns a client for baseURL (http://host:port). bearer, when set, is sent as
// "Authorization: Bearer …" on every call; it is never logged.
func New(baseURL, bearer string) *Client {
	baseURL = strings.TrimRight(baseURL, "/")
	var opts []connect.ClientOption
	if bearer != "" {
		opts = append(opts, connect.WithInterceptors(bearerInterceptor(bearer)))
	}
	hc := &http.Client{}
	return &Client{
		URL:       baseURL,
		Runs:      rbookv1connect.NewRunServiceClient(hc, baseURL, opts...),
		Approvals: rbookv1connect.NewApprovalServiceClient(hc, baseURL, opts...),
	}
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

// retryable reports whether a failed call may succeed if sent again: the network or the
// server was unavailable, or a concurrent change asked for a retry (E_RETRY).
func retryable(err error) bool {
	var re *retryableError
	if errors.As(err, &re) || Code(err) == "E_RETRY" {
		return true
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code() {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted, connect.CodeAborted:
		return true
	}
	return false
}

// UnreachableError means the control plane did not answer within the deadline.
type UnreachableError struct {
	URL      string
	Deadline time.Duration
	Last     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the control plane at %s did not answer for %s (last error: %v); the run is halted and everything is kept in the state file — run the same command again once the control plane is back", e.URL, e.Deadline, e.Last)
}

func (e *UnreachableError) Unwrap() error { return e.Last }

// retry calls f until it succeeds, fails for good, ctx ends, or the deadline passes.
func (c *Client) retry(ctx context.Context, f func(context.Context) error) error {
	limit := c.Deadline
	if limit <= 0 {
		limit = DefaultDeadline
	}
	deadline := time.Now().Add(limit)
	wait := minBackoff
	for {
		err := f(ctx)
		if err == nil || !retryable(err) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return &UnreachableError{URL: c.URL, Deadline: limit, Last: err}
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
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
