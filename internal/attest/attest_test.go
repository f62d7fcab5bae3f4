package attest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/internal/attest"
)

// keyPEMs are one private key of each accepted form.
func keyPEMs(t *testing.T) map[string][]byte {
	t.Helper()
	_, edPEM, err := attest.GenerateEd25519()
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"ed25519 pkcs8": edPEM,
		"p256 pkcs8":    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		"p256 ec sec1":  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}),
	}
}

func statement(t *testing.T) []byte {
	t.Helper()
	b, err := attest.NewStatement([]attest.Subject{{Name: "runbooks/deploy.yaml", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}},
		attest.RunPredicateType, attest.RunPredicate{RunID: "run-1", Name: "deploy", FinalStatus: "completed", Gates: []attest.GateDecision{}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func signer(t *testing.T, p []byte) attest.Signer {
	t.Helper()
	s, err := attest.LoadSigner(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEnvelopeRoundTripsForEveryKeyForm(t *testing.T) {
	for name, p := range keyPEMs(t) {
		t.Run(name, func(t *testing.T) {
			s := signer(t, p)
			st := statement(t)
			env, err := attest.SignStatement(context.Background(), s, st)
			if err != nil {
				t.Fatal(err)
			}
			got, id, err := attest.VerifyEnvelope(env, []attest.PublicKey{attest.PublicOf(s)})
			if err != nil {
				t.Fatal(err)
			}
			if id != s.KeyID() || string(got) != string(st) {
				t.Fatalf("verified key %s payload %s; want %s and the statement", id, got, s.KeyID())
			}
			var e attest.Envelope
			if err := json.Unmarshal(env, &e); err != nil {
				t.Fatal(err)
			}
			if e.PayloadType != "application/vnd.in-toto+json" || len(e.Signatures) != 1 || e.Signatures[0].KeyID != s.KeyID() {
				t.Fatalf("envelope %s", env)
			}
		})
	}
}

func TestKeyIDIsSHA256OfSubjectPublicKeyInfo(t *testing.T) {
	s := signer(t, keyPEMs(t)["ed25519 pkcs8"])
	pubPEM, err := attest.MarshalPublicKeyPEM(s.Public())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := attest.ParsePublicKeys(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].KeyID != s.KeyID() || len(s.KeyID()) != 64 || keys[0].Algorithm != attest.AlgEd25519 {
		t.Fatalf("keys %+v, signer id %s", keys, s.KeyID())
	}
}

func TestTamperedEnvelopeIsRefused(t *testing.T) {
	pems := keyPEMs(t)
	s := signer(t, pems["ed25519 pkcs8"])
	other := signer(t, pems["p256 pkcs8"])
	env, err := attest.SignStatement(context.Background(), s, statement(t))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(e *attest.Envelope)) []byte {
		var e attest.Envelope
		if err := json.Unmarshal(env, &e); err != nil {
			t.Fatal(err)
		}
		f(&e)
		b, _ := json.Marshal(e)
		return b
	}
	otherEnv, err := attest.SignStatement(context.Background(), other, statement(t))
	if err != nil {
		t.Fatal(err)
	}
	var oe attest.Envelope
	_ = json.Unmarshal(otherEnv, &oe)
	cases := []struct {
		name, env, want string
		keys            []attest.PublicKey
	}{
		{"payload edited", string(edit(func(e *attest.Envelope) {
			p, _ := base64.StdEncoding.DecodeString(e.Payload)
			e.Payload = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(p), "completed", "failed", 1)))
		})), "does not match its payload", []attest.PublicKey{attest.PublicOf(s)}},
		{"signature from another key under this key's id", string(edit(func(e *attest.Envelope) {
			e.Signatures[0].Sig = oe.Signatures[0].Sig
		})), "does not match its payload", []attest.PublicKey{attest.PublicOf(s)}},
		{"signed by a key not given", string(otherEnv), "not among the 1 key(s) given", []attest.PublicKey{attest.PublicOf(s)}},
		{"payload type changed", string(edit(func(e *attest.Envelope) { e.PayloadType = "text/plain" })), "payloadType", []attest.PublicKey{attest.PublicOf(s)}},
		{"no signature", string(edit(func(e *attest.Envelope) { e.Signatures = nil })), "no signature", []attest.PublicKey{attest.PublicOf(s)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := attest.VerifyEnvelope([]byte(c.env), c.keys)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestRetiredKeyFileIsPublishedForVerificationOnly(t *testing.T) {
	pems := keyPEMs(t)
	old, cur := signer(t, pems["p256 ec sec1"]), signer(t, pems["ed25519 pkcs8"])
	oldEnv, err := attest.SignStatement(context.Background(), old, statement(t))
	if err != nil {
		t.Fatal(err)
	}
	// The retired key's file is given as published verification key (its private half is dropped).
	prev, err := attest.ParseVerificationKeys(pems["p256 ec sec1"])
	if err != nil {
		t.Fatal(err)
	}
	cp := attest.PublicOf(cur)
	doc, err := attest.NewKeysDocument(&cp, prev)
	if err != nil {
		t.Fatal(err)
	}
	docJSON, _ := json.Marshal(doc)
	if strings.Contains(string(docJSON), "PRIVATE") {
		t.Fatalf("keys document holds a private key: %s", docJSON)
	}
	keys, err := attest.ParseKeysDocument(docJSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || doc.Keys[0].Status != attest.KeyCurrent || doc.Keys[1].Status != attest.KeyPrevious {
		t.Fatalf("keys document %s", docJSON)
	}
	if _, id, err := attest.VerifyEnvelope(oldEnv, keys); err != nil || id != old.KeyID() {
		t.Fatalf("old envelope: key %s, err %v; want %s", id, err, old.KeyID())
	}
}

func TestLoadSignerRefusesUnsupportedKeys(t *testing.T) {
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(p384)
	pub, _ := attest.MarshalPublicKeyPEM(&p384.PublicKey)
	cases := []struct{ name, pem, want string }{
		{"not PEM", "hello", "no PEM block"},
		{"P-384", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "only P-256"},
		{"a public key", string(pub), "not a private key"},
		{"garbage in a PEM block", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("xx")})), "does not parse"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := attest.LoadSigner([]byte(c.pem)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	if _, err := attest.ParsePublicKeys(keyPEMs(t)["ed25519 pkcs8"]); err == nil || !strings.Contains(err.Error(), "PEM block 1") {
		t.Fatalf("ParsePublicKeys took a private key: %v", err)
	}
}

func TestSignerNeverPrintsItsPrivateKey(t *testing.T) {
	p := keyPEMs(t)["ed25519 pkcs8"]
	s := signer(t, p)
	block, _ := pem.Decode(p)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	seed := k.(ed25519.PrivateKey).Seed()
	printed := fmt.Sprintf("%v %+v %#v %s", s, s, s, s)
	for _, secret := range []string{hex.EncodeToString(seed), base64.StdEncoding.EncodeToString(seed), fmt.Sprint(seed), string(block.Bytes)} {
		if strings.Contains(printed, secret) {
			t.Fatalf("a printed signer shows its private key: %s", printed)
		}
	}
	if !strings.Contains(printed, s.KeyID()) {
		t.Fatalf("a printed signer should name its key id: %s", printed)
	}
}

// Keys as openssl writes them load: `genpkey` (PKCS#8, Ed25519 and P-256) and `ecparam
// -genkey` (an "EC PARAMETERS" block before the "EC PRIVATE KEY"), the commands
// docs/attestations.md gives. Generated at test time: no private key is committed.
func TestOpenSSLKeysLoad(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, alg string
		args      []string
	}{
		{"genpkey ed25519", attest.AlgEd25519, []string{"genpkey", "-algorithm", "ed25519"}},
		{"genpkey p-256", attest.AlgECDSAP256, []string{"genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"}},
		{"ecparam -genkey", attest.AlgECDSAP256, []string{"ecparam", "-genkey", "-name", "prime256v1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".pem")
			if b, err := exec.Command(openssl, append(c.args, "-out", out)...).CombinedOutput(); err != nil {
				t.Fatalf("openssl: %v\n%s", err, b)
			}
			p, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			s := signer(t, p)
			if s.Algorithm() != c.alg {
				t.Fatalf("algorithm %s, want %s", s.Algorithm(), c.alg)
			}
			env, err := attest.SignStatement(context.Background(), s, statement(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := attest.VerifyEnvelope(env, []attest.PublicKey{attest.PublicOf(s)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
