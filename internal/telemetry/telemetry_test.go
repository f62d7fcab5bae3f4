package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestExportIsOnOnlyWhenAnEndpointIsConfigured(t *testing.T) {
	for _, c := range []struct {
		name     string
		endpoint string
		env      map[string]string
		want     bool
	}{
		{"nothing set", "", nil, false},
		{"the flag", "http://127.0.0.1:4318", nil, true},
		{"the generic endpoint", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"the traces endpoint", "", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"only a service name", "", map[string]string{"OTEL_SERVICE_NAME": "cp"}, false},
		{"the SDK disabled", "http://127.0.0.1:4318", map[string]string{"OTEL_SDK_DISABLED": "true"}, false},
		{"the traces exporter none", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Endpoint: c.endpoint, Getenv: func(k string) string { return c.env[k] }}
			if got := o.Enabled(); got != c.want {
				t.Errorf("Enabled() = %v, want %v", got, c.want)
			}
		})
	}
}

func TestStartWithoutEndpointInstallsNothing(t *testing.T) {
	stop, err := Start(context.Background(), Options{Service: "rbook"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	_, span := Tracer().Start(context.Background(), "x")
	if span.SpanContext().IsValid() || span.IsRecording() {
		t.Errorf("a span without export configured is recording or valid: %+v", span.SpanContext())
	}
}

func TestOTLPEndpointFlagIsCheckedAndGetsTheTracesPath(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces", ""},
		{"https://otel.example:4318/", "https://otel.example:4318/v1/traces", ""},
		{"http://collector:4318/custom/traces", "http://collector:4318/custom/traces", ""},
		{"127.0.0.1:4318", "", "--otlp-endpoint 127.0.0.1:4318: must be an http:// or https:// URL of an OTLP/HTTP receiver, e.g. http://127.0.0.1:4318"},
	} {
		got, err := endpointURL(c.in)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("endpointURL(%q) = %q, %v; want %q, %q", c.in, got, err, c.want, c.err)
		}
	}
}

func TestLogLinesCarryTheContextsIDsAndTraceID(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil)))
	h := http.Header{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx, fields := WithFields(Extract(context.Background(), h))
	fields.Set("RBOOK-1", "confirm", "")
	fields.Set("", "", "a-1")
	log.InfoContext(ctx, "gate opened", "run_id", "RBOOK-given") // the call's own run_id stays
	log.Info("no context")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("lines: %s", buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"run_id": "RBOOK-given", "step": "confirm", "approval_id": "a-1",
		"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, first[k], v, lines[0])
		}
	}
	if bytes.Count(lines[0], []byte(`"run_id"`)) != 1 {
		t.Errorf("run_id twice: %s", lines[0])
	}
	for _, k := range []string{"run_id", "trace_id", "span_id"} {
		if _, ok := second[k]; ok {
			t.Errorf("a line without context has %s: %s", k, lines[1])
		}
	}
}

func TestInjectSendsOnlyAValidSpanContext(t *testing.T) {
	h := http.Header{}
	Inject(context.Background(), h)
	if h.Get("traceparent") != "" {
		t.Errorf("traceparent without a span: %q", h.Get("traceparent"))
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	Inject(ctx, h)
	if got := h.Get("traceparent"); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("traceparent %q", got)
	}
}
