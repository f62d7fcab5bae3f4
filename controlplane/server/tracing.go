package server

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/telemetry"
)

// traceInterceptor is the outermost handler interceptor: it continues the caller's trace from
// its W3C traceparent header, makes one server span per RPC named after the procedure
// ("rbook.v1.RunService/RecordTransitions") with rbook.run_id and rbook.approval_id when the
// request (or a RequestApproval answer) names them, and puts a telemetry.Fields in the
// context, so the RPC's log line and every line its handler logs carry the trace id and the
// run, step and approval ids (docs/tracing.md).
type traceInterceptor struct{}

func (traceInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, span, fields := startServerSpan(ctx, req.Spec(), req.Header())
		defer span.End()
		noteRequest(span, fields, req.Any())
		res, err := next(ctx, req)
		if err == nil {
			if a, ok := res.Any().(interface{ GetApproval() *rbookv1.Approval }); ok && a.GetApproval() != nil {
				noteIDs(span, fields, "", "", a.GetApproval().GetApprovalId())
			}
		}
		endServerSpan(span, err)
		return res, err
	}
}

func (traceInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (traceInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, span, fields := startServerSpan(ctx, conn.Spec(), conn.RequestHeader())
		defer span.End()
		err := next(ctx, &tracedStream{StreamingHandlerConn: conn, span: span, fields: fields})
		endServerSpan(span, err)
		return err
	}
}

// tracedStream notes the ids of a stream's first message (WatchRun's run id) on its span.
type tracedStream struct {
	connect.StreamingHandlerConn
	span   trace.Span
	fields *telemetry.Fields
	seen   bool
}

func (s *tracedStream) Receive(m any) error {
	err := s.StreamingHandlerConn.Receive(m)
	if err == nil && !s.seen {
		s.seen = true
		noteRequest(s.span, s.fields, m)
	}
	return err
}

// startServerSpan starts the RPC's server span under the caller's trace (if its headers carry
// one) and gives ctx an empty telemetry.Fields.
func startServerSpan(ctx context.Context, spec connect.Spec, h http.Header) (context.Context, trace.Span, *telemetry.Fields) {
	procedure := strings.TrimPrefix(spec.Procedure, "/")
	service, method, _ := strings.Cut(procedure, "/")
	ctx, span := telemetry.Tracer().Start(telemetry.Extract(ctx, h), procedure, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() { // no attributes built when tracing is off
		span.SetAttributes(attribute.String("rpc.system", "connect_rpc"), attribute.String("rpc.service", service), attribute.String("rpc.method", method))
	}
	ctx, fields := telemetry.WithFields(ctx)
	return ctx, span, fields
}

// noteRequest notes the run, step and approval a request message names.
func noteRequest(span trace.Span, fields *telemetry.Fields, m any) {
	var runID, step, approvalID string
	switch r := m.(type) {
	case interface{ GetRunId() string }:
		runID = r.GetRunId()
	case *rbookv1.RecordTransitionRequest:
		runID = r.GetTransition().GetRunId()
	case *rbookv1.RecordTransitionsRequest:
		if ts := r.GetTransitions(); len(ts) > 0 {
			runID = ts[0].GetRunId() // one run per call
		}
	}
	if r, ok := m.(interface{ GetStepName() string }); ok {
		step = r.GetStepName()
	}
	if r, ok := m.(interface{ GetApprovalId() string }); ok {
		approvalID = r.GetApprovalId()
	}
	noteIDs(span, fields, runID, step, approvalID)
}

// noteIDs sets the ids that are not empty on the span and in the log fields.
func noteIDs(span trace.Span, fields *telemetry.Fields, runID, step, approvalID string) {
	fields.Set(runID, step, approvalID)
	if !span.IsRecording() {
		return
	}
	if runID != "" {
		span.SetAttributes(telemetry.AttrRunID.String(runID))
	}
	if step != "" {
		span.SetAttributes(telemetry.AttrStep.String(step))
	}
	if approvalID != "" {
		span.SetAttributes(telemetry.AttrApprovalID.String(approvalID))
	}
}

// endServerSpan marks a failed RPC's span as an error with its Connect code (never the
// message: it may quote the request).
func endServerSpan(span trace.Span, err error) {
	if err == nil {
		return
	}
	code := connect.CodeOf(err).String()
	span.SetAttributes(attribute.String("rpc.connect_rpc.error_code", code))
	if rc := errorCode(err); rc != "" {
		span.SetAttributes(attribute.String("rbook.error_code", rc))
	}
	span.SetStatus(codes.Error, code)
}
