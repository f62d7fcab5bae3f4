package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// Where the embedded control plane keeps its data (DESIGN: local run data lives under .rbook/).
const (
	embeddedDB     = ".rbook/controlplane.db"
	embeddedSecret = ".rbook/approval-secret"
	// embeddedLocalKey holds the secret that lets this folder's owner decide the embedded
	// control plane's gates by approval id (server.Options.LocalApprover): 0600, so only the
	// user who runs rbook here can read it, while any local user can reach loopback.
	embeddedLocalKey = ".rbook/local-approver-key"
)

// startEmbedded starts a control plane in this process on a free loopback port (issue 3,
// item 6), so `rbook approve`, `rbook runs` and grpcurl work from another terminal while the
// run lasts. The approval secret comes from RBOOK_APPROVAL_SECRET / RBOOK_SECRET, else from
// .rbook/approval-secret, generated (0600) on first use. The returned func stops it.
func startEmbedded(ctx context.Context, errw io.Writer) (string, func(), error) {
	return startEmbeddedWith(ctx, errw, embeddedPolicy{})
}

// startEmbeddedWith is startEmbedded whose control plane decides playbook approval nodes
// with pol (rbook playbook run --policy, --policy-shadow; issue 9, item 6).
func startEmbeddedWith(ctx context.Context, errw io.Writer, pol embeddedPolicy) (string, func(), error) {
	// The lock comes first: a run that does not serve the embedded control plane has no use
	// for an approval secret, so none is generated for it.
	unlock, err := lockDB(embeddedDB)
	if err != nil {
		// Another process serves this folder's database: an 'rbook serve' started here with
		// the default --db, or another run's embedded control plane, whose life is tied to
		// that run; this run does not lean on either.
		fmt.Fprintf(errw, "Another rbook process serves %s (an 'rbook serve' in this folder, or the embedded control plane of another 'rbook run'), so this run keeps its record in the state file only; pass --control-plane URL (for 'rbook serve': the address it printed) to report to it.\n", embeddedDB)
		return "", func() {}, nil
	}
	secret, err := approval.SecretFromEnv(os.Getenv)
	if err != nil {
		var created bool
		secret, created, err = server.LoadOrCreateSecretFile(embeddedSecret)
		if err != nil {
			unlock()
			return "", nil, fmt.Errorf("embedded control plane: %w", err)
		}
		if created {
			fmt.Fprintf(errw, "Generated an approval-token secret for the embedded control plane in %s (set RBOOK_APPROVAL_SECRET to use your own).\n", embeddedSecret)
		}
	}
	localKey, _, err := server.LoadOrCreateSecretFile(embeddedLocalKey)
	if err != nil {
		unlock()
		return "", nil, fmt.Errorf("embedded control plane: local approver key: %w", err)
	}
	// The embedded server logs only problems: the run's own output is what a person reads.
	logger := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	running, err := server.Start(ctx, server.Config{
		Addr: "127.0.0.1:0", DBPath: embeddedDB,
		// Gates link to their page on this loopback address, for the person at this machine
		// (docs/console-links.md); in a GitHub runner nobody can open the runner's loopback,
		// so there are no links.
		PublicURLIsListener: !github.InRunner(),
		Options: server.Options{Secret: secret, Logger: logger, PlaybookPolicy: pol.policy, PolicyShadow: pol.shadow, LocalApprover: localKey,
			LocalPerson: currentUser()}, // the name `rbook approve` records by default
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
		cpclient.CloseIdleConnections() // this run's own connections: Close need not wait for them
		if err := running.Close(); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(errw, "embedded control plane: %v\n", err)
		}
		unlock()
	}, nil
}

// readLocalKey is the embedded control plane's local approver key (embeddedLocalKey), or ""
// when this folder has none (no embedded control plane ever ran here, or the file is not
// this user's to read). It is sent only to the embedded control plane of this folder.
func readLocalKey() string {
	b, err := os.ReadFile(embeddedLocalKey)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// loopbackURL reports whether a control-plane URL's host is a loopback IP address, as the
// embedded control plane's always is (127.0.0.1): the local approver key is never sent
// anywhere else, whatever .rbook/controlplane.url says.
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(u.Hostname())
	return err == nil && ip.IsLoopback()
}

// lockDB makes sure one control plane at a time serves a database: watch streams and gate
// deadlines live in the serving process, so a second server on the same file would take
// decisions its executors never hear about. The lock is github.com/gofrs/flock on
// dbPath+".serving" (flock(2) on unix, LockFileEx on Windows; issue 7, item 1); the operating
// system drops it when the process dies. A taken lock is tried again for
// state.LockRetryWindow, so a dbServed probe at the same moment does not make it fail.
func lockDB(dbPath string) (release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o755); err != nil {
		return nil, err
	}
	fl := flock.New(dbPath+".serving", flock.SetFlag(os.O_RDWR|os.O_CREATE), flock.SetPermissions(0o600))
	ctx, cancel := context.WithTimeout(context.Background(), state.LockRetryWindow)
	defer cancel()
	ok, err := fl.TryLockContext(ctx, 5*time.Millisecond)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("another control plane is serving %s (an 'rbook serve', or the embedded one of a running 'rbook run'); talk to that one, or give this one its own --db", dbPath)
	}
	return func() { fl.Unlock() }, nil
}

// dbServed reports whether a process holds dbPath's ".serving" lock (lockDB): an 'rbook
// serve' on that database, or the embedded control plane of a running 'rbook run'. It takes a
// shared lock without waiting and lets go at once (no /proc; issue 7, item 1); lockDB tries
// again for a moment, so this never makes a control plane that starts at the same moment
// fail. It reports false when the file does not exist or cannot be opened.
func dbServed(dbPath string) bool {
	p := dbPath + ".serving"
	if _, err := os.Stat(p); err != nil {
		return false
	}
	fl := flock.New(p, flock.SetFlag(os.O_RDONLY))
	ok, err := fl.TryRLock()
	if err != nil {
		return false
	}
	if ok {
		fl.Unlock()
		return false
	}
	return true
}
