package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/signin"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"google.golang.org/protobuf/proto"
)

// consoleSession is a person signed in to the console of the plain-http control plane at
// base, holding the session cookie the server set, as the person's browser holds it.
type consoleSession struct {
	base   string
	cookie *http.Cookie
}

// consoleSignIn signs in with an auth-file token as the console's sign-in page does
// (docs/console-signin.md, "Endpoints"): POST /auth/token with the token in a JSON body, from
// a page of the same origin. It returns the session the server's Set-Cookie started.
func consoleSignIn(t *testing.T, base, token string) consoleSession {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"token": token, "return": "/"})
	req, err := http.NewRequest("POST", base+"/auth/token", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, out := sameOriginFetch(t, req, base)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("console sign-in with a token: %d %s", resp.StatusCode, out)
	}
	for _, c := range resp.Cookies() {
		if c.Name == signin.SessionCookieHTTP && c.Value != "" {
			return consoleSession{base: base, cookie: c}
		}
	}
	t.Fatalf("console sign-in set no %s cookie (answer %s)", signin.SessionCookieHTTP, out)
	return consoleSession{}
}

// approve sends ApprovalService.Approve by approval id as the console's gate page does: the
// Connect protocol with the binary codec (its transport's useBinaryFormat), the session cookie
// and a same-origin browser's fetch headers (docs/console.md, "Security"). It fails t unless
// the server answers 200, and returns the answer.
func (s consoleSession) approve(t *testing.T, approvalID, reason string) *rbookv1.ApproveResponse {
	t.Helper()
	body, err := proto.Marshal(&rbookv1.ApproveRequest{ApprovalId: approvalID, Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", s.base+"/rbook.v1.ApprovalService/Approve", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.AddCookie(s.cookie)
	resp, out := sameOriginFetch(t, req, s.base)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the console's Approve of %s: %d %s", approvalID, resp.StatusCode, out)
	}
	var res rbookv1.ApproveResponse
	if err := proto.Unmarshal(out, &res); err != nil {
		t.Fatalf("the console's Approve of %s: the answer is not an ApproveResponse: %v", approvalID, err)
	}
	return &res
}

// sameOriginFetch sends req with the headers a browser adds to a fetch() made by a page of
// base to base itself — the Origin, and the Fetch Metadata the server's cross-origin
// protection reads — and returns the response with its whole body.
func sameOriginFetch(t *testing.T, req *http.Request, base string) (*http.Response, []byte) {
	t.Helper()
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Sec-Fetch-Mode", "cors")
	req.Header.Set("Sec-Fetch-Dest", "empty")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer of %s: %v", req.URL.Path, err)
	}
	return resp, out
}
