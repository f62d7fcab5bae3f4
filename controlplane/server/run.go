package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// DefaultShutdownTimeout bounds a graceful shutdown: in-flight unary calls get this long to
// finish after streams were ended; then connections are closed.
const DefaultShutdownTimeout = 5 * time.Second

// Config describes a control plane to run: a listener, a database and the handler options.
type Config struct {
	// Addr is host:port to listen on; "127.0.0.1:0" picks a free loopback port.
	Addr string
	// DBPath is the SQLite file (created with its folder when missing), or a postgres:// or
	// postgresql:// DSN (docs/decisions/store-dialects.md; store.Open).
	DBPath string
	// Insecure allows a non-loopback Addr without Options.Auth or Options.OIDC (docs/control-plane.md, "Authentication: the auth file").
	Insecure bool
	// ShutdownTimeout bounds Close; 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// PublicURLIsListener, when Options.PublicURL is empty, makes the listener's own
	// http://host:port the public URL: the embedded control plane of rbook run, whose port is
	// picked when it listens, links each gate to its page on that loopback address
	// (docs/console-links.md).
	PublicURLIsListener bool
	// TLS, when set, serves HTTPS instead of HTTP and h2c (rbook serve --tls-cert, --tls-key,
	// --tls-client-ca; docs/tls.md).
	TLS *TLSConfig
	// CheckSecretAgreement compares the approval secret (and Options.PreviousSecret) with the
	// key-check values the database records and refuses to start when they disagree, so
	// replicas set up with different secrets are found at start-up (store.Store.CheckSecret;
	// docs/tls.md, "Rotating the approval secret"). rbook serve sets it; the embedded control
	// plane, whose folder database an rbook serve may have used with another secret, does not.
	CheckSecretAgreement bool
	// ReplaceSecretCheck records the current approval secret whatever the database holds
	// (rbook serve --reset-approval-secret-check: the old secret is lost).
	ReplaceSecretCheck bool
	Options
}

// Running is a serving control plane (rbook serve, or the embedded one of rbook run).
type Running struct {
	scheme  string // "http" or "https"
	srv     *http.Server
	handler *Server
	st      *store.Store
	ln      net.Listener
	timeout time.Duration
	served  chan error

	closeOnce sync.Once
	closeErr  error
}

// CheckExposure refuses to serve a non-loopback address without auth unless insecure is set
// (docs/control-plane.md, "Authentication: the auth file"). An empty host or 0.0.0.0/:: listens on every interface and counts as
// non-loopback; "localhost" counts as loopback. Errors: a malformed addr, the refusal.
func CheckExposure(addr string, auth, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	}
	if auth || insecure || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("refusing to serve on %s without authentication: it is not a loopback address; "+
		"give --auth-file FILE (lines \"identity role token\"), --oidc-config FILE or --tls-client-ca FILE (with --tls-cert and --tls-key), or --insecure to serve it unauthenticated anyway", addr)
}

