package approval

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	testSecret = []byte("0123456789abcdef-test-secret")
	issuedAt   = time.Date(2026, 5, 12, 10, 0, 0, 0, time.UTC)
)

func testClaims() Claims {
	return Claims{RunID: "RBOOK-20260512-demo-a1b2c3d4", NodeID: "approve-deploy", IssuedAt: issuedAt,
		ExpiresAt: issuedAt.Add(15 * time.Minute), Nonce: "apr_0123456789abcdef", PlanDigest: strings.Repeat("ab", 32)}
}

func mustIssue(t *testing.T, c Claims) string {
	t.Helper()
	tok, err := Issue(testSecret, c)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	return tok
}

func TestSecretFromEnv(t *testing.T) {
	long, other := strings.Repeat("s", MinSecretBytes), strings.Repeat("o", 40)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr error
		mention string
	}{
		{"approval secret preferred", map[string]string{EnvApprovalSecret: long, EnvSecret: other}, long, nil, ""},
		{"fallback to RBOOK_SECRET", map[string]string{EnvSecret: other}, other, nil, ""},
		{"none set", map[string]string{}, "", ErrNoSecret, EnvApprovalSecret},
		{"short approval secret does not fall back", map[string]string{EnvApprovalSecret: "q7Zx!", EnvSecret: other}, "", ErrWeakSecret, EnvApprovalSecret},
		{"short fallback", map[string]string{EnvSecret: strings.Repeat("x", MinSecretBytes-1)}, "", ErrWeakSecret, EnvSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SecretFromEnv(env(tt.env))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Fatalf("secret = %q, want %q", got, tt.want)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.mention) {
					t.Errorf("error %q does not name %s", err, tt.mention)
				}
				for _, v := range tt.env {
					if strings.Contains(err.Error(), v) {
						t.Errorf("error %q leaks the secret value", err)
					}
				}
			}
		})
	}
	if !strings.Contains(ErrNoSecret.Error(), EnvSecret) {
		t.Errorf("ErrNoSecret %q does not name %s", ErrNoSecret, EnvSecret)
	}
}

// TestIssuedTokenVerifiesWithItsClaims: a token Issue signs is compact, deterministic for
// equal claims, and verifies to the claims it was issued with.
func TestIssuedTokenVerifiesWithItsClaims(t *testing.T) {
	c := testClaims()
	tok := mustIssue(t, c)
	if len(tok) > 400 {
		t.Errorf("token is %d bytes; expected a compact token", len(tok))
	}
	got, err := Verify(testSecret, tok, issuedAt.Add(time.Minute))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got != c {
		t.Fatalf("claims = %+v, want %+v", got, c)
	}
	again := mustIssue(t, c)
	if again != tok {
		t.Errorf("Issue is not deterministic for equal claims: %q vs %q", again, tok)
	}
	if TokenHash(tok) != TokenHash(again) || len(TokenHash(tok)) != 64 {
		t.Errorf("TokenHash = %q", TokenHash(tok))
	}
}

// TestIssuingWithoutANonceGeneratesOne: claims with no nonce get a fresh one of NonceBytes,
// so two tokens for the same gate differ.
func TestIssuingWithoutANonceGeneratesOne(t *testing.T) {
	c := testClaims()
	c.Nonce = ""
	a, b := mustIssue(t, c), mustIssue(t, c)
	if a == b {
		t.Fatal("two tokens for the same gate without a nonce are equal")
	}
	ca, err := Verify(testSecret, a, issuedAt)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(ca.Nonce)
	if err != nil || len(raw) != NonceBytes {
		t.Fatalf("nonce %q decodes to %d bytes (%v), want %d", ca.Nonce, len(raw), err, NonceBytes)
	}
}

// TestIssuingRefusesIncompleteClaims: a short secret, and claims missing or overlong in a
// field a decision needs, are refused with the field named.
func TestIssuingRefusesIncompleteClaims(t *testing.T) {
	mod := func(f func(*Claims)) Claims { c := testClaims(); f(&c); return c }
	tests := []struct {
		name   string
		secret []byte
		c      Claims
		want   string
	}{
		{"short secret", []byte("short"), testClaims(), "shorter than 16"},
		{"no run", testSecret, mod(func(c *Claims) { c.RunID = "" }), "run_id is required"},
		{"no node", testSecret, mod(func(c *Claims) { c.NodeID = "" }), "node_id is required"},
		{"no plan", testSecret, mod(func(c *Claims) { c.PlanDigest = "" }), "plan_digest is required"},
		{"long run", testSecret, mod(func(c *Claims) { c.RunID = strings.Repeat("r", MaxClaimBytes+1) }), "run_id is 257 bytes"},
		{"no expiry", testSecret, mod(func(c *Claims) { c.ExpiresAt = time.Time{} }), "expires_at"},
		{"expiry before issue", testSecret, mod(func(c *Claims) { c.ExpiresAt = issuedAt.Add(-time.Second) }), "expires_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := Issue(tt.secret, tt.c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Issue = %q, %v; want error containing %q", tok, err, tt.want)
			}
		})
	}
}

