package auth_test

// Hostile inputs to the OIDC verifier: forged algorithms, odd claims,
// oversized tokens and slow issuers.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/auth/authtest"
)

// handJWT builds a compact JWS from a header and claims; sign makes the signature segment
// from "header.payload".
func handJWT(t *testing.T, header, claims map[string]any, sign func(string) []byte) string {
	t.Helper()
	seg := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	in := seg(header) + "." + seg(claims)
	return in + "." + base64.RawURLEncoding.EncodeToString(sign(in))
}

func breakVerifier(t *testing.T, iss *authtest.Issuer) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(auth.OIDCConfig{Issuers: []string{iss.URL}, Audience: "aud", InsecureHTTPIssuers: true, Rules: mustRules(t)})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func gitHubClaims(iss *authtest.Issuer, aud any) map[string]any {
	c := authtest.Claims()
	now := time.Now()
	c["iss"], c["aud"], c["iat"], c["nbf"], c["exp"] = iss.URL, aud, now.Unix(), now.Unix(), now.Add(5*time.Minute).Unix()
	return c
}

// Tokens that must be refused (alg none, HS256 keyed with the issuer's public key, nbf in
// the future, claims of the wrong type) are refused as *RefusedError; an aud array that holds
// this audience among others is accepted, as OIDC Core 3.1.3.7 says.
func TestOIDCForgedAlgorithmsAndOddClaims(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := breakVerifier(t, iss)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The issuer's public key, as an attacker would fetch it.
	res, err := http.Get(iss.URL + "/.well-known/jwks")
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	der, err := x509.MarshalPKIXPublicKey(set.Keys[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := func(key []byte) func(string) []byte {
		return func(in string) []byte { m := hmac.New(sha256.New, key); m.Write([]byte(in)); return m.Sum(nil) }
	}
	kid := set.Keys[0].KeyID
	good := gitHubClaims(iss, "aud")
	refused := map[string]string{
		"alg none":          handJWT(t, map[string]any{"alg": "none", "typ": "JWT"}, good, func(string) []byte { return []byte("x") }),
		"HS256 with DER":    handJWT(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid}, good, hs(der)),
		"HS256 with PEM":    handJWT(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid}, good, hs(pemKey)),
		"nbf in the future": iss.Mint(t, "aud", map[string]any{"nbf": time.Now().Add(time.Hour).Unix()}),
		"run_id a number":   iss.Mint(t, "aud", map[string]any{"run_id": 1234567890}),
		"repository a list": iss.Mint(t, "aud", map[string]any{"repository": []string{"owner/repo"}}),
		"exp a string":      iss.Mint(t, "aud", map[string]any{"exp": "tomorrow"}),
		"aud without ours":  iss.Mint(t, "aud", map[string]any{"aud": []string{"other", "aud2"}}),
	}
	for name, tok := range refused {
		if c, err := v.Verify(ctx, tok); !errors.As(err, new(*auth.RefusedError)) {
			t.Errorf("%s: Verify = %+v, %v; want *RefusedError", name, c, err)
		} else if strings.Contains(err.Error(), tok) {
			t.Errorf("%s: the refusal quotes the token", name)
		}
	}
	if c, err := v.Verify(ctx, iss.Mint(t, "aud", map[string]any{"aud": []string{"other", "aud"}})); err != nil || c.Repository != "owner/repo" {
		t.Errorf("aud array holding ours: %+v, %v", c, err)
	}
}

// A token of several MB is refused by its size, before it is decoded or sent to go-oidc.
func TestOIDCHugeTokenRefusedBeforeParsing(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := breakVerifier(t, iss)
	tok := iss.Mint(t, "aud", map[string]any{"padding": strings.Repeat("A", 4<<20)})
	start := time.Now()
	_, err := v.Verify(context.Background(), tok)
	var re *auth.RefusedError
	if !errors.As(err, &re) || !strings.Contains(re.Reason, "over the limit of") {
		t.Fatalf("4 MiB token: %v, want a refusal naming the size limit", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing took %v", d)
	}
	if n := iss.JWKSRequests.Load(); n != 0 {
		t.Errorf("the huge token made %d JWKS requests", n)
	}
	// A token just under the cap still gets through the size check (and verifies).
	small := iss.Mint(t, "aud", nil)
	if len(small) > auth.MaxTokenBytes {
		t.Fatalf("a plain token is %d bytes, over MaxTokenBytes %d", len(small), auth.MaxTokenBytes)
	}
	if _, err := v.Verify(context.Background(), small); err != nil {
		t.Fatal(err)
	}
}

// An allowed issuer whose discovery hangs must not stall the tokens of another issuer that
// is already discovered (the verifier must not hold its lock across the network).
func TestOIDCHangingIssuerDoesNotBlockOthers(t *testing.T) {
	good := authtest.NewIssuer(t)
	release := make(chan struct{})
	asked := make(chan struct{}, 10)
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer hung.Close()
	defer close(release)
	v, err := auth.NewVerifier(auth.OIDCConfig{Issuers: []string{good.URL, hung.URL}, Audience: "aud", InsecureHTTPIssuers: true, Rules: mustRules(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), good.Mint(t, "aud", nil)); err != nil {
		t.Fatal(err)
	}
	// A token naming the hung issuer (its signature does not matter: discovery comes first).
	hungTok := handJWT(t, map[string]any{"alg": "RS256", "kid": "k"}, map[string]any{"iss": hung.URL, "aud": "aud"}, func(string) []byte { return []byte("sig") })
	hctx, hcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer hcancel()
	hungDone := make(chan error, 1)
	go func() {
		_, err := v.Verify(hctx, hungTok)
		hungDone <- err
	}()
	<-asked // the hung issuer's discovery is in flight
	start := time.Now()
	if _, err := v.Verify(context.Background(), good.Mint(t, "aud", nil)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a discovered issuer's token waited %v for another issuer's hung discovery", d)
	}
	if err := <-hungDone; !errors.As(err, new(*auth.UnavailableError)) {
		t.Errorf("hung issuer: %v, want *UnavailableError", err)
	}
}
