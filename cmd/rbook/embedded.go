package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

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
	unlock, err := lockDB(embeddedDB)
	if err != nil {
		// Another run in this folder serves the embedded control plane; its life is tied to
		// that run, so this one does not lean on it.
		fmt.Fprintf(errw, "Another rbook process in this folder serves the embedded control plane, so this run keeps its record in the state file only (pass --control-plane URL to report to a control plane).\n")
		return "", func() {}, nil
	}
	// The embedded server logs only problems: the run's own output is what a person reads.
	logger := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	running, err := server.Start(ctx, server.Config{
		Addr: "127.0.0.1:0", DBPath: embeddedDB,
		Options: server.Options{Secret: secret, Logger: logger},
	})
	if err != nil {
		unlock()
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
		unlock()
	}, nil
}

// lockDB makes sure one control plane at a time serves a database: watch streams and gate
// deadlines live in the serving process, so a second server on the same file would take
// decisions its executors never hear about. The kernel drops the lock when the process dies.
func lockDB(dbPath string) (release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(dbPath+".serving", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another control plane is serving %s (an 'rbook serve', or the embedded one of a running 'rbook run'); talk to that one, or give this one its own --db", dbPath)
	}
	return func() { f.Close() }, nil
}