// Token replay and binding at the token level: points 3 to 7 of the server's
// TestTokenReplayAndBinding. Points 1-2 (accepted once, then already decided) are a
// property of the store's compare-and-set and are tested there.
func TestTokenReplayAndBinding(t *testing.T) {
	c := testClaims()
	tok := mustIssue(t, c)
	now := issuedAt.Add(time.Minute)

	t.Run("3 another run's gate", func(t *testing.T) {
		other := c
		other.RunID = "RBOOK-20260512-demo-ffffffff"
		otherTok := mustIssue(t, other)
		claims, err := Verify(testSecret, otherTok, now)
		if err != nil {
			t.Fatalf("Verify of an authentic token: %v", err)
		}
		err = claims.CheckBinding(c.RunID, c.NodeID, c.PlanDigest)
		if !errors.Is(err, ErrTokenInvalid) {
			t.Fatalf("CheckBinding for R1's gate with R2's token = %v, want ErrTokenInvalid", err)
		}
		if err := claims.CheckBinding(other.RunID, other.NodeID, other.PlanDigest); err != nil {
			t.Fatalf("CheckBinding for its own gate: %v", err)
		}
		// Same run, another gate.
		if err := claims.CheckBinding(other.RunID, "another-gate", other.PlanDigest); !errors.Is(err, ErrTokenInvalid) {
			t.Fatalf("CheckBinding for another node = %v", err)
		}
	})

	t.Run("4 one signature character changed", func(t *testing.T) {
		dot := strings.IndexByte(tok, '.')
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		// Every position, including the last one whose low bits are padding.
		for i := dot + 1; i < len(tok); i++ {
			for _, r := range []byte{alphabet[(strings.IndexByte(alphabet, tok[i])+1)%64], alphabet[(strings.IndexByte(alphabet, tok[i])+63)%64]} {
				forged := tok[:i] + string(r) + tok[i+1:]
				if _, err := Verify(testSecret, forged, now); !errors.Is(err, ErrTokenInvalid) {
					t.Fatalf("signature char %d changed to %q: err = %v, want ErrTokenInvalid", i, r, err)
				}
			}
		}
		// A payload character changed is refused too.
		forged := string(tok[0]^1) + tok[1:]
		if _, err := Verify(testSecret, forged, now); !errors.Is(err, ErrTokenInvalid) {
			t.Fatalf("payload char changed: err = %v", err)
		}
	})

	t.Run("4 shortened by one character", func(t *testing.T) {
		for _, short := range []string{tok[:len(tok)-1], tok[1:]} {
			if _, err := Verify(testSecret, short, now); !errors.Is(err, ErrTokenInvalid) {
				t.Fatalf("shortened token: err = %v, want ErrTokenInvalid", err)
			}
		}
		for n := 0; n < len(tok); n++ {
			if _, err := Verify(testSecret, tok[:n], now); err == nil {
				t.Fatalf("prefix of %d chars verified", n)
			}
		}
	})

	t.Run("5 after its expiry", func(t *testing.T) {
		for _, at := range []time.Time{c.ExpiresAt, c.ExpiresAt.Add(time.Hour)} {
			claims, err := Verify(testSecret, tok, at)
			if !errors.Is(err, ErrTokenExpired) {
				t.Fatalf("at %v: err = %v, want ErrTokenExpired", at, err)
			}
			if !strings.Contains(err.Error(), "expired") {
				t.Fatalf("error %q does not say it expired", err)
			}
			if claims.RunID != c.RunID {
				t.Fatalf("expired token's claims = %+v", claims)
			}
		}
		if _, err := Verify(testSecret, tok, c.ExpiresAt.Add(-time.Second)); err != nil {
			t.Fatalf("one second before expiry: %v", err)
		}
	})

	t.Run("6 other plan digest", func(t *testing.T) {
		claims, err := Verify(testSecret, tok, now)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Repeat("cd", 32)
		if err := claims.CheckBinding(c.RunID, c.NodeID, edited); !errors.Is(err, ErrTokenInvalid) {
			t.Fatalf("CheckBinding with an edited plan = %v, want ErrTokenInvalid", err)
		}
	})

	t.Run("7 random, empty and 1 MiB strings", func(t *testing.T) {
		random := make([]byte, 48)
		if _, err := rand.Read(random); err != nil {
			t.Fatal(err)
		}
		inputs := map[string]string{
			"random base64":   base64.RawURLEncoding.EncodeToString(random),
			"random with dot": base64.RawURLEncoding.EncodeToString(random[:16]) + "." + base64.RawURLEncoding.EncodeToString(random[16:]),
			"random bytes":    string(random),
			"empty":           "",
			"dot only":        ".",
			"1 MiB":           strings.Repeat("A", 1<<20),
			"1 MiB of dots":   strings.Repeat(".", 1<<20),
			"just over cap":   tok + strings.Repeat("A", MaxTokenBytes),
		}
		for name, in := range inputs {
			start := time.Now()
			_, err := Verify(testSecret, in, now)
			if !errors.Is(err, ErrTokenInvalid) {
				t.Fatalf("%s: err = %v, want ErrTokenInvalid", name, err)
			}
			// Generous bound (the cap makes this microseconds): refused before decoding.
			if d := time.Since(start); d > time.Second {
				t.Fatalf("%s: refused after %v", name, d)
			}
		}
	})

	t.Run("errors never contain the token", func(t *testing.T) {
		for _, in := range []string{tok, tok[:len(tok)-1], tok + "x"} {
			for _, at := range []time.Time{now, c.ExpiresAt} {
				_, err := Verify([]byte("another-secret-of-enough-bytes"), in, at)
				if err != nil && strings.Contains(err.Error(), in[:20]) {
					t.Fatalf("error %q contains the token", err)
				}
			}
		}
	})
}

