package browsertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// strictCSP is the kind of policy the console is served with: scripts only from the origin.
const strictCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

func cspPage(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", strictCSP)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>t</title></head><body><main><h1>Test</h1>%s</main></body></html>`, body)
	}
}

func server(t *testing.T) string {
	mux := http.NewServeMux()
	mux.Handle("/inline", cspPage(`<p id="x">text</p><script>window.ran = true; alert('inline ran')</script><img src="/none" onerror="alert('onerror ran')" alt="">`))
	mux.Handle("/clean", cspPage(`<p id="x">text</p><script src="/ready.js"></script>`))
	mux.HandleFunc("/ready.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `document.body.dataset.ready = "1";`)
	})
	mux.Handle("/noalt", cspPage(`<img src="/ready.js" width="10" height="10"><button></button>`))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestTabReportsInlineScriptBlockedByTheCSPAndNoDialogOpens: under a strict policy an inline
// script and an inline event handler do not run; the tab reports each as a CSP violation and
// no dialog opens.
func TestTabReportsInlineScriptBlockedByTheCSPAndNoDialogOpens(t *testing.T) {
	b := Start(t)
	tab := b.Person(t, "tester").Tab(t)
	url := server(t)
	tab.Navigate(t, url+"/inline")
	tab.WaitText(t, "text")
	if ran := Eval[bool](t, tab, `window.ran === true`); ran {
		t.Fatal("the inline script ran under script-src 'self'")
	}
	if d := tab.Dialogs(); len(d) != 0 {
		t.Fatalf("dialogs opened: %q", d)
	}
	// The violations are reported asynchronously; wait for both (the script, the handler).
	tab.WaitCSPViolations(t, 2)
	if v := tab.CSPViolations(); len(v) < 2 || !strings.Contains(strings.Join(v, "\n"), "script-src") {
		t.Fatalf("CSP violations %q, want the inline script and the inline handler refused by script-src", v)
	}
}

// TestTabHasNoProblemsOnACleanPage: a page whose script comes from its origin runs it and
// reports nothing.
func TestTabHasNoProblemsOnACleanPage(t *testing.T) {
	b := Start(t)
	tab := b.Person(t, "tester").Tab(t)
	tab.Navigate(t, server(t)+"/clean")
	tab.WaitFor(t, "the ready marker", `document.body.dataset.ready === "1"`)
	tab.NoProblems(t)
	tab.Screenshot(t, filepath.Join(t.TempDir(), "clean.png"))
}

// TestAxeRunsUnderTheStrictCSPAndFindsViolations: axe-core injected through the DevTools
// protocol runs despite script-src 'self', finds nothing serious on a clean page and finds an
// image without alternative text and a button without a name on a bad one.
func TestAxeRunsUnderTheStrictCSPAndFindsViolations(t *testing.T) {
	RequireAxe(t)
	b := Start(t)
	tab := b.Person(t, "tester").Tab(t)
	url := server(t)
	tab.Navigate(t, url+"/clean")
	tab.Accessible(t, "the clean page")
	tab.Navigate(t, url+"/noalt")
	ids := map[string]string{}
	for _, v := range tab.Axe(t) {
		ids[v.ID] = v.Impact
	}
	if ids["image-alt"] != "critical" || ids["button-name"] != "critical" {
		t.Fatalf("axe violations %v, want image-alt and button-name (critical)", ids)
	}
	tab.NoProblems(t)
}

// TestPeopleHaveSeparateCookies: each Person has its own cookie jar; tabs of one person share it.
func TestPeopleHaveSeparateCookies(t *testing.T) {
	b := Start(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/set", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "s", Value: "alice", Path: "/", HttpOnly: true})
		fmt.Fprint(w, "set")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	alice, bob := b.Person(t, "alice"), b.Person(t, "bob")
	a1 := alice.Tab(t)
	a1.Navigate(t, srv.URL+"/set")
	if got := alice.Tab(t).Cookie(t, srv.URL, "s"); got != "alice" {
		t.Fatalf("alice's second tab has cookie %q, want alice", got)
	}
	if got := bob.Tab(t).Cookie(t, srv.URL, "s"); got != "" {
		t.Fatalf("bob has alice's cookie %q", got)
	}
}

// TestHeldRequestsNeverReachTheServerWhileOthersAreAnswered: after HoldRequests, the page's
// fetch of a matching URL stays pending and never reaches the server, while its fetch of
// another URL of the same origin is answered.
func TestHeldRequestsNeverReachTheServerWhileOthersAreAnswered(t *testing.T) {
	b := Start(t)
	var mu sync.Mutex
	hits := map[string]int{}
	mux := http.NewServeMux()
	mux.Handle("/page", cspPage(`<p>text</p><script src="/fetch.js"></script>`))
	mux.HandleFunc("/fetch.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `fetch("/held").then(() => { document.body.dataset.held = "1"; });
fetch("/free").then(() => { document.body.dataset.free = "1"; });`)
	})
	for _, path := range []string{"/held", "/free"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits[path]++
			mu.Unlock()
			fmt.Fprint(w, "ok")
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tab := b.Person(t, "tester").Tab(t)
	tab.HoldRequests(t, "*/held")
	tab.Navigate(t, srv.URL+"/page")
	tab.WaitFor(t, "the answer of /free", `document.body.dataset.free === "1"`)
	if Eval[bool](t, tab, `document.body.dataset.held === "1"`) {
		t.Error("the held fetch was answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["/held"] != 0 || hits["/free"] != 1 {
		t.Errorf("the server got %v, want /free once and /held never", hits)
	}
	tab.NoProblems(t)
}
