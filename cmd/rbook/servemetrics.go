package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/metrics"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/internal/buildinfo"
)

// serveMetrics holds rbook serve's --metrics and --metrics-token-file (docs/metrics.md).
var serveMetrics struct {
	on        bool
	tokenFile string
}

// addServeMetricsFlags registers --metrics and --metrics-token-file on cmd.
func addServeMetricsFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&serveMetrics.on, "metrics", true, "serve Prometheus metrics at "+metrics.Path+" on this port (--metrics=false turns it off; see docs/metrics.md)")
	fs.StringVar(&serveMetrics.tokenFile, "metrics-token-file", "", "file with a bearer token (at least 16 characters) that scrapers of "+metrics.Path+" must send; without it the metrics are served to everyone, as health is")
}

// applyServeMetrics sets cfg.Metrics (a registry with this binary's build info) and
// cfg.MetricsToken from the flags. Errors: a token file with --metrics=false, or one that
// cannot be read or holds no usable token (named, never its content).
func applyServeMetrics(cfg *server.Config) error {
	if !serveMetrics.on {
		if serveMetrics.tokenFile != "" {
			return fmt.Errorf("--metrics-token-file %s is given with --metrics=false: drop one of them", serveMetrics.tokenFile)
		}
		return nil
	}
	if serveMetrics.tokenFile != "" {
		tok, err := metrics.ReadTokenFile(serveMetrics.tokenFile)
		if err != nil {
			return err
		}
		cfg.MetricsToken = tok
	}
	cfg.Metrics = metrics.New(buildinfo.Read(version))
	return nil
}
