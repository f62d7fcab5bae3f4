package console_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/console"
)

// get serves one request through the console handler and returns the recorded response.
func get(t *testing.T, method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	console.Handler().ServeHTTP(w, r)
	return w
}

// asset returns the embedded bundle's file whose name has the prefix and suffix.
func asset(t *testing.T, prefix, suffix string) string {
	t.Helper()
	names, err := console.AssetNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) {
			return n
		}
	}
	t.Fatalf("no embedded asset %s*%s among %v; rebuild: npm run --prefix controlplane/console/web build", prefix, suffix, names)
	return ""
}

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	js := asset(t, "app-", ".js")
	for _, c := range []struct{ method, path string }{
		{"GET", "/"},
		{"GET", "/approvals/a-123"},
		{"GET", "/runs"},
		{"GET", "/runs/RBOOK-20260102-demo-1a2b3c4d"},
		{"GET", "/signin"},
		{"GET", "/no/such/page"},
		{"GET", "/assets/" + js},
		{"GET", "/assets/missing.js"},
		{"HEAD", "/"},
		{"POST", "/"},
		{"DELETE", "/runs"},
		{"POST", "/rbook.v1.NoService/Call"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			w := get(t, c.method, c.path, nil)
			h := w.Result().Header
			if got := h.Get("Content-Security-Policy"); got != console.CSP {
				t.Errorf("Content-Security-Policy = %q, want %q", got, console.CSP)
			}
			if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
			}
			if got := h.Get("Referrer-Policy"); got != "no-referrer" {
				t.Errorf("Referrer-Policy = %q, want no-referrer", got)
			}
			if got := h.Get("X-Frame-Options"); got != "DENY" {
				t.Errorf("X-Frame-Options = %q, want DENY", got)
			}
		})
	}
}

func TestCSPAllowsOnlyThisOriginAndNoInlineCode(t *testing.T) {
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
		"connect-src 'self'", "font-src 'self'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(console.CSP, want) {
			t.Errorf("CSP %q lacks %q", console.CSP, want)
		}
	}
	if strings.Contains(console.CSP, "unsafe") || strings.Contains(console.CSP, "http") {
		t.Errorf("CSP %q allows inline code or another origin", console.CSP)
	}
}

func TestAppPagesServeIndexHTML(t *testing.T) {
	for _, p := range []string{"/", "/approvals/a-quar6gymzfwo2dnoulwsbboknm", "/runs", "/runs/", "/runs/RBOOK-20260102-demo-1a2b3c4d.2", "/signin", "/runs?status=paused&page=abc"} {
		t.Run(p, func(t *testing.T) {
			w := get(t, "GET", p, nil)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", w.Code)
			}
			if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			if cc := w.Header().Get("Cache-Control"); cc != "no-cache" {
				t.Errorf("Cache-Control = %q, want no-cache (the page names the current hashed assets)", cc)
			}
			body := w.Body.String()
			if !strings.Contains(body, `<main id="main"`) || !strings.Contains(body, `src="/assets/app-`) {
				t.Errorf("body is not the console's index.html:\n%s", body)
			}
		})
	}
}

func TestUnknownPathGetsTheAppWithStatus404(t *testing.T) {
	for _, p := range []string{"/nope", "/approvals/", "/approvals/a/b", "/runs/x/y", "/favicon.ico"} {
		w := get(t, "GET", p, nil)
		if w.Code != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, w.Code)
		}
		if !strings.Contains(w.Body.String(), `<main id="main"`) {
			t.Errorf("GET %s: body is not the app (which shows Not found)", p)
		}
	}
}

func TestNonGetIsRefusedWith405(t *testing.T) {
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		for _, p := range []string{"/", "/approvals/a-1", "/assets/x.js"} {
			w := get(t, m, p, nil)
			if w.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: status %d, want 405", m, p, w.Code)
			}
			if got := w.Header().Get("Allow"); got != "GET, HEAD" {
				t.Errorf("%s %s: Allow = %q, want \"GET, HEAD\"", m, p, got)
			}
		}
	}
}

func TestRPCPathOfAMissingServiceIs404NotThePage(t *testing.T) {
	w := get(t, "POST", "/rbook.v1.IdentityService/WhoAmI", map[string]string{"Content-Type": "application/proto"})
	if w.Code != http.StatusNotFound {
		t.Fatalf("status %d, want 404 (Connect clients read it as unimplemented)", w.Code)
	}
	if strings.Contains(w.Body.String(), "<html") {
		t.Errorf("an RPC path got the page: %s", w.Body.String())
	}
}

