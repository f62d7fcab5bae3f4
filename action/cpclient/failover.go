package cpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Executor failover: the executor takes several control-plane URLs (or one behind a load
// balancer) and moves to the next on failure (docs/decisions/control-plane-urls.md). A client
// made from "http://a:7070,http://b:7070" sends every call to its current URL, the first
// one at the start. A transport failure there (connection refused or reset, Unavailable,
// an attempt timeout, HTTP 502/503/504: see transportFailure) moves the client to the next
// URL, round robin; the retry loop tries the next one at once and backs off (backoff) only
// after a full round of URLs failed. The control plane's own answers — every error with an
// rbook code (E_LEASE_LOST, E_INVALID_ARGUMENT, E_RETRY, …) and every definite refusal —
// never move it. Because every replica serves the same store, a call retried on another
// replica is the same idempotent call (run_id + seq, one compare-and-set per gate).

// MaxURLs is the most control-plane URLs one --control-plane value may list (docs/decisions/control-plane-urls.md); a
// longer list is refused by SplitURLs rather than cut.
const MaxURLs = 16

// MoveNotice is the progress line a client writes to Progress when it moves from one URL to
// the next (docs/decisions/control-plane-urls.md): the URL that failed, then the one it uses now.
const MoveNotice = "control plane: %s unreachable; using %s"

// URLError is SplitURLs' refusal of one item of a control-plane URL list (docs/decisions/control-plane-urls.md).
type URLError struct {
	// Index is the item's position in the list, 1-based; 0 when the list as a whole is bad
	// (more than MaxURLs items).
	Index int
	// Item is the item as written, spaces trimmed ("" for an empty item).
	Item string
	// Single is true when the list has one item only (the message then names no position).
	Single bool
	// Count is the number of items, set when the list is too long.
	Count int
	// Credentials is true when the item names a user or password (user:password@host);
	// Item then has its user and password replaced by "xxxxx" (a URL's credentials would otherwise
	// be printed in progress lines, hints and errors, and recorded in the state file).
	Credentials bool
}

// Error is the refusal as one sentence after the value's origin (the caller prefixes it, as in
// "--control-plane URL N is empty: …"):
// "lists N control plane URLs, more than the 16 allowed", "URL N is empty: …", or
// "URL N \"…\" is not a control plane URL: …" ("\"…\" is not …" for a single URL), with a
// hint of the form to use (docs/decisions/control-plane-urls.md).
func (e *URLError) Error() string {
	switch {
	case e.Count > MaxURLs:
		return fmt.Sprintf("lists %d control plane URLs, more than the %d allowed", e.Count, MaxURLs)
	case e.Item == "":
		return fmt.Sprintf("URL %d is empty: separate control plane URLs with single commas", e.Index)
	}
	if e.Credentials {
		what := fmt.Sprintf("URL %d %q", e.Index, e.Item)
		if e.Single {
			what = fmt.Sprintf("%q", e.Item)
		}
		return fmt.Sprintf("%s holds credentials (user:password@): a control plane URL must not, because it is printed and "+
			"recorded in the state file; give the executor its token in RBOOK_TOKEN instead", what)
	}
	hint := "http://127.0.0.1:7070"
	if !strings.Contains(e.Item, "://") {
		hint = "http://" + e.Item
	}
	what := fmt.Sprintf("URL %d %q", e.Index, e.Item)
	if e.Single {
		what = fmt.Sprintf("%q", e.Item)
	}
	return fmt.Sprintf("%s is not a control plane URL: give its scheme (http:// or https://) and host, as in %s", what, hint)
}

// SplitURLs parses a control-plane value (--control-plane, $RBOOK_CONTROL_PLANE, the
// Action's control-plane input): one URL or up to MaxURLs separated by commas, spaces around
// each trimmed, trailing slashes dropped (docs/decisions/control-plane-urls.md). Every item needs the scheme http:// or
// https:// and a host, and no user or password (user:password@host: credentials would be
// printed and recorded; the executor authenticates with RBOOK_TOKEN). Errors: *URLError
// naming the first empty or bad item (a password in it redacted).
func SplitURLs(list string) ([]string, error) {
	items := strings.Split(list, ",")
	if len(items) > MaxURLs {
		return nil, &URLError{Count: len(items)}
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		it = strings.TrimSpace(it)
		bad := &URLError{Index: i + 1, Item: it, Single: len(items) == 1}
		if it == "" {
			return nil, bad
		}
		p, err := url.Parse(it)
		if err == nil && p.User != nil {
			bad.Item, bad.Credentials = redactUserinfo(it), true
			return nil, bad
		}
		if err != nil && strings.Contains(it, "@") {
			// An item that does not parse may still hold a password: never echo it.
			bad.Item = redactUserinfo(it)
		}
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, bad
		}
		out = append(out, strings.TrimRight(it, "/"))
	}
	return out, nil
}

