// Package embedded is the control plane `rbook run` starts in its own process when no
// --control-plane is given: its files under .rbook/ (the database, the approval secret, the
// local approver key, the signing key), the lock that lets one control plane at a time serve a database, and
// the read-only view of an ended run's database that the history verbs use.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// Where the embedded control plane keeps its data: local run data lives under .rbook/.
const (
	DB     = ".rbook/controlplane.db"
	Secret = ".rbook/approval-secret"
	// LocalKey holds the secret that lets this folder's owner decide the embedded control
	// plane's gates by approval id (server.Options.LocalApprover): 0600, so only the user who
	// runs rbook here can read it, while any local user can reach loopback.
	LocalKey = ".rbook/local-approver-key"
)

// Options are how Start runs the embedded control plane.
type Options struct {
	// Policy and Shadow decide playbook approval nodes (rbook playbook run --policy,
	// --policy-shadow); nil means the server's default rules.
	Policy *approval.Policy
	Shadow bool
	// LocalPerson is the name `rbook approve` records by default.
	LocalPerson string
	// PublicURLIsListener links gates to their page on the loopback address (not in a
	// runner, where nobody can open it; docs/console-links.md).
	PublicURLIsListener bool
	// LockRetry is how long a taken database lock is tried again.
	LockRetry time.Duration
	// WriteURL records the address for other terminals and returns the func that removes it;
	// BeforeClose runs before the server closes. Both may be nil.
	WriteURL    func(url string) func()
	BeforeClose func()
}

// Start starts a control plane in this process on a free loopback port over this folder's
// database (DB), so `rbook approve`, `rbook runs` and grpcurl work from another terminal while
// the run lasts. The approval secret comes from RBOOK_APPROVAL_SECRET / RBOOK_SECRET, else
// from Secret, generated (0600) on first use. It returns "" (and a line on errw) when another
// process serves the database; the returned func stops it. Errors: the secret files, the
// server's start.
func Start(ctx context.Context, errw io.Writer, o Options) (string, func(), error) {
	// The lock comes first: a run that does not serve the embedded control plane has no use
	// for an approval secret, so none is generated for it.
	unlock, err := LockDB(DB, o.LockRetry)
	if err != nil {
		// Another process serves this folder's database: an 'rbook serve' started here with
		// the default --db, or another run's embedded control plane, whose life is tied to
		// that run; this run does not lean on either.
		fmt.Fprintf(errw, "Another rbook process serves %s (an 'rbook serve' in this folder, or the embedded control plane of another 'rbook run'), so this run keeps its record in the state file only; pass --control-plane URL (for 'rbook serve': the address it printed) to report to it.\n", DB)
		return "", func() {}, nil
	}
	secret, err := approval.SecretFromEnv(os.Getenv)
	if err != nil {
		var created bool
		secret, created, err = server.LoadOrCreateSecretFile(Secret)
		if err != nil {
			unlock()
			return "", nil, fmt.Errorf("embedded control plane: %w", err)
		}
		if created {
			fmt.Fprintf(errw, "Generated an approval-token secret for the embedded control plane in %s (set RBOOK_APPROVAL_SECRET to use your own).\n", Secret)
		}
	}
	localKey, _, err := server.LoadOrCreateSecretFile(LocalKey)
	if err != nil {
		unlock()
		return "", nil, fmt.Errorf("embedded control plane: local approver key: %w", err)
	}
	signer, created, err := LoadOrCreateSigningKey(SigningKey)
	if err != nil {
		unlock()
		return "", nil, fmt.Errorf("embedded control plane: %w", err)
	}
	if created {
		fmt.Fprintf(errw, "Generated the embedded control plane's attestation signing key in %s (key %s); check a run's evidence with: rbook evidence verify --key %s <run_id>.evidence.json\n",
			SigningKey, signer.KeyID(), SigningKey)
	}
	// The embedded server logs only problems: the run's own output is what a person reads.
	logger := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	running, err := server.Start(ctx, server.Config{
		Addr: "127.0.0.1:0", DBPath: DB,
		// Gates link to their page on this loopback address, for the person at this machine
		// (docs/console-links.md); in a GitHub runner nobody can open the runner's loopback,
		// so there are no links.
		PublicURLIsListener: o.PublicURLIsListener,
		Options: server.Options{Secret: secret, Logger: logger, PlaybookPolicy: o.Policy, PolicyShadow: o.Shadow, LocalApprover: localKey,
			LocalPerson: o.LocalPerson, // the name `rbook approve` records by default
			Signer:      signer},       // attestations of every run, with no setup (docs/attestations.md)
	})
	if err != nil {
		unlock()
		return "", nil, fmt.Errorf("embedded control plane (%s): %w", filepath.Clean(DB), err)
	}
	url := running.URL()
	removeURL := func() {}
	if o.WriteURL != nil {
		removeURL = o.WriteURL(url)
	}
	fmt.Fprintf(errw, "Control plane (embedded): %s · try from another terminal: rbook runs   or   grpcurl -plaintext %s list\n", url, running.Addr())
	return url, func() {
		removeURL()
		if o.BeforeClose != nil {
			o.BeforeClose() // e.g. the run's own idle connections: Close need not wait for them
		}
		if err := running.Close(); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(errw, "embedded control plane: %v\n", err)
		}
		unlock()
	}, nil
}

