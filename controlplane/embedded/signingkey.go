package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rbookhq/rbook-action/internal/attest"
)

// SigningKey holds the Ed25519 key the embedded control plane signs its attestations with
// (docs/attestations.md, "Keys"): generated on first use, 0600 like LocalKey, so `rbook run`
// produces attestations with no setup.
const SigningKey = ".rbook/signing-key.pem"

// LoadOrCreateSigningKey returns the signer of the key kept in path, generating an Ed25519
// key there (0600, PKCS#8 PEM, with its folder 0700) when the file is missing; created
// reports that it did. Errors name the file, never the key: unreadable, not a supported key,
// write errors.
func LoadOrCreateSigningKey(path string) (signer attest.Signer, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s, err := attest.LoadSigner(b)
		if err != nil {
			return nil, false, fmt.Errorf("signing key file %s: %w; delete it to have a new key generated", path, err)
		}
		return s, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("signing key file: %w", err)
	}
	s, keyPEM, err := attest.GenerateEd25519()
	if err != nil {
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("signing key file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("signing key file: %w", err)
	}
	_, err = f.Write(keyPEM)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path) // a torn key file would refuse every later start
		return nil, false, fmt.Errorf("signing key file: %w", err)
	}
	return s, true, nil
}
