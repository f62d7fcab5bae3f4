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
	"sync/atomic"
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

	// ownerID and epoch are the run's lease (DESIGN D12): set by StartRun, sent with every
	// write (RecordTransition, RequestApproval, RenewLease).
	ownerID string
	epoch   atomic.Int64
}

// Fence returns the owner id and lease epoch the client writes with (zero before StartRun).
func (c *Client) Fence() (ownerID string, epoch int64) { return c.ownerID, c.epoch.Load() }

// SetFence sets the lease the client writes with, for a caller that delivers an outbox of a
// run it started earlier (the epoch the state file kept).
func (c *Client) SetFence(ownerID string, epoch int64) { c.ownerID = ownerID; c.epoch.Store(epoch) }

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
	// OwnerID is the executor's owner id (state.NewOwnerID; DESIGN D12). Required.
	OwnerID string
	// TakeOver asks to take the run over from another owner whose lease expired.
	TakeOver bool
	// Lease is how long the lease lasts without renewal (whole seconds, 5 s..1 h); zero means
	// the control plane's default (DefaultLease).
	Lease time.Duration
}

// Sentinel errors of StartRun (DESIGN D6, D12).
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
		LeaseSeconds: int32(ri.Lease / time.Second),
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
	return Started{LastSeq: run.GetLastSeq(), LastCompletedStepIndex: int(run.GetLastCompletedStepIndex()),
		Created: resp.GetCreated(), Epoch: run.GetLease().GetEpoch(), Lease: lease}, nil
}

// DefaultLease is the lease the control plane grants when StartRun asks for none (60 s).
const DefaultLease = 60 * time.Second

// ErrLeaseLost means the control plane refused a write because another executor resumed or
// took over the run: this executor must stop writing (DESIGN D12).
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