// ReadLocalKey is the embedded control plane's local approver key (LocalKey), or ""
// when this folder has none (no embedded control plane ever ran here, or the file is not
// this user's to read). It is sent only to the embedded control plane of this folder.
func ReadLocalKey() string {
	b, err := os.ReadFile(LocalKey)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// LoopbackURL reports whether a control-plane URL's host is a loopback IP address, as the
// embedded control plane's always is (127.0.0.1): the local approver key is never sent
// anywhere else, whatever .rbook/controlplane.url says.
func LoopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(u.Hostname())
	return err == nil && ip.IsLoopback()
}

// LockDB makes sure one control plane at a time serves a database: watch streams and gate
// deadlines live in the serving process, so a second server on the same file would take
// decisions its executors never hear about. The lock is github.com/gofrs/flock on
// dbPath+".serving" (flock(2) on unix, LockFileEx on Windows); the operating system drops it
// when the process dies. A taken lock is tried again for retry (the state file lock's retry
// window), so a DBServed probe at the same moment does not make it fail. Errors: a
// *ServedError when another process holds the lock, the folder's or the lock file's errors.
func LockDB(dbPath string, retry time.Duration) (release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o755); err != nil {
		return nil, err
	}
	fl := flock.New(dbPath+".serving", flock.SetFlag(os.O_RDWR|os.O_CREATE), flock.SetPermissions(0o600))
	ctx, cancel := context.WithTimeout(context.Background(), retry)
	defer cancel()
	ok, err := fl.TryLockContext(ctx, 5*time.Millisecond)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	if !ok {
		return nil, &ServedError{DB: dbPath}
	}
	return func() { fl.Unlock() }, nil
}

// ServedError is LockDB's error when another process holds DB's serving lock: an 'rbook
// serve' on it, or the embedded control plane of a running 'rbook run'. Its message is for a
// control plane about to start; a command that needs the database to itself (a restore)
// says what to do instead.
type ServedError struct{ DB string }

func (e *ServedError) Error() string {
	return fmt.Sprintf("another control plane is serving %s (an 'rbook serve', or the embedded one of a running 'rbook run'); talk to that one, or give this one its own --db", e.DB)
}

// DBServed reports whether a process holds dbPath's ".serving" lock (LockDB): an 'rbook
// serve' on that database, or the embedded control plane of a running 'rbook run'. It takes a
// shared lock without waiting and lets go at once (no /proc); LockDB tries
// again for a moment, so this never makes a control plane that starts at the same moment
// fail. It reports false when the file does not exist or cannot be opened.
func DBServed(dbPath string) bool {
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

// liveProbeTimeout bounds the check that the address in .rbook/controlplane.url still
// answers (a loopback connect: refused at once when nothing listens).
const liveProbeTimeout = time.Second

// Listening reports whether something accepts connections at the control plane URL's
// host:port. A kill -9'd `rbook run` leaves .rbook/controlplane.url behind; this tells
// such a stale file from a live embedded control plane without touching its locks.
func Listening(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	c, err := net.DialTimeout("tcp", host, liveProbeTimeout)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// HandlerTransport is an http.RoundTripper that hands each request to an http.Handler in
// this process. It serves unary calls (the whole response is buffered), which is all that
// runs, get and approvals make.
type HandlerTransport struct{ H http.Handler }

func (t HandlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	t.H.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// OpenHistory serves this folder's database, opened read-only (store.OpenReadOnly), through
// the real RPC handlers in this process: `rbook runs`, `get` and `approvals` then print exactly
// what they print against a running control plane. Nothing listens on a port, nothing is
// written, and a control plane that starts meanwhile is not blocked. The returned func closes
// it; the HTTP client hands each request to the handlers (HandlerTransport).
func OpenHistory(ctx context.Context, dbPath string) (*http.Client, func(), error) {
	st, err := store.OpenReadOnly(ctx, dbPath)
	if err != nil {
		return nil, nil, err
	}
	h, err := server.New(st, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return &http.Client{Transport: HandlerTransport{h}}, func() { h.Close(); st.Close() }, nil
}
