package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/internal/healthcheck"
)

// newAdminHealthCmd is `rbook admin health`: one gRPC health check of a control plane, the
// container image's HEALTHCHECK (docs/deploy.md, "The container image").
func newAdminHealthCmd() *cobra.Command {
	hf := healthcheck.Options{DefaultAddr: defaultServeAddr}
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check that a control plane is serving (gRPC health), exit 0 if it is",
		Long: `Ask a control plane (rbook serve) for its gRPC health (grpc.health.v1.Health/Check) and
print one line: SERVING, or why not. It needs no token.

Where: --addr HOST:PORT or a URL (http://… or https://…, a path prefix is kept). Without
it, $RBOOK_ADDR (the address rbook serve listens on) or else 127.0.0.1:7070; a wildcard
host (0.0.0.0, [::] or none) means this machine's loopback, so the same command checks the
server of its own container. A HOST:PORT is spoken to over TLS when the server answers TLS
there, and over plain HTTP (h2c) otherwise.

TLS: the server's certificate is checked against the system's CAs and the CA in the PEM
file $RBOOK_CA_FILE; $RBOOK_CLIENT_CERT and $RBOOK_CLIENT_KEY present a client certificate.
--insecure-skip-verify skips the check of the server's certificate: it is for a check over
loopback of a server whose certificate names its public host (the container image's
HEALTHCHECK), never for a check across a network.

Exit codes:
  0  the control plane answered SERVING
  1  it answered NOT_SERVING (its database is unreachable, or it is shutting down), did not
     answer within --timeout, or its certificate is not trusted
  2  bad arguments, or $RBOOK_CA_FILE (or the client certificate) cannot be read`,
		Example: `  rbook admin health                                  # $RBOOK_ADDR, else 127.0.0.1:7070
  rbook admin health --addr https://rbook.example.com # with RBOOK_CA_FILE=ca.pem for a private CA
  rbook admin health --service rbook.v1.RunService`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAdminHealth(cmd, &hf) },
	}
	f := cmd.Flags()
	f.StringVar(&hf.Addr, "addr", "", "the control plane: HOST:PORT or an http:// or https:// URL (default $RBOOK_ADDR, else "+defaultServeAddr+")")
	f.StringVar(&hf.Service, "service", "", `the service whose health to ask for: "" (the server) or one such as rbook.v1.RunService`)
	f.DurationVar(&hf.Timeout, "timeout", 5*time.Second, "give up after this long")
	f.BoolVar(&hf.InsecureSkipVerify, "insecure-skip-verify", false, "do not check the server's TLS certificate (a loopback check only)")
	return cmd
}

// runAdminHealth checks the control plane hf names once and maps the answer to an exit code:
// 0 SERVING, 2 bad flags or an unreadable TLS environment, 1 anything else.
func runAdminHealth(cmd *cobra.Command, hf *healthcheck.Options) error {
	line, err := healthcheck.Check(cmd.Context(), *hf)
	var ue *healthcheck.UsageError
	var se *healthcheck.SetupError
	switch {
	case errors.As(err, &ue):
		return &usageError{cmd, err}
	case errors.As(err, &se):
		return abort("rbook admin health: %v", err)
	case err != nil:
		return &exitError{code: exitFailed, msg: "rbook admin health: " + err.Error()}
	}
	fmt.Fprintln(cmd.OutOrStdout(), line)
	return nil
}
