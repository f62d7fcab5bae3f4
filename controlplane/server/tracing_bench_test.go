package server_test

// The cost of tracing on RecordTransitions (docs/tracing.md, "Cost"). From the repository root:
//
//	go test -run '^$' -bench 'BenchmarkRecordTransitionsTracing|BenchmarkTraceInterceptor' -benchtime 2000x ./controlplane/server/
//
// BenchmarkRecordTransitionsTracing sends RecordTransitions calls of 10 transitions, each
// with a traceparent header as an executor sends it, to an in-process server on SQLite with
// tracing off (OpenTelemetry's no-op provider, the default), on with an in-memory exporter,
// and on with the OTLP/HTTP exporter posting to a local server that discards what it gets.
// BenchmarkTraceInterceptor times the tracing interceptor alone in the same three settings:
// its ns/op over the call's is the share tracing costs (the calls' own timings vary with the
// disk's commits more than that). Target: <= 5% when off.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/telemetry"
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

// tracingCases are the benchmarks' three settings: off, an in-memory exporter and OTLP/HTTP
// to discardURL, each as the func that installs it and returns the func that undoes it.
func tracingCases(discardURL string) []struct {
	name    string
	install func(testing.TB) func()
} {
	with := func(newExp func() (sdktrace.SpanExporter, error)) func(testing.TB) func() {
		return func(tb testing.TB) func() {
			exp, err := newExp()
			if err != nil {
				tb.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
			otel.SetTracerProvider(tp)
			return func() {
				_ = tp.Shutdown(context.Background())
				otel.SetTracerProvider(noop.NewTracerProvider())
			}
		}
	}
	return []struct {
		name    string
		install func(testing.TB) func()
	}{
		{"off", func(testing.TB) func() { return func() {} }},
		{"memory", with(func() (sdktrace.SpanExporter, error) { return tracetest.NewInMemoryExporter(), nil })},
		{"otlp", with(func() (sdktrace.SpanExporter, error) {
			return telemetry.NewExporter(telemetry.Options{Endpoint: discardURL + "/v1/traces"})
		})},
	}
}

// discardServer is an OTLP/HTTP receiver that answers every export with success.
func discardServer(tb testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}

func BenchmarkRecordTransitionsTracing(b *testing.B) {
	for _, c := range tracingCases(discardServer(b)) {
		b.Run(c.name, func(b *testing.B) {
			defer c.install(b)()
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

// BenchmarkTraceInterceptor is the tracing interceptor alone around a handler that does
// nothing: what tracing adds to each call, without the call's own cost and noise.
func BenchmarkTraceInterceptor(b *testing.B) {
	req := connect.NewRequest(&rbookv1.RecordTransitionsRequest{Transitions: transitions("bench-interceptor", 1, 10, false), OwnerId: testOwner, Epoch: 1})
	req.Header().Set("traceparent", benchTraceparent)
	for _, c := range tracingCases(discardServer(b)) {
		b.Run(c.name, func(b *testing.B) {
			defer c.install(b)()
			handler := server.TraceInterceptor().WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
				return connect.NewResponse(&rbookv1.RecordTransitionsResponse{AckedSeq: 10}), nil
			})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := handler(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
