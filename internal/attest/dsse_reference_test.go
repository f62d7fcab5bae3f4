package attest_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"

	"github.com/rbookhq/rbook-action/internal/attest"
)

// referenceVerifier is the DSSE reference library's verifier for a public key PEM. DSSE key
// ids are hints: the library computes its own, so the verifier is told rbook's.
func referenceVerifier(t *testing.T, pubPEM []byte, keyID string) dsse.Verifier {
	t.Helper()
	k, err := signerverifier.LoadKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	k.KeyID = keyID
	var v dsse.Verifier
	switch k.KeyType {
	case "ed25519":
		v, err = signerverifier.NewED25519SignerVerifierFromSSLibKey(k)
	default:
		v, err = signerverifier.NewECDSASignerVerifierFromSSLibKey(k)
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestEnvelopeVerifiesWithTheReferenceDSSELibrary(t *testing.T) {
	for name, p := range keyPEMs(t) {
		t.Run(name, func(t *testing.T) {
			s := signer(t, p)
			st := statement(t)
			envJSON, err := attest.SignStatement(context.Background(), s, st)
			if err != nil {
				t.Fatal(err)
			}
			pubPEM, err := attest.MarshalPublicKeyPEM(s.Public())
			if err != nil {
				t.Fatal(err)
			}
			ev, err := dsse.NewEnvelopeVerifier(referenceVerifier(t, pubPEM, s.KeyID()))
			if err != nil {
				t.Fatal(err)
			}
			var env dsse.Envelope
			if err := json.Unmarshal(envJSON, &env); err != nil {
				t.Fatal(err)
			}
			accepted, payload, err := ev.VerifyAndDecode(context.Background(), &env)
			if err != nil {
				t.Fatalf("the reference library refuses rbook's envelope: %v", err)
			}
			if len(accepted) != 1 || accepted[0].KeyID != s.KeyID() || string(payload) != string(st) {
				t.Fatalf("accepted %+v payload %s", accepted, payload)
			}
			// A payload edited after signing is refused by the reference library too.
			env.Payload = env.Payload[:len(env.Payload)-4] + "AAAA"
			if _, err := ev.Verify(context.Background(), &env); err == nil {
				t.Fatal("the reference library accepts an edited payload")
			}
		})
	}
}

func TestPAEMatchesTheReferenceDSSELibrary(t *testing.T) {
	for _, body := range []string{"", "{}", "héllo wörld"} {
		if got, want := attest.PAE(attest.PayloadType, []byte(body)), dsse.PAE(attest.PayloadType, []byte(body)); string(got) != string(want) {
			t.Fatalf("PAE(%q) = %q, reference %q", body, got, want)
		}
	}
}
