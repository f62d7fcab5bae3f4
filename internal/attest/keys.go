package attest

import (
	"encoding/json"
	"errors"
	"fmt"
)

// KeysPath is where a control plane publishes its public keys (docs/attestations.md, "Keys").
const KeysPath = "/.well-known/rbook/keys"

// Key statuses in a KeysDocument.
const (
	// KeyCurrent is the key the control plane signs with now.
	KeyCurrent = "current"
	// KeyPrevious is a retired key, published so older attestations still verify.
	KeyPrevious = "previous"
)

// KeysDocument is the JSON served at KeysPath: public keys only.
type KeysDocument struct {
	Keys []KeyEntry `json:"keys"`
}

// KeyEntry is one published key.
type KeyEntry struct {
	KeyID     string `json:"key_id"`
	Algorithm string `json:"algorithm"`
	// Status is KeyCurrent or KeyPrevious.
	Status string `json:"status"`
	// PublicKeyPEM is the key as a PEM "PUBLIC KEY" block.
	PublicKeyPEM string `json:"public_key_pem"`
}

// NewKeysDocument lists current then previous keys, each once (a previous key equal to
// current is dropped). It fails only for a key x509 cannot encode.
func NewKeysDocument(current *PublicKey, previous []PublicKey) (KeysDocument, error) {
	doc := KeysDocument{Keys: []KeyEntry{}}
	seen := map[string]bool{}
	add := func(k PublicKey, status string) error {
		if seen[k.KeyID] {
			return nil
		}
		seen[k.KeyID] = true
		p, err := MarshalPublicKeyPEM(k.Key)
		if err != nil {
			return err
		}
		doc.Keys = append(doc.Keys, KeyEntry{KeyID: k.KeyID, Algorithm: k.Algorithm, Status: status, PublicKeyPEM: string(p)})
		return nil
	}
	if current != nil {
		if err := add(*current, KeyCurrent); err != nil {
			return KeysDocument{}, err
		}
	}
	for _, k := range previous {
		if err := add(k, KeyPrevious); err != nil {
			return KeysDocument{}, err
		}
	}
	return doc, nil
}

// ErrNoKeys is ParseKeysDocument's error for a document that lists no key: its control plane
// has no signing key configured (`rbook serve --signing-key`).
var ErrNoKeys = errors.New("keys document lists no key: the control plane has no signing key configured")

// ParseKeysDocument reads a KeysDocument's JSON into its keys, each checked to parse and
// to have the id its key gives. Errors name the entry; a document without keys is ErrNoKeys.
func ParseKeysDocument(docJSON []byte) ([]PublicKey, error) {
	var doc KeysDocument
	if err := json.Unmarshal(docJSON, &doc); err != nil {
		return nil, fmt.Errorf("keys document is not JSON of the form {\"keys\":[…]}: %w", err)
	}
	var out []PublicKey
	for i, e := range doc.Keys {
		keys, err := ParsePublicKeys([]byte(e.PublicKeyPEM))
		if err != nil {
			return nil, fmt.Errorf("keys document entry %d (%s): %w", i+1, e.KeyID, err)
		}
		if keys[0].KeyID != e.KeyID {
			return nil, fmt.Errorf("keys document entry %d: key_id %s is not its key's id %s", i+1, e.KeyID, keys[0].KeyID)
		}
		out = append(out, keys[0])
	}
	if len(out) == 0 {
		return nil, ErrNoKeys
	}
	return out, nil
}
