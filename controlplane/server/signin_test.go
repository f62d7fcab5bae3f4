package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/auth/authtest"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// Tokens of the sign-in tests' auth file.
const (
	execToken   = "exec-token-0123456789abcdef"
	aliceToken  = "alice-token-0123456789abcdef"
	viewerToken = "vera-token-0123456789abcdef"
)

const signInAuthFile = "exec executor " + execToken + "\nalice approver " + aliceToken + " groups=sre\nvera viewer " + viewerToken + "\n"

// consoleServer is a control plane over a SQLite file, served by httptest, with the
// fake OIDC issuer and fake GitHub as its sign-in providers.
type consoleServer struct {
	URL string
	srv *httptest.Server
	h   *server.Server
	st  *store.Store
	iss *authtest.Issuer
	gh  *ghfake.Server
}

// consoleOptions says how to start a consoleServer.
type consoleOptions struct {
	db  string // SQLite path; "" makes a new one
	tls bool
	iss *authtest.Issuer // nil: a new issuer
	gh  *ghfake.Server   // nil: a new fake GitHub
	// opts replaces the default options (auth file and sign-in config) when set.
	opts *server.Options
	// publicURL is the public URL replicas behind one balancer share; "" means this server's.
	publicURL string
	// authFile replaces signInAuthFile in the default options when set.
	authFile string
	// configure, when set, changes the default options (a people directory, a gate policy).
	configure func(*server.Options)
}

