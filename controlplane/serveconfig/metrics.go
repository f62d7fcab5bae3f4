package serveconfig

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/metrics"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/internal/buildinfo"
)

// metricsFlags are rbook serve's --metrics and --metrics-token-file (docs/metrics.md).
type metricsFlags struct {
	on        bool
	tokenFile string
}

// add registers --metrics and --metrics-token-file on fs.
func (m *metricsFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&m.on, "metrics", true, "serve Prometheus metrics at "+metrics.Path+" on this port (--metrics=false turns it off; see docs/metrics.md)")
	fs.StringVar(&m.tokenFile, "metrics-token-file", "", "file with a bearer token (at least 16 characters) that scrapers of "+metrics.Path+" must send; without it the metrics are served to everyone, as health is")
}

// apply sets cfg.Metrics (a registry with the build info of version, main.version) and
// cfg.MetricsToken from the flags. Errors: a token file with --metrics=false, or one that
// cannot be read or holds no usable token (named, never its content).
func (m *metricsFlags) apply(cfg *server.Config, version string) error {
	if !m.on {
		if m.tokenFile != "" {
			return fmt.Errorf("--metrics-token-file %s is given with --metrics=false: drop one of them", m.tokenFile)
		}
		return nil
	}
	if m.tokenFile != "" {
		tok, err := metrics.ReadTokenFile(m.tokenFile)
		if err != nil {
			return err
		}
		cfg.MetricsToken = tok
	}
	cfg.Metrics = metrics.New(buildinfo.Read(version))
	return nil
}
