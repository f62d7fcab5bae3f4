package telemetry

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP traces receiver that decodes every request with the
// OpenTelemetry project's own generated protobuf types, so the exporter's hand-written
// encoding is checked against the published schema. fail holds statuses to answer first.
type receiver struct {
	mu      sync.Mutex
	reqs    []*coltracepb.ExportTraceServiceRequest
	headers []http.Header
	fail    []int
	url     string
}

func newReceiver(t *testing.T, fail ...int) *receiver {
	r := &receiver{fail: fail}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.headers = append(r.headers, req.Header.Clone())
		if len(r.fail) > 0 {
			code := r.fail[0]
			r.fail = r.fail[1:]
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(code)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, _ := io.ReadAll(body)
		var msg coltracepb.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(data, &msg) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.reqs = append(r.reqs, &msg)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *receiver) spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, m := range r.reqs {
		for _, rs := range m.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// export sends the spans made by do through a provider with the exporter of o, flushed.
func export(t *testing.T, o Options, do func(trace.Tracer)) {
	t.Helper()
	exp, err := NewExporter(o)
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "rbook-test"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	do(tp.Tracer(ScopeName, trace.WithInstrumentationVersion("v9.9.9")))
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Spans reach an OTLP/HTTP receiver as the published protobuf schema decodes them: ids,
// parent, names, kind, times, every attribute type, events, status, resource and scope.
func TestOTLPExportDecodesWithTheOfficialSchema(t *testing.T) {
	recv := newReceiver(t)
	start := time.Date(2026, 12, 2, 11, 0, 0, 123456789, time.UTC)
	export(t, Options{Endpoint: recv.url}, func(tr trace.Tracer) {
		ctx, run := tr.Start(context.Background(), "rbook run deploy", trace.WithTimestamp(start),
			trace.WithAttributes(AttrRunID.String("RBOOK-1"), attribute.Bool("rbook.resumed", false), attribute.Int("rbook.step.index", 0),
				attribute.Float64("ratio", 0.5), attribute.StringSlice("envs", []string{"qa", "prod"}), attribute.Int64Slice("ns", []int64{-1, 2})))
		_, step := tr.Start(ctx, "step confirm", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start.Add(time.Second)))
		step.AddEvent("gate opened", trace.WithAttributes(AttrApprovalID.String("a-1")), trace.WithTimestamp(start.Add(2*time.Second)))
		step.SetStatus(codes.Error, "rejected")
		step.End(trace.WithTimestamp(start.Add(3 * time.Second)))
		run.End(trace.WithTimestamp(start.Add(4 * time.Second)))
	})
	got := recv.spans()
	if len(got) != 2 {
		t.Fatalf("%d spans received, want 2", len(got))
	}
	step, run := got[0], got[1]
	if run.Name != "rbook run deploy" || step.Name != "step confirm" || len(run.TraceId) != 16 || string(step.TraceId) != string(run.TraceId) ||
		string(step.ParentSpanId) != string(run.SpanId) || len(run.ParentSpanId) != 0 {
		t.Fatalf("names or ids: run %v, step %v", run, step)
	}
	if run.Kind != tracepb.Span_SPAN_KIND_INTERNAL || step.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		run.StartTimeUnixNano != uint64(start.UnixNano()) || run.EndTimeUnixNano != uint64(start.Add(4*time.Second).UnixNano()) {
		t.Fatalf("kind or times: run %v", run)
	}
	a := attrs(run.Attributes)
	if a["rbook.run_id"].GetStringValue() != "RBOOK-1" || a["rbook.resumed"] == nil || a["rbook.resumed"].GetValue() == nil ||
		a["rbook.resumed"].GetBoolValue() || a["rbook.step.index"].GetValue() == nil || a["rbook.step.index"].GetIntValue() != 0 ||
		a["ratio"].GetDoubleValue() != 0.5 || len(a["envs"].GetArrayValue().GetValues()) != 2 ||
		a["envs"].GetArrayValue().GetValues()[1].GetStringValue() != "prod" || a["ns"].GetArrayValue().GetValues()[0].GetIntValue() != -1 {
		t.Fatalf("attributes: %v", run.Attributes)
	}
	if step.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || step.Status.GetMessage() != "rejected" ||
		len(step.Events) != 1 || step.Events[0].Name != "gate opened" || attrs(step.Events[0].Attributes)["rbook.approval_id"].GetStringValue() != "a-1" ||
		step.Events[0].TimeUnixNano != uint64(start.Add(2*time.Second).UnixNano()) {
		t.Fatalf("status or events: %v", step)
	}
	if run.Flags != 0x101 { // sampled, and "is the parent remote" known (no parent)
		t.Fatalf("run flags %#x, want 0x101", run.Flags)
	}
	rs := recv.reqs[0].ResourceSpans
	if len(rs) != 1 || attrs(rs[0].Resource.Attributes)["service.name"].GetStringValue() != "rbook-test" ||
		len(rs[0].ScopeSpans) != 1 || rs[0].ScopeSpans[0].Scope.Name != ScopeName || rs[0].ScopeSpans[0].Scope.Version != "v9.9.9" {
		t.Fatalf("resource or scope: %v", rs)
	}
}

// The standard variables are honoured: the traces endpoint as given, headers (URL-decoded),
// gzip; a receiver's 503 is retried and the batch still arrives.
func TestOTLPExportHonoursTheStandardVariablesAndRetries(t *testing.T) {
	recv := newReceiver(t, http.StatusServiceUnavailable)
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": recv.url + "/v1/traces",
		"OTEL_EXPORTER_OTLP_HEADERS":         "api-key=s%3Dcret, x-team = ops",
		"OTEL_EXPORTER_OTLP_COMPRESSION":     "gzip",
	}
	var errs []error
	export(t, Options{Getenv: func(k string) string { return env[k] }, OnError: func(err error) { errs = append(errs, err) }}, func(tr trace.Tracer) {
		_, s := tr.Start(context.Background(), "one")
		s.End()
	})
	if len(recv.spans()) != 1 || len(errs) != 0 {
		t.Fatalf("spans %d, errors %v; want 1 span, none", len(recv.spans()), errs)
	}
	h := recv.headers[len(recv.headers)-1]
	if len(recv.headers) != 2 || h.Get("Api-Key") != "s=cret" || h.Get("X-Team") != "ops" || h.Get("Content-Encoding") != "gzip" {
		t.Fatalf("%d requests; last headers %v", len(recv.headers), h)
	}
}

// A receiver's refusal other than a retryable one is an error at once, naming the endpoint
// and the status; an unusable variable is reported without its value and leaves export on.
func TestOTLPExportReportsRefusalsAndBadVariables(t *testing.T) {
	recv := newReceiver(t, http.StatusBadRequest)
	var reported []error
	exp, err := NewExporter(Options{Endpoint: recv.url, OnError: func(err error) { reported = append(reported, err) },
		Getenv: func(k string) string {
			return map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}[k]
		}})
	if err != nil {
		t.Fatal(err)
	}
	joined := errors.Join(reported...)
	if joined == nil || !strings.Contains(joined.Error(), "OTEL_EXPORTER_OTLP_HEADERS") || !strings.Contains(joined.Error(), "OTEL_EXPORTER_OTLP_TIMEOUT") {
		t.Fatalf("reported %v, want the headers and timeout variables named", joined)
	}
	tp := sdktrace.NewTracerProvider()
	_, s := tp.Tracer("t").Start(context.Background(), "x")
	s.End()
	err = exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{s.(sdktrace.ReadOnlySpan)})
	if err == nil || !strings.Contains(err.Error(), recv.url+"/v1/traces") || !strings.Contains(err.Error(), "400") {
		t.Fatalf("export to a refusing receiver: %v", err)
	}
	if _, err := NewExporter(Options{Getenv: func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"}[k]
	}}); err == nil {
		t.Fatal("an endpoint without a scheme was accepted")
	}
}
