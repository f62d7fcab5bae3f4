// Package browsertest drives a headless Chromium from Go tests (through chromedp) to test the
// control plane's web console as a person uses it: one Browser per test, one Person per
// signed-in identity (its own cookie jar), one or more Tabs per person. Each tab records what
// must never happen on the console's pages — console errors, uncaught exceptions, Content
// Security Policy violations and JavaScript dialogs (alert, confirm, prompt) — so a test can
// assert there were none, and it can take screenshots and run axe-core inside the page.
//
// Tests that use it skip (with the reason) under -short and where no Chromium is installed:
// Debian's `chromium` package, or the binary named by $RBOOK_CHROMIUM. The accessibility check
// needs axe-core from npm: `npm ci` in this package's folder (.ci/run does it).
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Timeout bounds each wait of a Tab (an element to appear, a condition to hold). It is
// generous because the tests run on small shared CI machines next to -race binaries.
const Timeout = 60 * time.Second

// cspMarker starts the console error that the listener installed in every document writes for
// each securitypolicyviolation event, so a CSP violation is reported even where Chromium's own
// log entry for it is not.
const cspMarker = "rbook-browsertest: CSP violation: "

// cspListener runs in every document before the page's own scripts (Page.addScriptToEvaluateOnNewDocument,
// which the page's CSP does not govern) and turns each CSP violation into a console error.
const cspListener = `document.addEventListener('securitypolicyviolation', function (e) {
  console.error(` + "`" + cspMarker + "${e.violatedDirective} blocked ${e.blockedURI || 'inline'} in ${e.sourceFile || e.documentURI}:${e.lineNumber}`" + `);
}, true);`

// Chromium returns the path of the Chromium to test with: $RBOOK_CHROMIUM when set, else the
// first of chromium, chromium-browser, google-chrome and google-chrome-stable found in PATH
// (Debian's package installs /usr/bin/chromium). It returns "" when there is none.
func Chromium() string {
	if p := os.Getenv("RBOOK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

// Browser is one headless Chromium with a temporary profile, closed when the test ends.
type Browser struct {
	ctx context.Context
}

// Start starts a headless Chromium for t, or skips t under -short or when no Chromium is
// installed (see Chromium). The browser ends with the test.
func Start(t testing.TB) *Browser {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test: drives a headless Chromium (skipped under -short)")
	}
	path := Chromium()
	if path == "" {
		t.Skip("no chromium: install Debian's chromium package to run the browser tests (or set RBOOK_CHROMIUM to a Chromium binary)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("lang", "en-US"),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to start its sandbox as root (CI containers run as root).
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return &Browser{ctx: ctx}
}

// Person is one person at the browser: a browser context of its own, so its cookies (its
// console session) are not shared with other Persons of the same Browser.
type Person struct {
	name string
	ctx  context.Context
}

// Person returns a new person named name (used in failure messages and screenshots' names)
// with an empty cookie jar.
func (b *Browser) Person(t testing.TB, name string) *Person {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("%s: opening a browser context: %v", name, err)
	}
	return &Person{name: name, ctx: ctx}
}

// Tab is one tab of a Person. It records console errors, uncaught exceptions, CSP violations
// and JavaScript dialogs from the moment it opens; Problems lists them.
type Tab struct {
	// Ctx is the chromedp context of the tab, for actions this package does not wrap.
	Ctx    context.Context
	name   string
	cancel context.CancelFunc

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on each new problem
	problems []string
	dialogs  []string
}

// Tab opens a new tab of p (sharing p's cookies), closed when the test ends.
func (p *Person) Tab(t testing.TB) *Tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(p.ctx)
	t.Cleanup(cancel)
	tab := &Tab{Ctx: ctx, name: p.name, cancel: cancel, changed: make(chan struct{})}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("%s: opening a tab: %v", p.name, err)
	}
	messages := chromedp.Console(ctx)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspListener}); err != nil {
		t.Fatalf("%s: installing the CSP listener: %v", p.name, err)
	}
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// The browser asks for /favicon.ico by itself; its 404 is not the page's doing.
			if (m.Type == chromedp.ConsoleError || m.IsException()) && !strings.HasSuffix(m.URL, "/favicon.ico") {
				tab.record(fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
			}
		}
	}()
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tab.mu.Lock()
			tab.dialogs = append(tab.dialogs, string(ev.Type)+": "+ev.Message)
			tab.mu.Unlock()
			tab.record("a JavaScript " + string(ev.Type) + " opened: " + ev.Message)
			// A dialog blocks the page; dismiss it so the test goes on and reports it.
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return tab
}

// Close closes the tab (its page, and the connections the page held).
func (tab *Tab) Close() { tab.cancel() }

func (tab *Tab) record(s string) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	tab.problems = append(tab.problems, s)
	close(tab.changed)
	tab.changed = make(chan struct{})
}

