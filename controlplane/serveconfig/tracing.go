package serveconfig

import (
	"context"
	"os"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/internal/buildinfo"
	"github.com/rbookhq/rbook-action/internal/telemetry"
)

// tracingFlags are rbook serve's tracing flag (docs/tracing.md).
type tracingFlags struct {
	otlpEndpoint string
}

// add registers --otlp-endpoint on fs.
func (tr *tracingFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&tr.otlpEndpoint, "otlp-endpoint", "",
		"export traces over OTLP/HTTP to this URL (e.g. http://otel-collector:4318, the collector's OTLP/HTTP port; overrides OTEL_EXPORTER_OTLP_ENDPOINT; docs/tracing.md)")
}

// StartTracing starts exporting the control plane's traces when --otlp-endpoint or the
// OTEL_EXPORTER_OTLP_* environment asks for it (service name rbook-control-plane unless
// OTEL_SERVICE_NAME says otherwise); export failures go to cfg.Logger. The returned func
// flushes the spans still queued, waiting at most telemetry.ShutdownTimeout. Errors: an
// --otlp-endpoint that is not an http:// or https:// URL.
func (s *Settings) StartTracing(ctx context.Context, cfg *server.Config) (func(), error) {
	return telemetry.Start(ctx, telemetry.Options{
		Service: "rbook-control-plane", Version: buildinfo.Read(s.version).Version,
		Endpoint: s.tracing.otlpEndpoint, Getenv: os.Getenv,
		OnError: func(err error) { cfg.Logger.Warn("traces not exported", "err", err.Error()) },
	})
}