// redactUserinfo replaces what stands between "://" and the last "@" of the authority with
// "xxxxx", for an item url.Parse refused (its user and password cannot be told apart).
func redactUserinfo(it string) string {
	scheme, rest, ok := strings.Cut(it, "://")
	if !ok {
		scheme, rest = "", it
	} else {
		scheme += "://"
	}
	authority, path := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		authority = "xxxxx" + authority[i:]
	}
	return scheme + authority + path
}

// endpoint is one control-plane URL of a client with its own HTTP transport (and so its
// own connections: a replica that died takes only its own with it).
type endpoint struct {
	url string
	u   *url.URL
	hc  *http.Client
}

// newEndpoints parses list (see SplitURLs). A list SplitURLs refuses becomes one endpoint
// of the whole value as written, so its calls fail as a bad URL always did.
func newEndpoints(list string) []endpoint {
	urls, err := SplitURLs(list)
	if err != nil {
		urls = []string{strings.TrimRight(strings.TrimSpace(list), "/")}
	}
	eps := make([]endpoint, len(urls))
	for i, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			u = &url.URL{}
		}
		eps[i] = endpoint{url: s, u: u, hc: &http.Client{Transport: transport(s)}}
	}
	return eps
}

// URLs returns the client's control-plane URLs in the order they are tried (one for a
// single URL; none for a client not made by New).
func (c *Client) URLs() []string {
	out := make([]string, len(c.eps))
	for i, e := range c.eps {
		out[i] = e.url
	}
	return out
}

// Current returns the URL calls go to now (URL for a client not made by New).
func (c *Client) Current() string {
	if len(c.eps) == 0 {
		return c.URL
	}
	return c.eps[c.current()].url
}

func (c *Client) current() int {
	if len(c.eps) == 0 {
		return 0
	}
	return int(c.cur.Load()) % len(c.eps)
}

// moveFrom moves the client from endpoint i to the next one, unless another call already
// moved it away from i (many calls failing on one dead URL move the client once), and
// writes MoveNotice to Progress. A pair already noticed since the last answer is not
// written again, so a full outage of every URL does not print a line per retry.
func (c *Client) moveFrom(i int) {
	n := len(c.eps)
	if n < 2 {
		return
	}
	next := (i + 1) % n
	if !c.cur.CompareAndSwap(int64(i), int64(next)) {
		return
	}
	if c.Progress == nil {
		return
	}
	c.noticeMu.Lock()
	defer c.noticeMu.Unlock()
	key := c.eps[i].url + " " + c.eps[next].url
	if c.noticed[key] {
		return
	}
	if c.noticed == nil {
		c.noticed = map[string]bool{}
	}
	c.noticed[key] = true
	c.noticedAny.Store(true)
	fmt.Fprintf(c.Progress, MoveNotice+"\n", c.eps[i].url, c.eps[next].url)
}

// answered records that a URL answered: the next move is noticed again.
func (c *Client) answered() {
	if !c.noticedAny.Load() {
		return
	}
	c.noticeMu.Lock()
	clear(c.noticed)
	c.noticedAny.Store(false)
	c.noticeMu.Unlock()
}

// transportFailure reports whether err says the URL did not answer (docs/decisions/control-plane-urls.md): an error without
// an rbook code that Retryable would retry — refused or reset connections and HTTP
// 429/502/503/504 (unavailable), a read that broke (unknown, internal), a stream reset by
// the peer (canceled), aborted, data_loss, deadline_exceeded. Not: the control plane's own
// answers (any rbook code, E_RETRY included), a token source's failure, a stream that
// ended cleanly.
func transportFailure(err error) bool {
	if err == nil || Code(err) != "" {
		return false
	}
	var te *tokenSourceError
	var re *retryableError
	if errors.As(err, &te) || errors.As(err, &re) {
		return false
	}
	return Retryable(err)
}

// route is the endpoint an attempt goes to, carried in its context to the HTTP layer.
// managed means the retry loop owns the attempt and moves on its failure itself.
type route struct {
	i       int
	managed bool
}

type routeKey struct{}

func withRoute(ctx context.Context, i int, managed bool) context.Context {
	return context.WithValue(ctx, routeKey{}, route{i: i, managed: managed})
}

