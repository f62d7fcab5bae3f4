package serveconfig

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/internal/attest"
	"github.com/rbookhq/rbook-action/internal/flagconfig"
)

// envSigningKeyPEM holds the signing key's PEM itself, for a deployment that keeps it in a
// secret store rather than a file (docs/attestations.md, "Keys"). It is a secret: never in the
// configuration file, never printed.
const envSigningKeyPEM = "RBOOK_SIGNING_KEY_PEM"

// signingFlags are rbook serve's --signing-key and --signing-key-previous (docs/attestations.md).
type signingFlags struct {
	key      string
	previous []string
}

// add registers --signing-key and --signing-key-previous on fs.
func (sf *signingFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&sf.key, "signing-key", "", "PEM `FILE` of the key that signs run and gate attestations: Ed25519 or ECDSA P-256, PKCS#8 or \"EC PRIVATE KEY\" "+
		"(or the PEM itself in "+envSigningKeyPEM+"); its public key is served at "+attest.KeysPath+" (docs/attestations.md)")
	fs.StringSliceVar(&sf.previous, "signing-key-previous", nil, "PEM `FILE`s of retired signing keys (private or public; repeat or comma-separate), published at "+
		attest.KeysPath+" so attestations they signed still verify; they sign nothing")
}

// apply loads the signing key into cfg.Signer and the retired ones into cfg.PreviousKeys, and
// returns the address line's words ("" without a key). Errors name the flag or variable and
// the file, never a key's content: both a file and the variable, a file that cannot be
// read, a key that is not Ed25519 or ECDSA P-256.
func (sf *signingFlags) apply(cfg *server.Config) (string, error) {
	return sf.load(cfg, os.Getenv(envSigningKeyPEM), os.ReadFile)
}

func (sf *signingFlags) load(cfg *server.Config, envPEM string, read func(string) ([]byte, error)) (string, error) {
	var keyPEM []byte
	from := "--signing-key " + sf.key
	switch {
	case sf.key != "" && envPEM != "":
		return "", fmt.Errorf("--signing-key %s and %s are both set: give the key one way", sf.key, envSigningKeyPEM)
	case envPEM != "":
		keyPEM, from = []byte(envPEM), envSigningKeyPEM
	case sf.key != "":
		b, err := read(sf.key)
		if err != nil {
			return "", fmt.Errorf("--signing-key: %w", err)
		}
		keyPEM = b
	}
	for _, f := range sf.previous {
		b, err := read(f)
		if err != nil {
			return "", fmt.Errorf("--signing-key-previous: %w", err)
		}
		keys, err := attest.ParseVerificationKeys(b)
		if err != nil {
			return "", fmt.Errorf("--signing-key-previous %s: %w", f, err)
		}
		cfg.PreviousKeys = append(cfg.PreviousKeys, keys...)
	}
	if keyPEM == nil {
		if len(cfg.PreviousKeys) > 0 {
			return "", fmt.Errorf("--signing-key-previous is given without --signing-key or %s: give the key that signs now too", envSigningKeyPEM)
		}
		return "", nil
	}
	signer, err := attest.LoadSigner(keyPEM)
	if err != nil {
		return "", fmt.Errorf("%s: %w", from, err)
	}
	cfg.Signer = signer
	words := "attestations signed by " + signer.Algorithm() + " key " + signer.KeyID()[:16]
	if n := len(cfg.PreviousKeys); n > 0 {
		words += fmt.Sprintf(" (%d previous %s published)", n, map[bool]string{true: "key", false: "keys"}[n == 1])
	}
	return words, nil
}

// signingKeyState is --print-config's line about RBOOK_SIGNING_KEY_PEM: whether it is set,
// never its content (a --signing-key file is a setting like any other).
func signingKeyState(lookup func(string) (string, bool)) string {
	v, _ := lookup(envSigningKeyPEM)
	return "signing key PEM: " + flagconfig.SecretState(v, envSigningKeyPEM)
}
