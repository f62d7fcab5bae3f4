package signin

import (
	"testing"
	"time"
)

func TestReturnPathIsALocalPathOrTheConsoleHome(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/approvals/A1", "/approvals/A1"},
		{"/runs?status=waiting&page=2", "/runs?status=waiting&page=2"},
		{"", "/"},
		{"https://evil.example/", "/"},
		{"//evil.example/x", "/"},
		{"/\\evil.example", "/"},
		{"\\\\evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"/runs\r\nSet-Cookie: x=y", "/"},
		{"/auth/logout", "/"},
		{"runs", "/"},
	} {
		if got := localPath(c.in); got != c.want {
			t.Errorf("localPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLoginStateCookieIsSealedAndExpires(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := &Handler{opts: Options{Now: func() time.Time { return now }}, sealKey: deriveKey([]byte("secret-of-this-control-plane-0123"))}
	ls := loginState{Provider: "okta", State: "st", Nonce: "no", Verifier: "ve", Return: "/runs", Expires: now.Add(loginTTL).Unix()}
	v := h.seal(ls, LoginCookieHTTP)
	if got, ok := h.unseal(v, LoginCookieHTTP); !ok || got != ls {
		t.Fatalf("unseal(seal(x)) = %+v, %v; want %+v", got, ok, ls)
	}
	if _, ok := h.unseal(v, LoginCookie); ok {
		t.Error("a value sealed for one cookie name opened under another")
	}
	other := &Handler{opts: h.opts, sealKey: deriveKey([]byte("another-control-plane-secret-0123"))}
	if _, ok := other.unseal(v, LoginCookieHTTP); ok {
		t.Error("a value sealed with one secret opened with another")
	}
	b := []byte(v)
	b[len(b)-2] ^= 1
	if _, ok := h.unseal(string(b), LoginCookieHTTP); ok {
		t.Error("an altered value opened")
	}
	now = now.Add(loginTTL + time.Second)
	if _, ok := h.unseal(v, LoginCookieHTTP); ok {
		t.Error("a login state past its 10 minutes opened")
	}
}