// WaitCSPViolations waits until the tab has reported at least n CSP violations (they arrive
// after the page's load), for at most Timeout.
func (tab *Tab) WaitCSPViolations(t testing.TB, n int) {
	t.Helper()
	deadline := time.After(Timeout)
	for {
		tab.mu.Lock()
		changed := tab.changed
		tab.mu.Unlock()
		if len(tab.CSPViolations()) >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s's tab: %d CSP violation(s) within %v, want %d; problems: %q", tab.name, len(tab.CSPViolations()), Timeout, n, tab.Problems())
		}
	}
}

// Problems returns what went wrong in the tab so far: console errors (CSP violations among
// them), uncaught exceptions and opened dialogs, in order.
func (tab *Tab) Problems() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.problems...)
}

// Dialogs returns the JavaScript dialogs (alert, confirm, prompt) the page opened, as
// "type: message".
func (tab *Tab) Dialogs() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.dialogs...)
}

// CSPViolations returns the Content Security Policy violations reported in the tab so far.
func (tab *Tab) CSPViolations() []string {
	var out []string
	for _, p := range tab.Problems() {
		if strings.Contains(p, cspMarker) || strings.Contains(p, "Content Security Policy") {
			out = append(out, p)
		}
	}
	return out
}

// NoProblems fails t with every problem recorded in the tab (see Problems) except those that
// contain one of the expected strings (e.g. "status of 401" for the API's refusal of a page
// loaded before signing in, which the browser logs as an error).
func (tab *Tab) NoProblems(t testing.TB, expected ...string) {
	t.Helper()
	var ps []string
	for _, p := range tab.Problems() {
		if !slices.ContainsFunc(expected, func(e string) bool { return strings.Contains(p, e) }) {
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		t.Errorf("%s's tab: %d problem(s) in the page:\n  %s", tab.name, len(ps), strings.Join(ps, "\n  "))
	}
}

// Do runs chromedp actions in the tab, each wait bounded by Timeout, and fails t on error.
func (tab *Tab) Do(t testing.TB, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.Ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s's tab: %v%s", tab.name, err, tab.where(t))
	}
}

// Run runs one chromedp action that returns a value, bounded by Timeout; it fails t on error.
func Run[T any](t testing.TB, tab *Tab, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.Ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("%s's tab: %v%s", tab.name, err, tab.where(t))
	}
	return v
}

// where describes the tab's page for a failure message: its URL and the start of its text.
func (tab *Tab) where(t testing.TB) string {
	ctx, cancel := context.WithTimeout(tab.Ctx, 5*time.Second)
	defer cancel()
	url, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	if len(text) > 2000 {
		text = text[:2000] + "…"
	}
	return fmt.Sprintf("\n  page %s says:\n%s\n  problems: %q", url, text, tab.Problems())
}

// InitScript installs JavaScript that runs in every document the tab loads from now on, before
// the page's own scripts (Page.addScriptToEvaluateOnNewDocument; the page's CSP does not
// govern it). Benchmarks use it to time the page from the browser's side.
func (tab *Tab) InitScript(t testing.TB, source string) {
	t.Helper()
	if _, err := chromedp.Call(tab.Ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: source}); err != nil {
		t.Fatalf("%s's tab: installing a script: %v", tab.name, err)
	}
}

// HoldRequests leaves every request of the tab whose URL matches pattern (Chromium's
// wildcards: * for any run of characters, ? for one) unanswered from now on, as a proxy that
// buffers a streamed response holds it: the page waits and shows no error. A test uses it to
// see a page whose live updates (a WatchApproval stream) have not arrived yet.
func (tab *Tab) HoldRequests(t testing.TB, pattern string) {
	t.Helper()
	if _, err := chromedp.Call(tab.Ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern, RequestStage: fetch.RequestStageRequest}}}); err != nil {
		t.Fatalf("%s's tab: holding the requests of %s: %v", tab.name, pattern, err)
	}
}

// Navigate loads url in the tab and waits for its load event.
func (tab *Tab) Navigate(t testing.TB, url string) {
	t.Helper()
	tab.Do(t, chromedp.Navigate(url))
}

