// Package console serves the approver's web console: the single-page app built from web/ into
// dist/ (committed, embedded here) at the control plane's own origin, next to the Connect
// services it calls (docs/console.md).
//
// Every response carries a strict Content-Security-Policy (no inline script or style, no
// network but this origin), X-Content-Type-Options: nosniff, Referrer-Policy: no-referrer and
// X-Frame-Options: DENY. Assets under /assets/ have content hashes in their names and are
// cached for a year; the page itself (index.html) is revalidated with its ETag on every load.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed dist
var distFS embed.FS

// CSP is the Content-Security-Policy sent with every console response (docs/console.md,
// "Security"): scripts, styles, fonts and API calls only from this origin, images from this
// origin or data: URLs, no plugins, no <base>, forms only to this origin, never framed.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// AssetPrefix is the URL path under which the bundle's files are served.
const AssetPrefix = "/assets/"

// asset is one embedded file ready to serve.
type asset struct {
	body   []byte
	gz     []byte // gzip of body, nil when it does not pay
	ctype  string
	etag   string
	cached bool // immutable (hashed name) rather than revalidated
}

type bundle struct {
	index  asset
	assets map[string]asset // by name under AssetPrefix
}

var (
	loadOnce sync.Once
	loaded   *bundle
	loadErr  error
)

var contentTypes = map[string]string{
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".html": "text/html; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".json": "application/json",
	".txt":  "text/plain; charset=utf-8",
	".map":  "application/json",
}

func newAsset(body []byte, name string, cached bool) asset {
	sum := sha256.Sum256(body)
	a := asset{body: body, ctype: contentTypes[path.Ext(name)], etag: `"` + hex.EncodeToString(sum[:12]) + `"`, cached: cached}
	if a.ctype == "" {
		a.ctype = "application/octet-stream"
	}
	if len(body) > 1024 {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = zw.Write(body)
		_ = zw.Close()
		if b.Len() < len(body) {
			a.gz = b.Bytes()
		}
	}
	return a
}

// load reads dist/ once: index.html and every file under dist/assets.
func load() (*bundle, error) {
	loadOnce.Do(func() {
		index, err := distFS.ReadFile("dist/index.html")
		if err != nil {
			loadErr = fmt.Errorf("console: the embedded dist/index.html is missing (%w); rebuild with: npm ci --prefix controlplane/console/web && npm run --prefix controlplane/console/web build", err)
			return
		}
		b := &bundle{index: newAsset(index, "index.html", false), assets: map[string]asset{}}
		err = fs.WalkDir(distFS, "dist/assets", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			body, err := distFS.ReadFile(p)
			if err != nil {
				return err
			}
			b.assets[strings.TrimPrefix(p, "dist/assets/")] = newAsset(body, p, true)
			return nil
		})
		if err != nil {
			loadErr = fmt.Errorf("console: read the embedded dist/assets: %w", err)
			return
		}
		loaded = b
	})
	return loaded, loadErr
}

// AssetNames returns the names of the embedded bundle's files under AssetPrefix (for tests and
// size reports). Errors: the embedded dist/ is missing or unreadable.
func AssetNames() ([]string, error) {
	b, err := load()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(b.assets))
	for n := range b.assets {
		names = append(names, n)
	}
	return names, nil
}

// IsAppPath reports whether p is one of the app's pages (docs/console.md, "Pages"): "/",
// "/approvals/<id>", "/runs", "/runs/<id>" and "/signin". Other paths get the app too, with
// status 404, and the app shows "Not found".
func IsAppPath(p string) bool {
	switch p {
	case "/", "/runs", "/runs/", "/signin", "/signin/":
		return true
	}
	for _, prefix := range []string{"/approvals/", "/runs/"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok {
			rest = strings.TrimSuffix(rest, "/")
			return rest != "" && !strings.Contains(rest, "/")
		}
	}
	return false
}

// SetSecurityHeaders sets the console's security headers on h: the CSP, nosniff, no referrer
// and no framing. The console handler sets them on every response, errors included.
func SetSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

type handler struct{}

// Handler returns the console's http.Handler, meant to be mounted at "/" after the Connect
// services and the /auth/ and /github/ handlers: GET and HEAD only (405 otherwise, with
// Allow), /assets/<name> from the embedded bundle (404 when unknown), and index.html for every
// other path (status 200 for the app's pages, 404 elsewhere). When the binary was built
// without the bundle it answers 503 with the command that builds it.
func Handler() http.Handler { return handler{} }

func (handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SetSecurityHeaders(w.Header())
	if isRPCPath(r.URL.Path) {
		// A Connect or gRPC call to a service this server does not have: 404, which clients
		// read as "unimplemented", rather than the page.
		http.Error(w, "not found: this control plane has no such service", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: the console's pages are read with GET", http.StatusMethodNotAllowed)
		return
	}
	b, err := load()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if name, ok := strings.CutPrefix(r.URL.Path, AssetPrefix); ok {
		a, found := b.assets[name]
		if !found {
			http.Error(w, "not found: no such console asset (the page may be older than the server; reload it)", http.StatusNotFound)
			return
		}
		serve(w, r, a, http.StatusOK)
		return
	}
	status := http.StatusOK
	if !IsAppPath(r.URL.Path) {
		status = http.StatusNotFound
	}
	serve(w, r, b.index, status)
}

// isRPCPath reports whether p names an RPC, "/package.Service/Method": its first segment
// holds a dot, which no page of the app has.
func isRPCPath(p string) bool {
	first, _, found := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return found && strings.Contains(first, ".")
}

func serve(w http.ResponseWriter, r *http.Request, a asset, status int) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	h.Set("Vary", "Accept-Encoding")
	if a.cached {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if status == http.StatusOK && etagMatches(r.Header.Get("If-None-Match"), a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = a.gz
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t), "W/"))
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			return !strings.Contains(strings.ReplaceAll(params, " ", ""), "q=0") || strings.Contains(params, "q=0.")
		}
	}
	return false
}
