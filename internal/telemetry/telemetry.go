// Package telemetry is rbook's one home for OpenTelemetry traces and the log fields that go
// with them (docs/tracing.md): the tracer provider that exports over OTLP/HTTP only when an
// endpoint is configured, W3C trace-context propagation on headers, and a slog.Handler that
// adds the trace id and the run, step and approval ids a context carries.
//
// Without an endpoint nothing is installed: the global tracer provider stays OpenTelemetry's
// no-op one, so spans cost a few allocations and no goroutine runs.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span rbook makes.
const ScopeName = "github.com/rbookhq/rbook-action"

// ShutdownTimeout bounds the flush of queued spans when a command ends: an unreachable
// collector delays the exit by at most this long.
const ShutdownTimeout = 5 * time.Second

// The span attributes rbook sets (docs/tracing.md, "Spans").
const (
	AttrRunID      = attribute.Key("rbook.run_id")
	AttrRunbook    = attribute.Key("rbook.runbook")
	AttrPlaybook   = attribute.Key("rbook.playbook")
	AttrApprovalID = attribute.Key("rbook.approval_id")
	AttrStep       = attribute.Key("rbook.step")
)

// The standard environment variables that turn export on (the OpenTelemetry SDK
// specification's OTLP exporter configuration).
const (
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envTracesExporter = "OTEL_TRACES_EXPORTER"
)

// Options configure Start.
type Options struct {
	// Service is service.name when OTEL_SERVICE_NAME (or service.name in
	// OTEL_RESOURCE_ATTRIBUTES) does not set one: "rbook" for the executor, "rbook-control-plane"
	// for rbook serve.
	Service string
	// Version is service.version.
	Version string
	// Endpoint, when set, is the OTLP/HTTP traces URL (rbook serve --otlp-endpoint); it turns
	// export on and overrides the environment's endpoint. "/v1/traces" is appended to a URL
	// without a path, as for OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string
	// Getenv reads the environment; nil means none is set (tests pass their own).
	Getenv func(string) string
	// OnError is told each export failure; nil leaves OpenTelemetry's default (stderr).
	OnError func(error)
}

// Enabled reports whether o asks for export: an Endpoint, or OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, unless OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none.
func (o Options) Enabled() bool {
	get := o.getenv()
	if strings.EqualFold(strings.TrimSpace(get(envSDKDisabled)), "true") || strings.EqualFold(strings.TrimSpace(get(envTracesExporter)), "none") {
		return false
	}
	return o.Endpoint != "" || strings.TrimSpace(get(envEndpoint)) != "" || strings.TrimSpace(get(envTracesEndpoint)) != ""
}

func (o Options) getenv() func(string) string {
	if o.Getenv == nil {
		return func(string) string { return "" }
	}
	return o.Getenv
}

// Start installs the global tracer provider o asks for and returns the func that flushes and
// stops it, waiting at most ShutdownTimeout. Without export configured (Options.Enabled) it
// installs nothing and the func does nothing. The exporter (otlphttp.go) reads the standard
// OTLP variables (headers, timeout, compression, certificates); the SDK reads
// OTEL_TRACES_SAMPLER for sampling. A variable it cannot use is told to o.OnError.
// Errors: an Endpoint that is not an http:// or https:// URL; the message names
// --otlp-endpoint.
func Start(ctx context.Context, o Options) (func(), error) {
	if !o.Enabled() {
		return func() {}, nil
	}
	exp, err := NewExporter(o)
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(serviceResource(o)))
	otel.SetTracerProvider(tp)
	if o.OnError != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(o.OnError))
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil && o.OnError != nil {
			o.OnError(fmt.Errorf("traces not flushed on exit: %w", err))
		}
	}, nil
}

// NewExporter is the OTLP/HTTP span exporter Start installs (otlphttp.go): it posts to
// o.Endpoint (checked, /v1/traces added to a URL without a path), else to the endpoint of
// the standard OTEL_EXPORTER_OTLP_* variables, with their headers, timeout, compression and
// TLS files; a variable it cannot use is told to o.OnError and left out. Errors: an Endpoint
// that is not an http:// or https:// URL (naming --otlp-endpoint), no usable endpoint.
func NewExporter(o Options) (sdktrace.SpanExporter, error) {
	endpoint := ""
	if o.Endpoint != "" {
		u, err := endpointURL(o.Endpoint)
		if err != nil {
			return nil, err
		}
		endpoint = u
	}
	cfg, err := exporterConfigOf(o, endpoint)
	if err != nil {
		return nil, fmt.Errorf("traces: the OTLP exporter could not be set up: %w; check --otlp-endpoint and the OTEL_EXPORTER_OTLP_* variables", err)
	}
	if cfg.envError != nil && o.OnError != nil {
		o.OnError(fmt.Errorf("traces: %w", cfg.envError))
	}
	return newOTLPExporter(cfg), nil
}

// endpointURL checks an --otlp-endpoint URL and, as the OTLP specification does for the
// generic endpoint, appends /v1/traces when it has no path.
func endpointURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("--otlp-endpoint " + s + ": must be an http:// or https:// URL of an OTLP/HTTP receiver, e.g. http://127.0.0.1:4318")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// serviceResource is the resource of every span: o.Service and o.Version, then what
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES say (they win).
func serviceResource(o Options) *resource.Resource {
	base := resource.NewSchemaless(semconv.ServiceName(o.Service), semconv.ServiceVersion(o.Version))
	env, err := resource.New(context.Background(), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && env == nil {
		return base
	}
	merged, err := resource.Merge(base, env)
	if err != nil {
		return base
	}
	return merged
}

// Tracer is rbook's tracer from the global provider (a no-op one unless Start installed one).
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// propagator is W3C Trace Context: traceparent and tracestate headers.
var propagator = propagation.TraceContext{}

// Inject writes ctx's span context into h as a W3C traceparent (and tracestate) header;
// nothing when ctx has no valid span.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx with the remote span context of h's traceparent header, ctx unchanged
// when h has none or a malformed one.
func Extract(ctx context.Context, h http.Header) context.Context {
	if h.Get("traceparent") == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}