// WaitFor waits until the JavaScript expression is truthy in the page, for at most Timeout;
// what names the condition in the failure. It evaluates the expression every 50 ms in the
// tab's current document, so it keeps waiting across navigations (a sign-in's redirects).
func (tab *Tab) WaitFor(t testing.TB, what, expression string) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	var last error
	for {
		ctx, cancel := context.WithTimeout(tab.Ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!(`+expression+`)`))
		cancel()
		if err == nil && ok {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) || tab.Ctx.Err() != nil {
			t.Fatalf("%s's tab: no %s within %v (%s; last error: %v)%s", tab.name, what, Timeout, expression, last, tab.where(t))
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-tab.Ctx.Done():
		}
	}
}

// WaitText waits until the page's visible text contains s.
func (tab *Tab) WaitText(t testing.TB, s string) {
	t.Helper()
	tab.WaitFor(t, fmt.Sprintf("the text %q", s), fmt.Sprintf(`document.body && document.body.innerText.includes(%s)`, JSString(s)))
}

// Text returns the page's visible text (document.body.innerText).
func (tab *Tab) Text(t testing.TB) string {
	t.Helper()
	return Run(t, tab, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
}

// Eval evaluates a JavaScript expression in the page and decodes its JSON value into T.
func Eval[T any](t testing.TB, tab *Tab, expression string) T {
	t.Helper()
	return Run(t, tab, chromedp.Evaluate[T](expression, chromedp.EvalAwaitPromise))
}

// Click clicks the first element matching the CSS selector, once it is visible.
func (tab *Tab) Click(t testing.TB, selector string) {
	t.Helper()
	tab.Do(t, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible))
}

// Fill types value into the form field matching the CSS selector, once it is visible.
func (tab *Tab) Fill(t testing.TB, selector, value string) {
	t.Helper()
	tab.Do(t, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible), chromedp.SendKeys(chromedp.CSS(selector), value))
}

// TabTo presses Tab (as a keyboard user does) until the focused element matches the CSS
// selector, at most 50 times, and fails t if it never does.
func (tab *Tab) TabTo(t testing.TB, selector string) {
	t.Helper()
	focused := `(() => { const e = document.activeElement; return !!e && e.matches(` + JSString(selector) + `); })()`
	for range 50 {
		if Eval[bool](t, tab, focused) {
			return
		}
		tab.Do(t, chromedp.KeyEvent("\t"))
	}
	t.Fatalf("%s's tab: 50 presses of Tab never reached %s%s", tab.name, selector, tab.where(t))
}

// Type types text with the keyboard into the focused element.
func (tab *Tab) Type(t testing.TB, text string) {
	t.Helper()
	tab.Do(t, chromedp.KeyEvent(text))
}

// Cookie returns the value of the tab's cookie named name for url, or "" when it has none.
// Tests use it to make requests by hand with a person's session, as a script would.
func (tab *Tab) Cookie(t testing.TB, url, name string) string {
	t.Helper()
	res, err := chromedp.Call(tab.Ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	if err != nil {
		t.Fatalf("%s's tab: reading cookies: %v", tab.name, err)
	}
	for _, c := range res.Cookies {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// Screenshot writes a PNG of the whole page to path (creating its folder).
func (tab *Tab) Screenshot(t testing.TB, path string) {
	t.Helper()
	png := Run(t, tab, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// AxePath returns the path of axe-core's axe.min.js installed by `npm ci` in this package's
// folder, or an error saying how to install it.
func AxePath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate internal/browsertest (built with -trimpath?)")
	}
	dir := filepath.Dir(file)
	p := filepath.Join(dir, "node_modules", "axe-core", "axe.min.js")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("axe-core is not installed: run `npm ci` in %s", dir)
	}
	return p, nil
}

// RequireAxe skips t when axe-core is not installed (see AxePath).
func RequireAxe(t testing.TB) {
	t.Helper()
	if _, err := AxePath(); err != nil {
		t.Skip(err.Error())
	}
}

// AxeViolation is one rule axe-core found broken on a page, with the elements that break it.
type AxeViolation struct {
	ID      string `json:"id"`
	Impact  string `json:"impact"`
	Help    string `json:"help"`
	HelpURL string `json:"helpUrl"`
	Nodes   []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// Axe runs axe-core (WCAG 2 A and AA rules and axe's best practices) on the tab's current page
// and returns its violations. axe is injected through the DevTools protocol
// (Runtime.evaluate), which the page's Content-Security-Policy does not govern, so the page
// needs no exception for it. It skips t when axe-core is not installed.
func (tab *Tab) Axe(t testing.TB) []AxeViolation {
	t.Helper()
	p, err := AxePath()
	if err != nil {
		t.Skip(err.Error())
	}
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	Run(t, tab, chromedp.Evaluate[chromedp.Void](string(src)))
	return Eval[[]AxeViolation](t, tab, `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations)`)
}

// Accessible fails t when axe-core finds a serious or critical violation on the tab's page,
// listing each with its elements; what names the page.
func (tab *Tab) Accessible(t testing.TB, what string) {
	t.Helper()
	var bad []string
	for _, v := range tab.Axe(t) {
		if v.Impact != "serious" && v.Impact != "critical" {
			t.Logf("%s: axe %s violation %s: %s", what, v.Impact, v.ID, v.Help)
			continue
		}
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprintf("%v: %s", n.Target, strings.ReplaceAll(n.Summary, "\n", " ")))
		}
		bad = append(bad, fmt.Sprintf("%s (%s): %s — %s\n    %s", v.ID, v.Impact, v.Help, v.HelpURL, strings.Join(where, "\n    ")))
	}
	if len(bad) > 0 {
		t.Errorf("%s: axe-core found %d serious or critical accessibility violation(s):\n  %s", what, len(bad), strings.Join(bad, "\n  "))
	}
}

// JSString quotes s as a JavaScript string literal, for building expressions for WaitFor and
// Eval from test data.
func JSString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
