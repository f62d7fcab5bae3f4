package server_test

// The cost of tracing on RecordTransitions (docs/tracing.md, "Cost"). From the repository root:
//
//	go test -run '^$' -bench 'BenchmarkRecordTransitionsTracing|BenchmarkTraceInterceptorOff' -benchtime 2000x ./controlplane/server/
//
// BenchmarkRecordTransitionsTracing sends RecordTransitions calls of 10 transitions, each
// with a traceparent header as an executor sends it, to an in-process server on SQLite with
// tracing off (OpenTelemetry's no-op provider, the default), on with an in-memory exporter,
// and on with the OTLP/HTTP exporter posting to a local server that discards what it gets.
// BenchmarkTraceInterceptorOff times the tracing interceptor alone with tracing off: its
// ns/op over the off call's is the share tracing costs when off. Target: <= 5%.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// benchTraceparent is the W3C trace context an executor's call carries.
const benchTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// traceparent sets benchTraceparent on every unary call.
type traceparent struct{}

func (traceparent) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("traceparent", benchTraceparent)
		return next(ctx, req)
	}
}

func (traceparent) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (traceparent) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func BenchmarkRecordTransitionsTracing(b *testing.B) {
	discard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer discard.Close()
	for _, c := range []struct {
		name     string
		exporter func() (sdktrace.SpanExporter, error)
	}{
		{"off", nil},
		{"memory", func() (sdktrace.SpanExporter, error) { return tracetest.NewInMemoryExporter(), nil }},
		{"otlp", func() (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(discard.URL+"/v1/traces"))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.exporter != nil {
				exp, err := c.exporter()
				if err != nil {
					b.Fatal(err)
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
				otel.SetTracerProvider(tp)
				defer func() {
					_ = tp.Shutdown(context.Background())
					otel.SetTracerProvider(noop.NewTracerProvider())
				}()
			}
			cl := newClients(serveWith(b, server.Options{}), connect.WithInterceptors(traceparent{}))
			id := "bench-trace-" + c.name // a new database per round
			startRun(b, cl, id)
			b.ResetTimer()
			for i := range int64(b.N) {
				req := &rbookv1.RecordTransitionsRequest{Transitions: transitions(id, i*10+1, i*10+10, false), OwnerId: testOwner, Epoch: 1}
				if _, err := cl.runs.RecordTransitions(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*10)/b.Elapsed().Seconds(), "transitions/s")
		})
	}
}

func BenchmarkTraceInterceptorOff(b *testing.B) {
	otel.SetTracerProvider(noop.NewTracerProvider())
	handler := server.TraceInterceptor().WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
		return connect.NewResponse(&rbookv1.RecordTransitionsResponse{AckedSeq: 10}), nil
	})
	req := connect.NewRequest(&rbookv1.RecordTransitionsRequest{Transitions: transitions("bench-interceptor", 1, 10, false), OwnerId: testOwner, Epoch: 1})
	req.Header().Set("traceparent", benchTraceparent)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := handler(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
