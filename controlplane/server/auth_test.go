package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/server"
)

// An Authorization header is accepted only as exactly one
// "Bearer <token>" (scheme in any case, one space, the auth file's token and nothing around
// or inside it), over HTTP/2 (which keeps every byte of a value) and HTTP/1.1 alike.
func TestBearerTokenParsedExactly(t *testing.T) {
	p := startServe(t, "--auth-file", writeAuthFile(t))
	const tok = "view-token-0123456789"
	call := func(hc *http.Client, values ...string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, p.URL+"/rbook.v1.RunService/ListRuns", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for _, v := range values {
			req.Header.Add("Authorization", v)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("Authorization %q: %v", values, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	h1 := &http.Client{}
	for _, hc := range []*http.Client{h2cClient(), h1} {
		for _, v := range []string{"Bearer " + tok, "bearer " + tok, "BEARER " + tok} {
			if code := call(hc, v); code != http.StatusOK {
				t.Errorf("%q: HTTP %d, want 200", v, code)
			}
		}
		for _, v := range [][]string{
			{},
			{"Bearer  " + tok},       // two spaces
			{"Bearer\t" + tok},       // a tab
			{"Bearer " + tok + " x"}, // something after the token
			{"Bearer " + tok + "=="}, // padding the auth file's token does not have
			{"Bearer " + tok[:len(tok)-1]},
			{"Bearer " + tok + "\u00a0"}, // a no-break space
			{"Basic " + tok},
			{"Bearer"},
			{"Bearer "},
			{tok},
			{"Bearer " + tok, "Bearer " + tok}, // two headers
		} {
			if code := call(hc, v...); code != http.StatusUnauthorized {
				t.Errorf("%q: HTTP %d, want 401", v, code)
			}
		}
	}
	// HTTP/2 delivers whitespace around a value (HTTP/1.1 strips it before any handler sees
	// it, RFC 9110 section 5.5): it is refused, not trimmed.
	for _, v := range []string{" Bearer " + tok, "Bearer " + tok + " ", "Bearer " + tok + "\t"} {
		if code := call(h2cClient(), v); code != http.StatusUnauthorized {
			t.Errorf("HTTP/2 %q: HTTP %d, want 401", v, code)
		}
	}

	// The auth file holds only tokens a client can send.
	for _, body := range []string{"alice viewer token-0123456789!!", "alice viewer tok=en-0123456789", "alice viewer " + strings.Repeat("a", 4097)} {
		_, err := server.ParseAuth(strings.NewReader(body), "f")
		if err == nil || !strings.HasPrefix(err.Error(), `f:1: the token of "alice" is not a bearer token`) {
			t.Errorf("ParseAuth(%.40q) = %v", body, err)
		}
	}
	if _, err := server.ParseAuth(strings.NewReader("alice viewer A-Za.z_0~9+/token=="), "f"); err != nil {
		t.Errorf("a b64token with padding: %v", err)
	}
}