// TestVerifyRefusesTokensItCannotTrust: a token signed with another secret, a secret too short
// to verify with, and correctly signed payloads that are not valid claims are refused (the MAC
// check is not the only gate); a well-formed signed payload verifies.
func TestVerifyRefusesTokensItCannotTrust(t *testing.T) {
	sign := func(body string) string {
		seg := base64.RawURLEncoding.EncodeToString([]byte(body))
		return seg + "." + base64.RawURLEncoding.EncodeToString(mac(testSecret, seg))
	}
	signedAt := time.Unix(1, 0)
	for _, tc := range []struct {
		name   string
		secret []byte
		token  string
		now    time.Time
		want   error
	}{
		{"another secret", []byte("another-secret-of-enough-bytes"), mustIssue(t, testClaims()), issuedAt, ErrTokenInvalid},
		{"weak secret", []byte("short"), "a.b", issuedAt, ErrWeakSecret},
		{"signed empty object", testSecret, sign(`{}`), signedAt, ErrTokenInvalid},
		{"signed version 2", testSecret, sign(`{"v":2,"run":"r","node":"n","iat":1,"exp":2,"nonce":"x","plan":"p"}`), signedAt, ErrTokenInvalid},
		{"signed empty run", testSecret, sign(`{"v":1,"run":"","node":"n","iat":1,"exp":2,"nonce":"x","plan":"p"}`), signedAt, ErrTokenInvalid},
		{"signed expiry not after issue", testSecret, sign(`{"v":1,"run":"r","node":"n","iat":2,"exp":2,"nonce":"x","plan":"p"}`), signedAt, ErrTokenInvalid},
		{"signed unknown field", testSecret, sign(`{"v":1,"run":"r","node":"n","iat":1,"exp":2,"nonce":"x","plan":"p","extra":1}`), signedAt, ErrTokenInvalid},
		{"signed trailing value", testSecret, sign(`{"v":1,"run":"r","node":"n","iat":1,"exp":2,"nonce":"x","plan":"p"} {}`), signedAt, ErrTokenInvalid},
		{"signed not JSON", testSecret, sign(`not json`), signedAt, ErrTokenInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Verify(tc.secret, tc.token, tc.now); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Verify(testSecret, sign(`{"v":1,"run":"r","node":"n","iat":1,"exp":2,"nonce":"x","plan":"p"}`), signedAt); err != nil {
		t.Errorf("well-formed signed payload: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	c := testClaims()
	tok, err := Issue(testSecret, c)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{tok, tok[:len(tok)-1], "", ".", "a.b", strings.Repeat("A", 60) + "." + strings.Repeat("B", 43)} {
		f.Add(s)
	}
	now := issuedAt.Add(time.Minute)
	f.Fuzz(func(t *testing.T, in string) {
		claims, err := Verify(testSecret, in, now)
		switch {
		case err == nil:
			// Only the one token minted above can verify: re-issuing its claims must give it back.
			if again, ierr := Issue(testSecret, claims); ierr != nil || again != in {
				t.Fatalf("verified a token that Issue does not produce: %q", in)
			}
		case !errors.Is(err, ErrTokenInvalid) && !errors.Is(err, ErrTokenExpired):
			t.Fatalf("unexpected error kind %v", err)
		case len(in) >= 8 && strings.Contains(err.Error(), in):
			t.Fatalf("error %q contains the input", err)
		}
	})
}
