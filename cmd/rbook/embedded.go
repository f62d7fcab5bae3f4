package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// Where the embedded control plane keeps its data (DESIGN: local run data lives under .rbook/).
const (
	embeddedDB     = ".rbook/controlplane.db"
	embeddedSecret = ".rbook/approval-secret"
)

// startEmbedded starts a control plane in this process on a free loopback port (issue 3,
// item 6), so `rbook approve`, `rbook runs` and grpcurl work from another terminal while the
// run lasts. The approval secret comes from RBOOK_APPROVAL_SECRET / RBOOK_SECRET, else from
// .rbook/approval-secret, generated (0600) on first use. The returned func stops it.
func startEmbedded(ctx context.Context, errw io.Writer) (string, func(), error) {
	secret, err := approval.SecretFromEnv(os.Getenv)
	if err != nil {
		var created bool
		secret, created, err = server.LoadOrCreateSecretFile(embeddedSecret)
		if err != nil {
			return "", nil, fmt.Errorf("embedded control plane: %w", err)
		}
		if created {
			fmt.Fprintf(errw, "Generated an approval-token secret for the embedded control plane in %s (set RBOOK_APPROVAL_SECRET to use your own).\n", embeddedSecret)
		}
	}
	// The embedded server logs only problems: the run's own output is what a person reads.
	logger := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	running, err := server.Start(ctx, server.Config{
		Addr: "127.0.0.1:0", DBPath: embeddedDB,
		Options: server.Options{Secret: secret, Logger: logger},
	})
	if err != nil {
		return "", nil, fmt.Errorf("embedded control plane (%s): %w", filepath.Clean(embeddedDB), err)
	}
	url := running.URL()
	removeURL := writeEmbeddedURL(url)
	fmt.Fprintf(errw, "Control plane (embedded): %s · try from another terminal: rbook runs   or   grpcurl -plaintext %s list\n", url, running.Addr())
	return url, func() {
		removeURL()
		if err := running.Close(); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(errw, "embedded control plane: %v\n", err)
		}
	}, nil
}
