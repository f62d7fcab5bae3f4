package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/internal/buildinfo"
	"github.com/rbookhq/rbook-action/internal/telemetry"
)

// runTraced runs o on the run pipeline with traces exported when the OTEL_EXPORTER_OTLP_*
// environment asks for them (docs/tracing.md), flushing them before it returns (at most
// telemetry.ShutdownTimeout). Without that environment it is pipeline.Run.
func runTraced(cmd *cobra.Command, o pipeline.Options) error {
	errw := cmd.ErrOrStderr()
	stop, err := telemetry.Start(cmd.Context(), telemetry.Options{
		Service: "rbook", Version: buildinfo.Read(version).Version, Getenv: os.Getenv,
		OnError: func(err error) { fmt.Fprintf(errw, "warning: traces: %v\n", err) },
	})
	if err != nil {
		return abort("%v", err)
	}
	defer stop()
	return pipeline.Run(cmd.Context(), o)
}