func routeOf(ctx context.Context) (route, bool) {
	r, ok := ctx.Value(routeKey{}).(route)
	return r, ok
}

// router is the connect.HTTPClient of a client: it sends each request to the endpoint of
// its context's route (else the current one), rewriting the first URL's scheme, host and
// path prefix (the generated clients are made with the first URL) to that endpoint's.
type router struct{ c *Client }

func (r router) Do(req *http.Request) (*http.Response, error) {
	c := r.c
	i := c.current()
	if rt, ok := routeOf(req.Context()); ok && rt.i < len(c.eps) {
		i = rt.i
	}
	if c.eps[i].u.Scheme == "https" {
		if _, err := processTLS(); err != nil {
			return nil, &tlsError{err: err}
		}
	}
	if i == 0 {
		res, err := c.eps[0].hc.Do(req)
		return res, asTLSError(err)
	}
	e := c.eps[i]
	u := *e.u
	u.Path = e.u.Path + strings.TrimPrefix(req.URL.Path, c.eps[0].u.Path)
	u.RawPath = ""
	u.RawQuery = req.URL.RawQuery
	out := req.WithContext(req.Context()) // a shallow copy: the body and headers are shared
	out.URL, out.Host = &u, u.Host
	res, err := e.hc.Do(out)
	return res, asTLSError(err)
}

// failoverInterceptor gives every unary call failover and an attempt timeout. A call the
// retry loop makes (a managed route in its context) is sent once to the route's endpoint:
// the loop moves and retries. Any other call — rbook approve, get, watch's look-ups, the
// lease heartbeat — tries the URLs in order from the current one, each attempt bounded by
// AttemptTimeout when ctx has no deadline, moving on each transport failure, and returns
// the last failure when every URL failed once.
type failoverInterceptor struct{ c *Client }

func (f failoverInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		c := f.c
		if rt, ok := routeOf(ctx); ok && rt.managed {
			resp, err := next(ctx, req)
			if err == nil {
				c.answered()
			}
			return resp, err
		}
		var err error
		for range max(len(c.eps), 1) {
			i := c.current()
			actx, cancel := ctx, context.CancelFunc(func() {})
			if _, ok := ctx.Deadline(); !ok {
				actx, cancel = context.WithTimeout(ctx, c.attemptTimeout())
			}
			var resp connect.AnyResponse
			resp, err = next(withRoute(actx, i, false), req)
			timedOut := actx.Err() != nil && ctx.Err() == nil
			cancel()
			switch {
			case err == nil:
				c.answered()
				return resp, nil
			case ctx.Err() != nil:
				if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
					c.moveFrom(i) // the caller's deadline passed without an answer from i
				}
				return nil, err
			case !timedOut && !transportFailure(err):
				return nil, err // the control plane's answer: never a reason to move
			}
			c.moveFrom(i)
		}
		return nil, err
	}
}

func (f failoverInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next // streams are reopened by their watch loop (retryAlive), which moves
}

func (f failoverInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// WatchRun follows run runID from fromSeq (WatchRun; the control plane replays stored
// transitions first), calling fn with each message, until the stream ends (the run is
// final: nil), fn returns done or an error, or ctx ends. A broken stream is reopened with
// the client's retries — on the next URL after a transport failure (docs/decisions/control-plane-urls.md) — asking from
// the seq after the last transition fn saw, and a transition at or below it is dropped, so
// fn sees every transition once and in order across reconnects. Each stream's first
// message is the run alone (no transition), as the control plane sends it. Errors: the
// control plane's refusal (E_RUN_NOT_FOUND, …), fn's error, ctx.Err(), *UnreachableError.
func (c *Client) WatchRun(ctx context.Context, runID string, fromSeq int64, fn func(*rbookv1.WatchRunResponse) (done bool, err error)) error {
	last := max(fromSeq-1, 0)
	var fnErr error
	err := c.retryAlive(ctx, func(ctx context.Context, alive func()) error {
		stream, err := c.Runs.WatchRun(ctx, &rbookv1.WatchRunRequest{RunId: runID, FromSeq: last + 1})
		if err != nil {
			return err
		}
		defer stream.Close()
		for stream.Receive() {
			alive()
			m := stream.Msg()
			if t := m.GetTransition(); t != nil {
				if t.GetSeq() <= last {
					continue // already delivered through an earlier stream
				}
				last = t.GetSeq()
			}
			done, err := fn(m)
			if err != nil {
				fnErr = err
				return nil
			}
			if done {
				return nil
			}
		}
		return stream.Err()
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}
