package server

import (
	"container/list"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/rbookhq/rbook-action/controlplane/webhook"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// Rate is a per-client request rate (docs/serve-config.md, "Limits"): N requests per Per,
// in bursts of at most N: a token bucket of N tokens that refills at N per Per. The zero Rate
// is no limit.
type Rate struct {
	N   int
	Per time.Duration
}

// MaxRateN bounds N in a Rate.
const MaxRateN = 1_000_000

var rateRE = lazyregexp.New(`^([0-9]+)/(s|m|h)$`)

// ParseRate reads a Rate as rbook serve's --rate-limit-* flags take it: "N/s", "N/m" or "N/h"
// (N from 1 to MaxRateN requests per second, minute or hour), or "off" for no limit.
func ParseRate(s string) (Rate, error) {
	if s == "off" {
		return Rate{}, nil
	}
	m := rateRE.FindStringSubmatch(s)
	if m == nil {
		return Rate{}, fmt.Errorf("%q: want N/s, N/m or N/h (N requests a second, minute or hour per client, e.g. 20/s), or off", s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > MaxRateN {
		return Rate{}, fmt.Errorf("%q: N must be 1 to %d (or say off)", s, MaxRateN)
	}
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[m[2]]
	return Rate{N: n, Per: per}, nil
}

// String is the Rate as ParseRate reads it: "20/s", "30/m", "off".
func (r Rate) String() string {
	if r.N <= 0 {
		return "off"
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	if unit == "" {
		return fmt.Sprintf("%d/%s", r.N, r.Per)
	}
	return fmt.Sprintf("%d/%s", r.N, unit)
}

// Limits are the per-client rate limits and request-size caps of the public endpoints
// (docs/serve-config.md, "Limits"). A client is an IP address (IPv6: its /64), the peer's,
// or from X-Forwarded-For when the peer is a trusted proxy.
type Limits struct {
	// Webhook limits /github/webhook (GitHub's deliveries: GitHub does not retry a refused
	// one, so keep this above the peak delivery rate).
	Webhook Rate
	// Slack limits /slack/interactions (Slack's button clicks).
	Slack Rate
	// SignIn limits /auth/ (sign-in, callbacks, sign-out).
	SignIn Rate
	// Console limits the console's pages and files, and the RPCs browsers make (requests with
	// an Origin header, which browsers send with every POST); executors, the CLI and other
	// API clients are not limited by address.
	Console Rate
	// TrustedProxies are the proxies whose X-Forwarded-For is believed: for a peer in one of
	// them, the client is the right-most address in X-Forwarded-For that is not a trusted
	// proxy. Empty: the peer is the client.
	TrustedProxies []netip.Prefix
	// MaxClients bounds the clients remembered per endpoint (the least recently seen is
	// forgotten first, with its bucket); 0 means DefaultMaxClients.
	MaxClients int
}

// DefaultMaxClients is Limits.MaxClients' default: a few megabytes of buckets per endpoint.
const DefaultMaxClients = 10_000

// DefaultLimits are rbook serve's default limits (docs/serve-config.md, "Limits").
func DefaultLimits() Limits {
	return Limits{
		Webhook: Rate{N: 50, Per: time.Second},
		Slack:   Rate{N: 20, Per: time.Second},
		SignIn:  Rate{N: 30, Per: time.Minute},
		Console: Rate{N: 50, Per: time.Second},
	}
}

// The endpoints that are limited, as countRefused and the log name them.
const (
	endpointWebhook = "webhook"
	endpointSlack   = "slack"
	endpointSignIn  = "signin"
	endpointConsole = "console"
)

// The request-body caps of the limited endpoints: the webhook's and Slack's are their
// handlers' own; a sign-in request is a small form; the console's pages and files are read
// with GET. The console RPCs are capped by the Connect handlers (Options.MaxMessageBytes).
const (
	maxSignInBody  = 16 << 10
	maxConsoleBody = 64 << 10
)

// refusalLogEvery is how often one client's refusals on one endpoint are logged at most.
const refusalLogEvery = time.Minute

// limiters are the per-endpoint client buckets of a server with Limits.
type limiters struct {
	trusted []netip.Prefix
	by      map[string]*clientLimiter
}

// clientLimiter is one endpoint's limit: a token bucket per client, at most max clients,
// the least recently seen forgotten first.
type clientLimiter struct {
	endpoint string
	rate     Rate
	maxBody  int64
	max      int

	mu      sync.Mutex
	clients map[netip.Prefix]*list.Element // of *clientState
	lru     *list.List                     // front: most recently seen
}

// clientState is one client's bucket and when its refusals were last logged.
type clientState struct {
	key      netip.Prefix
	bucket   *rate.Limiter // nil: no rate limit on this endpoint
	loggedAt map[string]time.Time
}

func newLimiters(l Limits) *limiters {
	maxClients := l.MaxClients
	if maxClients <= 0 {
		maxClients = DefaultMaxClients
	}
	mk := func(ep string, r Rate, body int64) *clientLimiter {
		return &clientLimiter{endpoint: ep, rate: r, maxBody: body, max: maxClients,
			clients: map[netip.Prefix]*list.Element{}, lru: list.New()}
	}
	return &limiters{trusted: l.TrustedProxies, by: map[string]*clientLimiter{
		endpointWebhook: mk(endpointWebhook, l.Webhook, webhook.MaxBodyBytes),
		endpointSlack:   mk(endpointSlack, l.Slack, maxSlackBody),
		endpointSignIn:  mk(endpointSignIn, l.SignIn, maxSignInBody),
		endpointConsole: mk(endpointConsole, l.Console, maxConsoleBody),
	}}
}

// client is key's state, created (and the least recently seen client forgotten when the
// endpoint is full) when new. Call with l.mu held.
func (l *clientLimiter) client(key netip.Prefix) *clientState {
	if e, ok := l.clients[key]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*clientState)
	}
	for l.lru.Len() >= l.max {
		oldest := l.lru.Back()
		delete(l.clients, oldest.Value.(*clientState).key)
		l.lru.Remove(oldest)
	}
	c := &clientState{key: key}
	if l.rate.N > 0 {
		c.bucket = rate.NewLimiter(rate.Limit(float64(l.rate.N)/l.rate.Per.Seconds()), l.rate.N)
	}
	l.clients[key] = l.lru.PushFront(c)
	return c
}

// allow takes a token of key's bucket. When there is none it returns how long until there
// is one, and whether this refusal is the first of the minute to log.
func (l *clientLimiter) allow(key netip.Prefix, now time.Time) (ok bool, retry time.Duration, log bool) {
	if l.rate.N <= 0 {
		return true, 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.client(key)
	if c.bucket.AllowN(now, 1) {
		return true, 0, false
	}
	r := c.bucket.ReserveN(now, 1)
	retry = r.DelayFrom(now)
	r.CancelAt(now)
	return false, retry, c.logNow("rate", now)
}

// refusedTooLarge records a too-large refusal of key and says whether to log it.
func (l *clientLimiter) refusedTooLarge(key netip.Prefix, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.client(key).logNow("too_large", now)
}

// logNow says whether a refusal for reason is the first in refusalLogEvery, and notes it.
func (c *clientState) logNow(reason string, now time.Time) bool {
	if c.loggedAt == nil {
		c.loggedAt = map[string]time.Time{}
	}
	if last, ok := c.loggedAt[reason]; ok && now.Sub(last) < refusalLogEvery {
		return false
	}
	c.loggedAt[reason] = now
	return true
}

// size is the number of clients remembered.
func (l *clientLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}

// endpointOf is the limited endpoint r is for, "" for none (an executor's or the CLI's RPC,
// health, reflection), and whether it is an RPC.
func endpointOf(r *http.Request) (ep string, rpc bool) {
	p := r.URL.Path
	switch {
	case p == webhook.Path:
		return endpointWebhook, false
	case p == SlackInteractionsPath:
		return endpointSlack, false
	case strings.HasPrefix(p, "/auth/"):
		return endpointSignIn, false
	case strings.HasPrefix(p, "/rbook.") || strings.HasPrefix(p, "/grpc."):
		// A browser says which page a POST comes from; the console's calls are the
		// browser's. Other clients (Go, grpc, Node's fetch) send no Origin.
		if r.Header.Get("Origin") != "" {
			return endpointConsole, true
		}
		return "", true
	}
	return endpointConsole, false
}

// clientKey is who sent r, for the buckets: the peer's address, or for a peer that is a
// trusted proxy the right-most X-Forwarded-For address that is not one. IPv4 addresses are
// keyed alone, IPv6 ones by their /64 (one host's usual allocation).
func (ls *limiters) clientKey(r *http.Request) netip.Prefix {
	addr := peerAddr(r.RemoteAddr)
	if ls.isTrusted(addr) {
		var hops []string
		for _, h := range r.Header.Values("X-Forwarded-For") {
			hops = append(hops, strings.Split(h, ",")...)
		}
		for i := len(hops) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // the nearest proxy's view is the last address believed
			}
			addr = hop.Unmap()
			if !ls.isTrusted(addr) {
				break
			}
		}
	}
	return keyOf(addr)
}

func (ls *limiters) isTrusted(a netip.Addr) bool {
	for _, p := range ls.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr is the IP of a RemoteAddr "host:port"; the zero Addr when it has none.
func peerAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}

// keyOf is a's bucket key: an IPv4 address alone, an IPv6 address's /64.
func keyOf(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// clientLabel is key as a log shows it: the IPv4 address, the IPv6 /64, or "unknown".
func clientLabel(key netip.Prefix) string {
	switch {
	case !key.IsValid():
		return "unknown"
	case key.Addr().Is4():
		return key.Addr().String()
	}
	return key.String()
}

// withLimits wraps next in Options.Limits (next itself without them): a client over an
// endpoint's rate gets 429 with Retry-After, a body over its cap 413 (at once from
// Content-Length, else when the handler reads past the cap). Each refusal is counted
// (countRefused) and logged at most once a minute per client, endpoint and reason.
func (s *Server) withLimits(next http.Handler) http.Handler {
	if s.opts.Limits == nil {
		return next
	}
	s.limits = newLimiters(*s.opts.Limits)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ep, rpc := endpointOf(r)
		if ep == "" {
			next.ServeHTTP(w, r)
			return
		}
		l := s.limits.by[ep]
		key := s.limits.clientKey(r)
		now := time.Now()
		if ok, retry, logIt := l.allow(key, now); !ok {
			secs := max(1, int(math.Ceil(retry.Seconds())))
			s.refused(l, key, "rate", logIt, "limit", l.rate.String(), "retry_after_s", secs)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			http.Error(w, fmt.Sprintf("too many requests from your address to this endpoint (limit %s): retry after %d s", l.rate, secs), http.StatusTooManyRequests)
			return
		}
		if rpc {
			next.ServeHTTP(w, r) // the Connect handlers cap the message
			return
		}
		if r.ContentLength > l.maxBody {
			s.refused(l, key, "too_large", l.refusedTooLarge(key, now), "bytes", r.ContentLength, "max_bytes", l.maxBody)
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("request body too large: at most %d bytes", l.maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, l.maxBody)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == http.StatusRequestEntityTooLarge {
			// The handler's own cap, or MaxBytesReader's.
			s.refused(l, key, "too_large", l.refusedTooLarge(key, time.Now()), "max_bytes", l.maxBody)
		}
	})
}

// refused counts a refusal and, when logIt, logs it with attrs.
func (s *Server) refused(l *clientLimiter, key netip.Prefix, reason string, logIt bool, attrs ...any) {
	s.countRefused(l.endpoint, reason)
	if logIt {
		args := append([]any{"endpoint", l.endpoint, "reason", reason, "client", clientLabel(key)}, attrs...)
		args = append(args, "note", "this client's next refusals here are logged at most once a minute")
		s.log.Warn("request refused", args...)
	}
}

// countRefused counts one refused request on endpoint (webhook, slack, signin, console) for
// reason (rate, too_large) in rbook_http_requests_refused_total (docs/metrics.md), and says so
// at debug level.
func (s *Server) countRefused(endpoint, reason string) {
	s.metrics.RequestRefused(endpoint, reason)
	s.log.Debug("refused request counted", "endpoint", endpoint, "reason", reason)
}

// statusWriter remembers the status a handler answered with. Unwrap lets
// http.ResponseController reach the connection's writer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on (the console's files never need it; a handler may).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