func TestAssetsAreServedWithTheirContentTypeAndCachedForever(t *testing.T) {
	for _, c := range []struct{ prefix, suffix, ctype string }{
		{"app-", ".js", "text/javascript; charset=utf-8"},
		{"style-", ".css", "text/css; charset=utf-8"},
	} {
		name := asset(t, c.prefix, c.suffix)
		w := get(t, "GET", "/assets/"+name, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d", name, w.Code)
		}
		if got := w.Header().Get("Content-Type"); got != c.ctype {
			t.Errorf("%s: Content-Type = %q, want %q", name, got, c.ctype)
		}
		if got := w.Header().Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control = %q", name, got)
		}
		if w.Body.Len() == 0 {
			t.Errorf("%s: empty body", name)
		}
	}
	if w := get(t, "GET", "/assets/app-STALE.js", nil); w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), "<html") {
		t.Errorf("missing asset: status %d, want a plain 404", w.Code)
	}
}

func TestEmbeddedBundleIsPresentAndNamedByIndex(t *testing.T) {
	js, css := asset(t, "app-", ".js"), asset(t, "style-", ".css")
	index := get(t, "GET", "/", nil).Body.String()
	for _, n := range []string{js, css} {
		if !strings.Contains(index, `"/assets/`+n+`"`) {
			t.Errorf("index.html does not name /assets/%s:\n%s", n, index)
		}
		if b := get(t, "GET", "/assets/"+n, nil).Body.Len(); b < 500 {
			t.Errorf("/assets/%s has %d bytes; the bundle looks empty", n, b)
		}
	}
}

func TestIndexHasNoInlineScriptOrStyle(t *testing.T) {
	index := get(t, "GET", "/", nil).Body.String()
	for _, tag := range regexp.MustCompile(`(?i)<script[^>]*>`).FindAllString(index, -1) {
		if !strings.Contains(tag, ` src="/assets/`) {
			t.Errorf("inline or foreign script: %s", tag)
		}
	}
	for _, bad := range []string{"<style", " style=", " onclick=", " onload=", "http://", "https://"} {
		if strings.Contains(strings.ToLower(index), bad) {
			t.Errorf("index.html contains %q, which the CSP forbids or which leaves this origin", bad)
		}
	}
}

func TestETagRevalidationAnswers304(t *testing.T) {
	for _, p := range []string{"/", "/assets/" + asset(t, "app-", ".js")} {
		first := get(t, "GET", p, nil)
		etag := first.Header().Get("ETag")
		if etag == "" {
			t.Fatalf("%s: no ETag", p)
		}
		again := get(t, "GET", p, map[string]string{"If-None-Match": etag})
		if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
			t.Errorf("%s with If-None-Match %s: status %d, %d bytes; want 304 and no body", p, etag, again.Code, again.Body.Len())
		}
	}
}

func TestAssetsAreGzippedWhenTheBrowserAcceptsIt(t *testing.T) {
	p := "/assets/" + asset(t, "app-", ".js")
	plain := get(t, "GET", p, nil).Body.Bytes()
	w := get(t, "GET", p, map[string]string{"Accept-Encoding": "gzip, deflate, br"})
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding = %q, want gzip", w.Header().Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Error("the gzipped asset does not decompress to the asset")
	}
}

// bundleBudget is the most the whole page may weigh gzipped (docs/console.md, "The bundle").
const bundleBudget = 250 << 10

func TestBundleStaysWithinItsGzippedBudget(t *testing.T) {
	total := 0
	for _, p := range []string{"/", "/assets/" + asset(t, "app-", ".js"), "/assets/" + asset(t, "style-", ".css")} {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(get(t, "GET", p, nil).Body.Bytes())
		_ = zw.Close()
		total += b.Len()
	}
	if total > bundleBudget {
		t.Errorf("the page weighs %d bytes gzipped, more than the %d-byte budget", total, bundleBudget)
	}
	t.Logf("the page weighs %d bytes gzipped", total)
}

func TestIsAppPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/runs": true, "/runs/": true, "/runs/r1": true, "/runs/r1/": true, "/signin": true,
		"/approvals/a1": true, "/approvals/": false, "/approvals": false, "/runs/a/b": false, "/x": false,
	} {
		if got := console.IsAppPath(p); got != want {
			t.Errorf("IsAppPath(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestPageSourcesNeverParseHTML keeps untrusted text (prompts, outputs, reasons, step names)
// out of the HTML parser: the app's sources build the DOM with createElement and text nodes
// only (docs/console.md, "Security").
func TestPageSourcesNeverParseHTML(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("web", "src", "*.ts"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources in web/src (%v)", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment", "DOMParser", "eval(", "new Function", `setAttribute("style"`, `setAttribute("on`} {
			if bytes.Contains(src, []byte(bad)) {
				t.Errorf("%s uses %s; build the DOM with dom.ts's h() and text nodes", f, bad)
			}
		}
	}
}
