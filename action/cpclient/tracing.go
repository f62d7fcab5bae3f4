package cpclient

import (
	"context"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/telemetry"
)

// traceInterceptor sends the caller's trace with every call as a W3C traceparent header, so
// the control plane's span of the call joins the run's trace (docs/tracing.md). A
// RequestApproval answer's approval id is set on the caller's span (the gate's), so the
// executor's trace names the approval as the control plane's does.
type traceInterceptor struct{}

func (traceInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		telemetry.Inject(ctx, req.Header())
		res, err := next(ctx, req)
		if err == nil {
			if r, ok := res.Any().(*rbookv1.RequestApprovalResponse); ok && r.GetApproval() != nil {
				trace.SpanFromContext(ctx).SetAttributes(telemetry.AttrApprovalID.String(r.GetApproval().GetApprovalId()))
			}
		}
		return res, err
	}
}

func (traceInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		telemetry.Inject(ctx, conn.RequestHeader())
		return conn
	}
}

func (traceInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
