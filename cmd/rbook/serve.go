package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/controlplane/embedded"
	"github.com/rbookhq/rbook-action/controlplane/serveconfig"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// The control plane's default address: the one port the README, docs/, every --help and the
// TypeScript client's messages name.
const (
	defaultServePort = serveconfig.DefaultPort
	defaultServeAddr = serveconfig.DefaultAddr
)

// newServeCmd is `rbook serve`: the control plane, with the settings of package serveconfig.
func newServeCmd() *cobra.Command {
	var s *serveconfig.Settings
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane: runs and approvals over Connect, gRPC and gRPC-Web",
		Long:  serveconfig.Help,
		Example: `  export RBOOK_APPROVAL_SECRET=$(head -c 32 /dev/urandom | base64)
  rbook serve                          # ` + defaultServeAddr + `, database .rbook/controlplane.db
  rbook serve --addr 0.0.0.0:` + defaultServePort + ` --auth-file auth.txt --db /var/lib/rbook/cp.db
  rbook serve --auth-file auth.txt --gate-policy gates.yaml   # e.g. two approvers for prod gates
  rbook serve --config /etc/rbook/serve.yaml --print-config   # the effective settings, secrets redacted
  rbook serve --addr 0.0.0.0:` + defaultServePort + ` --auth-file auth.txt --tls-cert tls.crt --tls-key tls.key   # HTTPS
  grpcurl -plaintext ` + defaultServeAddr + ` list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd, s) },
	}
	s = serveconfig.AddFlags(cmd, version)
	return cmd
}

// runServe starts the control plane with s, prints its address line and serves until SIGINT
// or SIGTERM, then shuts down gracefully.
func runServe(cmd *cobra.Command, s *serveconfig.Settings) error {
	fail := func(format string, a ...any) error { return serveFailed(cmd, s, fmt.Sprintf(format, a...)) }
	if done, err := s.ReadConfig(cmd); err != nil {
		return fail("rbook serve: %v", err)
	} else if done {
		return nil
	}
	cfg, modes, err := s.Load(cmd)
	if err != nil {
		return fail("rbook serve: %v", err)
	}
	if err := store.CheckDSN(cfg.DBPath); err != nil {
		return fail("rbook serve: --db: %v", err) // nothing is created
	}
	if !store.IsPostgresDSN(cfg.DBPath) {
		// A SQLite file has one server; replicas share a PostgreSQL database.
		unlock, err := embedded.LockDB(cfg.DBPath, state.LockRetryWindow)
		if err != nil {
			return fail("rbook serve: %v", err)
		}
		defer unlock()
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopTracing, err := s.StartTracing(ctx, cfg)
	if err != nil {
		return fail("rbook serve: %v", err)
	}
	defer stopTracing() // after Close: the last RPCs' spans are flushed
	r, err := server.Start(ctx, *cfg)
	if err != nil {
		return fail("rbook serve: %v", err)
	}
	mode := modes.Line(cfg)
	if from, to := r.Migrated(); from != to {
		// Once, on the start that migrated; on stderr, so stdout's first line stays the
		// address line scripts read.
		s.ReportMigration(cmd.ErrOrStderr(), cfg, from, to)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "rbook control plane listening on %s (db %s, %s)\n", r.URL(), store.RedactDSN(cfg.DBPath), mode)
	<-ctx.Done()
	cfg.Logger.Info("shutting down", "cause", context.Cause(ctx).Error())
	if err := r.Close(); err != nil {
		return fail("rbook: shutdown: %v", err)
	}
	return nil
}

// serveFailed is serve's exit error with msg: under --log-json msg is written as a JSON log
// line (serveconfig's LogFailure) and main prints nothing more, else main prints msg.
func serveFailed(cmd *cobra.Command, s *serveconfig.Settings, msg string) error {
	if s.LogFailure(cmd.ErrOrStderr(), msg) {
		return &exitError{code: exitAborted}
	}
	return abort("%s", msg)
}
