package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"

	"github.com/rbookhq/rbook-action/internal/attest"
)

// embeddedPublicKey writes the public key of the embedded control plane's signing key (the
// private key it keeps in dir/.rbook/, found by its PEM) to a file of its own, as an operator
// hands an auditor the key, and returns the file and the key's id.
func embeddedPublicKey(t *testing.T, dir string) (path, keyID string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ".rbook"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, ".rbook", e.Name()))
		if err != nil || !strings.Contains(string(data), "PRIVATE KEY-----") {
			continue
		}
		s, err := attest.LoadSigner(data)
		if err != nil {
			continue
		}
		pub, err := attest.MarshalPublicKeyPEM(s.Public())
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(t.TempDir(), "rbook-signing.pub.pem")
		if err := os.WriteFile(path, pub, 0o644); err != nil {
			t.Fatal(err)
		}
		return path, s.KeyID()
	}
	t.Fatalf("no signing key in %s/.rbook (the embedded control plane keeps one there)", dir)
	return "", ""
}

// TestEvidenceVerifyAcceptsARealRunAndRefusesItTampered: `rbook run demo` on the embedded
// control plane leaves the evidence pack, the journal and the attestation its control plane
// signed; `rbook evidence verify` accepts them with the control plane's public key (exit 0),
// and the reference DSSE library accepts the attestation the executor wrote. An edited output
// in the pack is exit 1 and names the entry's seq and step; without a key the chain and the
// pack still verify and the exit is 3.
func TestEvidenceVerifyAcceptsARealRunAndRefusesItTampered(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "yes\n", "run", "demo")
	if code != 0 {
		t.Fatalf("run demo: exit %d\n%s", code, out)
	}
	st := readState(t, dir)
	pack := filepath.Join(".rbook", st.RunID+".evidence.json")
	attPath := filepath.Join(dir, ".rbook", st.RunID+".attestation.json")
	key, keyID := embeddedPublicKey(t, dir)
	if !strings.Contains(out, "Attestation: "+filepath.Join(".rbook", st.RunID+".attestation.json")+" (signed by key "+keyID+")") {
		t.Errorf("the run's summary does not name the attestation and its key %s:\n%s", keyID, out)
	}

	out, code = run(t, dir, "", "evidence", "verify", pack, "--key", key)
	if code != 0 || !strings.Contains(out, "VERIFIED run "+st.RunID) || strings.Contains(out, "✗") {
		t.Fatalf("evidence verify of the untouched run: exit %d\n%s", code, out)
	}
	for _, check := range []string{"chain", "pack", "signature", "subjects", "gates"} {
		if !strings.Contains(out, "✓ "+check) {
			t.Errorf("no passed %s check:\n%s", check, out)
		}
	}
	// The embedded control plane authenticates nobody: the gate was answered at the terminal
	// as "unverified:<user>", so who approved, and four eyes, are not proved, and the policy
	// line says so instead of passing (docs/evidence-verify.md, "Unverified identities").
	if !strings.Contains(out, "· policy") || !strings.Contains(out, "an identity nobody authenticated") {
		t.Errorf("the policy line does not say the gate's approver is unverified:\n%s", out)
	}

	// The reference DSSE library accepts the file the executor wrote, with the same key.
	k, err := signerverifier.LoadKey([]byte(readFile(t, key)))
	if err != nil {
		t.Fatal(err)
	}
	k.KeyID = keyID
	v, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(k)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := dsse.NewEnvelopeVerifier(v)
	if err != nil {
		t.Fatal(err)
	}
	var env dsse.Envelope
	if err := json.Unmarshal([]byte(readFile(t, attPath)), &env); err != nil {
		t.Fatal(err)
	}
	if _, payload, err := ev.VerifyAndDecode(context.Background(), &env); err != nil || !strings.Contains(string(payload), `"run_id":"`+st.RunID+`"`) {
		t.Fatalf("the reference DSSE library refuses the attestation the run wrote (%v); payload %s", err, payload)
	}

	out, code = run(t, dir, "", "evidence", "verify", pack)
	if code != 3 || !strings.Contains(out, "UNSIGNED run "+st.RunID) {
		t.Errorf("evidence verify without a key: exit %d, want 3\n%s", code, out)
	}

	edited := strings.Replace(readFile(t, filepath.Join(dir, pack)), `"status": "PASS"`, `"status": "FAIL"`, 1)
	if err := os.WriteFile(filepath.Join(dir, pack), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = run(t, dir, "", "evidence", "verify", pack, "--key", key)
	if code != 1 || !strings.Contains(out, "✗ pack") || !strings.Contains(out, "First failing entry: seq ") ||
		!strings.Contains(out, "status differs from what the chain's seq") {
		t.Errorf("evidence verify of an edited pack: exit %d, want 1 naming the entry\n%s", code, out)
	}
}