// PlainHTTPTokenWarning is the warning serve logs once at start when it would take bearer
// tokens (cfg.Auth, cfg.OIDC) over plain HTTP (no cfg.TLS) on an address that is not
// loopback, where anyone on the network path can read them; "" when it would not, or when
// cfg says a TLS-terminating proxy is in front: an https:// cfg.PublicURL or trusted proxies
// in cfg.Limits (docs/tls.md, "Behind a reverse proxy or an ingress").
func PlainHTTPTokenWarning(cfg *Config) string {
	host, _, err := net.SplitHostPort(cfg.Addr)
	behindProxy := strings.HasPrefix(cfg.PublicURL, "https://") || (cfg.Limits != nil && len(cfg.Limits.TrustedProxies) > 0)
	if err != nil || isLoopback(host) || cfg.TLS != nil || (cfg.Auth == nil && cfg.OIDC == nil) || behindProxy {
		return ""
	}
	return "bearer tokens are accepted over plain HTTP on " + cfg.Addr + ", which is not a loopback address: anyone on the network path can read them. " +
		"Serve HTTPS with --tls-cert FILE --tls-key FILE, or put a TLS-terminating proxy in front; behind one, give --public-url its https:// URL " +
		"or --trusted-proxies its address, which also silences this warning (docs/tls.md)"
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start opens the store at cfg.DBPath, listens on cfg.Addr and serves Connect, gRPC and
// gRPC-Web over HTTP/1.1 and h2c on that one port until Close; with cfg.TLS, over HTTPS
// (HTTP/2 and HTTP/1.1 negotiated by ALPN) instead. ctx bounds only the start-up.
// Errors: CheckExposure's refusal, a missing secret, the TLS files' errors (naming the flag
// and the file), an approval secret that disagrees with the database's record
// (CheckSecretAgreement), the store's or the listener's errors.
func Start(ctx context.Context, cfg Config) (*Running, error) {
	var tlsConfig *tls.Config
	if cfg.TLS != nil {
		log := cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		var err error
		if tlsConfig, cfg.ClientCAs, err = serverTLS(cfg.TLS, log); err != nil {
			return nil, err
		}
	}
	if err := CheckExposure(cfg.Addr, cfg.Auth != nil || cfg.OIDC != nil || cfg.SignIn != nil || cfg.ClientCAs != nil, cfg.Insecure); err != nil {
		return nil, err
	}
	if cfg.DBPath == "" {
		return nil, errors.New("a database path is required (--db FILE)")
	}
	if err := store.CheckDSN(cfg.DBPath); err != nil {
		return nil, fmt.Errorf("--db: %w", err) // before the folder is made: a mistyped DSN must not create a file named after it
	}
	if dir := filepath.Dir(cfg.DBPath); dir != "" && !store.IsPostgresDSN(cfg.DBPath) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("database folder: %w", err)
		}
	}
	st, err := store.Open(ctx, cfg.DBPath)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", store.RedactDSN(cfg.DBPath), err)
	}
	var agreement store.SecretAgreement
	if cfg.CheckSecretAgreement && len(cfg.Secret) >= approval.MinSecretBytes { // else New refuses the secret
		if agreement, err = checkSecretAgreement(ctx, st, cfg); err != nil {
			st.Close()
			return nil, err
		}
	}
	// The listener comes before the handler, whose links may name the port it picked.
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	if cfg.PublicURLIsListener && cfg.PublicURL == "" {
		cfg.PublicURL = scheme + "://" + ln.Addr().String()
	}
	h, err := New(st, cfg.Options)
	if err != nil {
		ln.Close()
		st.Close()
		return nil, err
	}
	logSecretAgreement(h.log, agreement)
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if tlsConfig != nil {
		protocols.SetHTTP2(true) // gRPC over TLS; no h2c beside it
	} else {
		protocols.SetUnencryptedHTTP2(true) // h2c: gRPC without TLS
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}
	r := &Running{scheme: scheme, srv: srv, handler: h, st: st, ln: ln, timeout: cfg.ShutdownTimeout, served: make(chan error, 1)}
	if r.timeout <= 0 {
		r.timeout = DefaultShutdownTimeout
	}
	if tlsConfig != nil {
		go func() { r.served <- srv.ServeTLS(ln, "", "") }() // the pair comes from TLSConfig.GetCertificate
	} else {
		go func() { r.served <- srv.Serve(ln) }()
	}
	return r, nil
}

// Addr is the address the server listens on (host:port, with the port picked for ":0").
func (r *Running) Addr() string { return r.ln.Addr().String() }

// URL is the base URL clients use: http://host:port, or https://host:port with TLS.
func (r *Running) URL() string { return r.scheme + "://" + r.Addr() }

// Handler is the running server's handler (for EndStreams in tests and the embedded mode).
func (r *Running) Handler() *Server { return r.handler }

// Close shuts down gracefully: it stops accepting connections, ends open streams with
// UNAVAILABLE, waits up to the shutdown timeout for in-flight calls, then closes what is
// left, stops the deadline timer and closes the store. Later calls return the first call's
// result.
func (r *Running) Close() error {
	r.closeOnce.Do(func() { r.closeErr = r.shutdown() })
	return r.closeErr
}

func (r *Running) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- r.srv.Shutdown(ctx) }()
	r.handler.EndStreams()
	err := <-shut
	if err != nil {
		err = errors.Join(fmt.Errorf("graceful shutdown: %w", err), r.srv.Close())
	}
	if serveErr := <-r.served; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return errors.Join(err, r.handler.Close(), r.st.Close())
}

// LoadOrCreateSecretFile returns the approval secret kept in path, creating it (0600, 32
// random bytes, base64) with its folder when missing: the embedded laptop mode's secret
// (docs/decisions/approval-tokens.md: "may generate one into its data folder (0600) and says so"; created reports
// that it did). Errors: unreadable file, a file holding fewer than 16 bytes, write errors.
func LoadOrCreateSecretFile(path string) (secret []byte, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < 16 {
			return nil, false, fmt.Errorf("approval secret file %s holds fewer than 16 bytes", path)
		}
		return []byte(s), false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("approval secret file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("approval secret file: %w", err)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	s := base64.RawURLEncoding.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("approval secret file: %w", err)
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("approval secret file: %w", err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return nil, false, fmt.Errorf("approval secret file: %w", err)
	}
	return []byte(s), true, nil
}