func startConsole(t *testing.T, o consoleOptions) *consoleServer {
	t.Helper()
	if o.db == "" {
		o.db = filepath.Join(t.TempDir(), "cp.db")
	}
	if o.iss == nil {
		o.iss = authtest.NewIssuer(t)
	}
	if o.gh == nil {
		o.gh = ghfake.New(t, 1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http://"
	if o.tls {
		scheme = "https://"
	}
	cs := &consoleServer{URL: scheme + ln.Addr().String(), iss: o.iss, gh: o.gh}
	var opts server.Options
	if o.opts != nil {
		opts = *o.opts
	} else {
		if o.authFile == "" {
			o.authFile = signInAuthFile
		}
		a, err := server.ParseAuth(strings.NewReader(o.authFile), "auth.txt")
		if err != nil {
			t.Fatal(err)
		}
		yml := "session_ttl: 12h\nproviders:\n" +
			o.iss.SignInConfigYAML(t, "okta", "OKTA_SECRET", "      - email_domain: example.com\n        role: viewer\n      - group: sre\n        role: approver\n        groups: [sre]\n") +
			o.gh.SignInConfigYAML("github", "GH_SECRET", "      - github_org: octo-org\n        role: viewer\n      - github_team: octo-org/sre\n        role: approver\n")
		env := map[string]string{"OKTA_SECRET": authtest.ClientSecret, "GH_SECRET": ghfake.OAuthClientSecret}
		sc, err := auth.ParseSignInConfig([]byte(yml), "signin.yaml", func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		opts = server.Options{Auth: a, SignIn: sc}
		if o.configure != nil {
			o.configure(&opts)
		}
	}
	opts.Secret, opts.Logger, opts.PublicURL = []byte(testSecret), slog.New(slog.DiscardHandler), cs.URL
	if o.publicURL != "" {
		opts.PublicURL = o.publicURL
	}
	st, err := store.Open(context.Background(), o.db)
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.New(st, opts)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	cs.h, cs.st = h, st
	cs.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	if o.tls {
		cs.srv.StartTLS()
	} else {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true) // the executor's gRPC-style client speaks h2c
		cs.srv.Config.Protocols = &p
		cs.srv.Start()
	}
	t.Cleanup(cs.stop)
	return cs
}

// stop closes the server and its store (again: a no-op).
func (cs *consoleServer) stop() {
	if cs.srv == nil {
		return
	}
	cs.srv.CloseClientConnections()
	cs.srv.Close()
	cs.h.Close()
	cs.st.Close()
	cs.srv = nil
}

// browser is an HTTP client with a cookie jar that does not follow redirects by itself
// (follow does), like a browser's network stack seen one hop at a time.
func (cs *consoleServer) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if cs.srv != nil && cs.srv.TLS != nil {
		c.Transport = cs.srv.Client().Transport
	}
	return c
}

// follow GETs u and follows redirects (at most 10), returning every response in order; the
// bodies are read and closed.
func follow(t *testing.T, c *http.Client, u string) []*http.Response {
	t.Helper()
	var out []*http.Response
	for range 10 {
		res, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		out = append(out, res)
		loc, err := res.Location()
		if err != nil {
			return out
		}
		u = loc.String()
	}
	t.Fatalf("more than 10 redirects from %s", u)
	return nil
}

// responseFor is the response to the first request whose path starts with prefix.
func responseFor(t *testing.T, rs []*http.Response, prefix string) *http.Response {
	t.Helper()
	for _, r := range rs {
		if strings.HasPrefix(r.Request.URL.Path, prefix) {
			return r
		}
	}
	t.Fatalf("no request to %s among the redirects", prefix)
	return nil
}

func (cs *consoleServer) identity(c *http.Client) rbookv1connect.IdentityServiceClient {
	return rbookv1connect.NewIdentityServiceClient(c, cs.URL)
}

func (cs *consoleServer) approvals(c *http.Client) rbookv1connect.ApprovalServiceClient {
	return rbookv1connect.NewApprovalServiceClient(c, cs.URL)
}

// executor is the auth file's executor over Connect.
func (cs *consoleServer) executor() clients {
	hc := h2cClient()
	if cs.srv.TLS != nil {
		hc = cs.srv.Client()
	}
	opt := withBearer(execToken)
	return clients{runs: rbookv1connect.NewRunServiceClient(hc, cs.URL, opt), apps: rbookv1connect.NewApprovalServiceClient(hc, cs.URL, opt)}
}

func whoAmI(t *testing.T, cs *consoleServer, c *http.Client) *rbookv1.WhoAmIResponse {
	t.Helper()
	res, err := cs.identity(c).WhoAmI(context.Background(), &rbookv1.WhoAmIRequest{})
	if err != nil {
		t.Fatalf("WhoAmI: %v", err)
	}
	return res
}

// tokenSignIn posts token to /auth/token as a form and returns the response.
func tokenSignIn(t *testing.T, cs *consoleServer, c *http.Client, token string) *http.Response {
	t.Helper()
	res, err := c.PostForm(cs.URL+"/auth/token", url.Values{"token": {token}, "return": {"/runs"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

func sessionCookie(t *testing.T, res *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range res.Cookies() {
		if strings.HasSuffix(c.Name, "rbook_session") && c.Value != "" {
			return c
		}
	}
	t.Fatalf("%s %s set no session cookie (Set-Cookie %q)", res.Request.Method, res.Request.URL.Path, res.Header.Values("Set-Cookie"))
	return nil
}

func TestOIDCSignInWithPKCEStartsASessionAndReturnsToThePage(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	b := cs.browser(t)
	rs := follow(t, b, cs.URL+"/auth/login/okta?return="+url.QueryEscape("/approvals/A1?tab=plan"))
	auth := responseFor(t, rs, "/authorize")
	if q := auth.Request.URL.Query(); q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		t.Fatalf("authorization request %s: want PKCE S256, a nonce and a state", auth.Request.URL)
	}
	if strings.Contains(auth.Request.URL.RawQuery, "code_verifier") {
		t.Fatal("the PKCE verifier travelled in the authorization URL")
	}
	cb := responseFor(t, rs, "/auth/callback/okta")
	c := sessionCookie(t, cb)
	if c.Name != "rbook_session" || !c.HttpOnly || c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
		t.Errorf("session cookie over http = %+v; want rbook_session, HttpOnly, SameSite=Lax, Path=/, not Secure", c)
	}
	if last := rs[len(rs)-1]; last.Request.URL.Path != "/approvals/A1" || last.Request.URL.RawQuery != "tab=plan" {
		t.Errorf("after sign-in the browser is at %s, want /approvals/A1?tab=plan", last.Request.URL)
	}
	if n := cs.iss.TokenRefusals(); n != 0 {
		t.Errorf("the issuer refused %d token requests; the code exchange must carry the PKCE verifier", n)
	}
	who := whoAmI(t, cs, b)
	if who.GetIdentity() != "oidc:alice@example.com" || who.GetDisplayName() != "Alice Example" || strings.Join(who.GetRoles(), ",") != "approver" ||
		who.GetMethod() != "session" || !who.GetAuthEnabled() {
		t.Errorf("WhoAmI = %v; want oidc:alice@example.com, Alice Example, approver (group sre), method session", who)
	}
	if left := time.Until(who.GetSessionExpiresAt().AsTime()); left < 11*time.Hour || left > 12*time.Hour {
		t.Errorf("session expires in %s, want about 12h (session_ttl)", left)
	}
}

// issuerCallback starts an OIDC sign-in with b and returns the callback URL (code and
// state) the issuer redirected to, without visiting it.
func issuerCallback(t *testing.T, cs *consoleServer, b *http.Client) *url.URL {
	t.Helper()
	u := cs.URL + "/auth/login/okta"
	for range 2 {
		res, err := b.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		loc, err := res.Location()
		if err != nil {
			t.Fatalf("GET %s: %d without a redirect", u, res.StatusCode)
		}
		u = loc.String()
	}
	cb, _ := url.Parse(u)
	return cb
}

func TestOIDCCodeWithoutItsVerifierIsRefusedByTheIssuer(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	b := cs.browser(t)
	cb := issuerCallback(t, cs, b)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")}, "redirect_uri": {cs.URL + "/auth/callback/okta"},
		"client_id": {authtest.ClientID}, "client_secret": {authtest.ClientSecret}}
	tok, err := http.PostForm(cs.iss.URL+"/token", form)
	if err != nil {
		t.Fatal(err)
	}
	tok.Body.Close()
	if tok.StatusCode != http.StatusBadRequest || cs.iss.TokenRefusals() != 1 {
		t.Fatalf("token request without code_verifier: %d, refusals %d; want 400 and 1", tok.StatusCode, cs.iss.TokenRefusals())
	}
}

func TestSignInCallbackWithAnotherStateIsRefused(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	b := cs.browser(t)
	cb := issuerCallback(t, cs, b)
	q := cb.Query()
	q.Set("state", "forged-state-of-another-sign-in")
	cb.RawQuery = q.Encode()
	res, err := b.Get(cb.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "start again") {
		t.Fatalf("callback with another state: %d %q; want 400 saying to start again", res.StatusCode, body)
	}
	for _, c := range res.Cookies() {
		if strings.HasSuffix(c.Name, "rbook_session") {
			t.Fatalf("a session cookie was set for a forged state: %v", c)
		}
	}
	if who := whoAmI(t, cs, b); who.GetIdentity() != "" {
		t.Fatalf("WhoAmI after a refused sign-in = %v, want anonymous", who)
	}
}

func TestSignInReturnPathStaysOnThisServer(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	for _, ret := range []string{"https://evil.example/steal", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"} {
		rs := follow(t, cs.browser(t), cs.URL+"/auth/login/okta?return="+url.QueryEscape(ret))
		last := rs[len(rs)-1].Request.URL
		if last.Host != strings.TrimPrefix(cs.URL, "http://") || last.Path != "/" {
			t.Errorf("return=%q: the browser ended at %s, want %s/", ret, last, cs.URL)
		}
	}
}

func TestGitHubSignInGivesGitHubIdentityAndTeamRole(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	for _, c := range []struct {
		user     ghfake.OAuthUser
		identity string
		role     string
	}{
		{ghfake.OAuthUser{Login: "hubot", Name: "Hubot", ID: 2, Orgs: []string{"octo-org"}, Teams: []string{"octo-org/sre"}}, "github:hubot", "approver"},
		{ghfake.OAuthUser{Login: "monalisa", ID: 3, Orgs: []string{"octo-org"}}, "github:monalisa", "viewer"},
	} {
		cs.gh.SetOAuthUser(c.user)
		b := cs.browser(t)
		rs := follow(t, b, cs.URL+"/auth/login/github?return=/runs")
		authz := responseFor(t, rs, "/login/oauth/authorize")
		if authz.Request.URL.Query().Get("code_challenge_method") != "S256" {
			t.Errorf("GitHub authorization request %s: want a PKCE S256 challenge", authz.Request.URL)
		}
		if last := rs[len(rs)-1].Request.URL.Path; last != "/runs" {
			t.Errorf("%s: after sign-in the browser is at %s, want /runs", c.user.Login, last)
		}
		who := whoAmI(t, cs, b)
		if who.GetIdentity() != c.identity || strings.Join(who.GetRoles(), ",") != c.role || who.GetMethod() != "session" {
			t.Errorf("%s: WhoAmI = %v; want %s with role %s", c.user.Login, who, c.identity, c.role)
		}
	}
	cs.gh.SetOAuthUser(ghfake.OAuthUser{Login: "stranger", ID: 4})
	b := cs.browser(t)
	rs := follow(t, b, cs.URL+"/auth/login/github")
	if cb := responseFor(t, rs, "/auth/callback/github"); cb.StatusCode != http.StatusForbidden {
		t.Errorf("a GitHub account in no configured org: callback answered %d, want 403", cb.StatusCode)
	}
	if who := whoAmI(t, cs, b); who.GetIdentity() != "" {
		t.Errorf("WhoAmI of a refused GitHub account = %v, want anonymous", who)
	}
}

func TestTokenSignInRefusesWrongTokensAndNeverEchoesThem(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	b := cs.browser(t)
	for _, c := range []struct {
		name, token string
		status      int
	}{
		{"a token not in the auth file", "not-a-token-of-this-file-0123456789", http.StatusUnauthorized},
		{"an executor token", execToken, http.StatusForbidden},
	} {
		res, err := b.PostForm(cs.URL+"/auth/token", url.Values{"token": {c.token}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.status || strings.Contains(string(body), c.token) || len(res.Cookies()) != 0 {
			t.Errorf("%s: %d %q, cookies %v; want %d, no echo of the token, no cookie", c.name, res.StatusCode, body, res.Cookies(), c.status)
		}
	}
	res, err := b.Post(cs.URL+"/auth/token?token="+aliceToken, "application/x-www-form-urlencoded", strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("token in the query string: %d, want 400", res.StatusCode)
	}
	res, err = b.Post(cs.URL+"/auth/token", "application/json", strings.NewReader(`{"token":"`+aliceToken+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"identity":"alice"`) || strings.Contains(string(body), aliceToken) {
		t.Fatalf("JSON token sign-in: %d %s; want 200 naming alice without the token", res.StatusCode, body)
	}
	if who := whoAmI(t, cs, b); who.GetIdentity() != "alice" || who.GetMethod() != "session" {
		t.Errorf("WhoAmI after token sign-in = %v, want alice by session", who)
	}
}

func TestViewerSessionCallingApproveIsDeniedAndApproverSessionIsRecorded(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	ex := cs.executor()
	startRun(t, ex, "R-console")
	a, _ := gate(t, ex, "R-console", time.Hour)
	viewer := cs.browser(t)
	tokenSignIn(t, cs, viewer, viewerToken)
	_, err := cs.approvals(viewer).Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: a.GetApprovalId()})
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	approver := cs.browser(t)
	tokenSignIn(t, cs, approver, aliceToken)
	res, err := cs.approvals(approver).Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: a.GetApprovalId(), Reason: "looked at the plan"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetApproval(); got.GetApprover() != "alice" || got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		t.Errorf("approval by alice's session = %v, want APPROVED by alice", got)
	}
}

func TestSessionSurvivesRestartAndSignOutEndsIt(t *testing.T) {
	db := filepath.Join(t.TempDir(), "cp.db")
	iss, gh := authtest.NewIssuer(t), ghfake.New(t, 1)
	first := startConsole(t, consoleOptions{db: db, iss: iss, gh: gh})
	b := first.browser(t)
	cookie := sessionCookie(t, tokenSignIn(t, first, b, aliceToken))
	first.stop()

	second := startConsole(t, consoleOptions{db: db, iss: iss, gh: gh})
	if who := whoAmI(t, second, b); who.GetIdentity() != "alice" {
		t.Fatalf("WhoAmI after a restart = %v, want alice (the session is in the database)", who)
	}
	res, err := b.Post(second.URL+"/auth/logout", "application/x-www-form-urlencoded", strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d, want 303", res.StatusCode)
	}
	if who := whoAmI(t, second, b); who.GetIdentity() != "" {
		t.Errorf("WhoAmI after sign-out = %v, want anonymous", who)
	}
	// The cookie's value replayed after sign-out is refused.
	replay := &http.Client{Transport: headerTransport{"Cookie": cookie.Name + "=" + cookie.Value}}
	_, err = second.approvals(replay).GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: "A-none"})
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
}

func TestExpiredSessionIsRefused(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	id := "an-expired-session-id-0123456789abcdefghij"
	sum := sha256.Sum256([]byte(id))
	if err := cs.st.CreateSession(context.Background(), store.Session{IDHash: hex.EncodeToString(sum[:]), Identity: "alice", Role: "approver",
		Method: "token", CreatedAt: time.Now().Add(-13 * time.Hour), ExpiresAt: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: headerTransport{"Cookie": "rbook_session=" + id}}
	if who := whoAmI(t, cs, c); who.GetIdentity() != "" {
		t.Errorf("WhoAmI with an expired session = %v, want anonymous", who)
	}
	_, err := cs.approvals(c).ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{})
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	if !strings.Contains(err.Error(), "sign in again") {
		t.Errorf("expired session refusal %q; want it to say to sign in again", err)
	}
}

func TestSessionCookieIsSecureAndHostPrefixedOverTLS(t *testing.T) {
	cs := startConsole(t, consoleOptions{tls: true})
	b := cs.browser(t)
	c := sessionCookie(t, tokenSignIn(t, cs, b, aliceToken))
	if c.Name != "__Host-rbook_session" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" {
		t.Errorf("session cookie over TLS = %+v; want __Host-rbook_session, Secure, HttpOnly, SameSite=Lax, Path=/, no Domain", c)
	}
	if who := whoAmI(t, cs, b); who.GetIdentity() != "alice" {
		t.Errorf("WhoAmI over TLS = %v, want alice", who)
	}
}

func TestCrossOriginPostIsRefused(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	for _, path := range []string{"/" + rbookv1connect.ApprovalServiceName + "/Approve", "/auth/token", "/auth/logout"} {
		req, _ := http.NewRequest(http.MethodPost, cs.URL+path, strings.NewReader(`{"approvalId":"A1"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("cross-origin POST %s: %d, want 403", path, res.StatusCode)
		}
	}
	// The same request from the page's own origin reaches the API (and is refused there for
	// want of credentials, not by the cross-origin check).
	req, _ := http.NewRequest(http.MethodPost, cs.URL+"/"+rbookv1connect.ApprovalServiceName+"/Approve", strings.NewReader(`{"approvalId":"A1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", cs.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("same-origin POST without a session: %d, want 401 from the API", res.StatusCode)
	}
}

func TestWhoAmIAnswersAnonymousCallersWithTheWaysToSignIn(t *testing.T) {
	cs := startConsole(t, consoleOptions{})
	who := whoAmI(t, cs, &http.Client{})
	var ids []string
	for _, p := range who.GetSignInProviders() {
		ids = append(ids, p.GetId()+"/"+p.GetKind())
	}
	if who.GetIdentity() != "" || who.GetMethod() != "" || !who.GetAuthEnabled() || who.GetPublicUrl() != cs.URL ||
		strings.Join(ids, " ") != "okta/oidc github/github token/token" {
		t.Errorf("anonymous WhoAmI = %v; want no identity, auth enabled, public URL %s, providers okta, github, token", who, cs.URL)
	}
	bearer := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + execToken}}
	if who := whoAmI(t, cs, bearer); who.GetIdentity() != "exec" || who.GetMethod() != "token" || strings.Join(who.GetRoles(), ",") != "executor" {
		t.Errorf("WhoAmI with a bearer token = %v, want exec, executor, method token", who)
	}
}

func TestLocalPersonOnTheEmbeddedControlPlaneDecidesAsUnverifiedOSUser(t *testing.T) {
	cs := startConsole(t, consoleOptions{opts: &server.Options{LocalApprover: []byte("local-approver-key-0123456789abcdef"), LocalPerson: "ada"}})
	ex := newClients(cs.URL)
	startRun(t, ex, "R-laptop")
	a, _ := gate(t, ex, "R-laptop", time.Hour)
	page := &http.Client{Transport: headerTransport{"Sec-Fetch-Site": "same-origin", "Origin": cs.URL}}
	who := whoAmI(t, cs, page)
	if who.GetIdentity() != "unverified:ada" || who.GetMethod() != "local" || who.GetAuthEnabled() {
		t.Errorf("WhoAmI from the page = %v; want unverified:ada, method local, auth off", who)
	}
	res, err := cs.approvals(page).Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: a.GetApprovalId(), Approver: "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetApproval().GetApprover(); got != "unverified:ada" {
		t.Errorf("approval from the page recorded %q, want unverified:ada (the OS user, not a name the request asserts)", got)
	}
	rebound := &http.Client{Transport: headerTransport{"Sec-Fetch-Site": "same-origin", "Host": "rebind.evil.example"}}
	_, err = cs.identity(rebound).WhoAmI(context.Background(), &rbookv1.WhoAmIRequest{})
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodePermissionDenied {
		t.Errorf("a request with a non-loopback Host: %v, want it refused with 403", err)
	}
}

// headerTransport sets fixed headers on every request ("Host" sets the request's Host).
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestSignInStartedOnOneReplicaFinishesOnAnother: the sign-in in progress is a sealed cookie
// under a key derived from the shared approval secret, so a replica that did not start the
// sign-in finishes it (replicas behind a balancer share RBOOK_APPROVAL_SECRET).
func TestSignInStartedOnOneReplicaFinishesOnAnother(t *testing.T) {
	iss, gh := authtest.NewIssuer(t), ghfake.New(t, 1)
	a := startConsole(t, consoleOptions{iss: iss, gh: gh})
	b := startConsole(t, consoleOptions{iss: iss, gh: gh, publicURL: a.URL})
	br := a.browser(t)
	cb := issuerCallback(t, a, br)
	cb.Host = strings.TrimPrefix(b.URL, "http://") // the balancer sends the callback to b
	rs := follow(t, br, cb.String())
	if rs[0].StatusCode != http.StatusSeeOther {
		t.Fatalf("callback on the other replica: %d, want 303 to the return path", rs[0].StatusCode)
	}
	if who := whoAmI(t, b, br); who.GetIdentity() != "oidc:alice@example.com" {
		t.Errorf("WhoAmI on the replica that finished the sign-in = %v, want oidc:alice@example.com", who)
	}
}

// TestSessionWorksOnEveryPostgreSQLReplica: a session started on replica A is honoured by
// replica B over the same PostgreSQL database, and signing out on B ends it on A.
func TestSessionWorksOnEveryPostgreSQLReplica(t *testing.T) {
	dsn := newPGDatabase(t)
	iss, gh := authtest.NewIssuer(t), ghfake.New(t, 1)
	a := startConsole(t, consoleOptions{db: dsn, iss: iss, gh: gh})
	b := startConsole(t, consoleOptions{db: dsn, iss: iss, gh: gh})
	br := a.browser(t)
	tokenSignIn(t, a, br, aliceToken)
	if who := whoAmI(t, b, br); who.GetIdentity() != "alice" {
		t.Fatalf("WhoAmI on replica B = %v, want alice (signed in on A)", who)
	}
	res, err := br.Post(b.URL+"/auth/logout", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if who := whoAmI(t, a, br); who.GetIdentity() != "" {
		t.Errorf("WhoAmI on A after signing out on B = %v, want anonymous", who)
	}
}
