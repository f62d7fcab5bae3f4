// Package attest signs and verifies rbook's attestations: in-toto Statements v1 in DSSE
// envelopes, signed by a control plane's Ed25519 or ECDSA P-256 key (docs/attestations.md).
// It holds the formats only; the control plane decides what to sign.
package attest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// Algorithm names, as the keys document and Signer.Algorithm give them (docs/attestations.md, "Keys").
const (
	// AlgEd25519 is a pure Ed25519 signature over the DSSE pre-authentication encoding.
	AlgEd25519 = "ed25519"
	// AlgECDSAP256 is an ASN.1 DER ECDSA P-256 signature over the SHA-256 of the
	// pre-authentication encoding (what cosign and the DSSE reference library use).
	AlgECDSAP256 = "ecdsa-p256-sha256"
)

// Signer signs the DSSE pre-authentication encoding of an envelope. The key may live
// anywhere (a file here; a KMS or a keyless Sigstore signer could implement it too):
// rbook only needs its public half and id.
type Signer interface {
	// KeyID is the key's id: see KeyID.
	KeyID() string
	// Algorithm is AlgEd25519 or AlgECDSAP256.
	Algorithm() string
	// Public is the public key: ed25519.PublicKey or *ecdsa.PublicKey.
	Public() crypto.PublicKey
	// Sign returns the signature of msg (the whole message, not a digest).
	Sign(ctx context.Context, msg []byte) ([]byte, error)
}

// PublicKey is a key a signature may be checked with.
type PublicKey struct {
	// KeyID is the key's id (KeyID).
	KeyID string
	// Algorithm is AlgEd25519 or AlgECDSAP256.
	Algorithm string
	// Key is ed25519.PublicKey or *ecdsa.PublicKey (P-256).
	Key crypto.PublicKey
}

// KeyID is a public key's id: the lowercase hex SHA-256 of its DER SubjectPublicKeyInfo
// (docs/attestations.md, "Keys"). It fails only for a key type x509 cannot encode.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode the public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:]), nil
}

// keySigner is a Signer over a private key held in memory.
type keySigner struct {
	id, alg string
	ed      ed25519.PrivateKey
	ec      *ecdsa.PrivateKey
}

func (s *keySigner) KeyID() string     { return s.id }
func (s *keySigner) Algorithm() string { return s.alg }

func (s *keySigner) Public() crypto.PublicKey {
	if s.ed != nil {
		return s.ed.Public()
	}
	return &s.ec.PublicKey
}

func (s *keySigner) Sign(ctx context.Context, msg []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.ed != nil {
		return ed25519.Sign(s.ed, msg), nil
	}
	sum := sha256.Sum256(msg)
	return ecdsa.SignASN1(rand.Reader, s.ec, sum[:])
}

// String never shows the key: a Signer printed by accident names only its id.
func (s *keySigner) String() string { return "attest signer " + s.alg + " " + s.id }

// GoString is String, so %#v does not print the private key either.
func (s *keySigner) GoString() string { return s.String() }

// LoadSigner reads a private key from PEM: a PKCS#8 "PRIVATE KEY" (Ed25519 or ECDSA P-256)
// or a SEC 1 "EC PRIVATE KEY" (P-256), after any "EC PARAMETERS" block. Errors name what
// was found and never hold key bytes.
func LoadSigner(pemBytes []byte) (Signer, error) {
	block, rest := pem.Decode(pemBytes)
	for block != nil && block.Type == "EC PARAMETERS" {
		// `openssl ecparam -genkey` writes the curve's parameters before the key.
		block, rest = pem.Decode(rest)
	}
	if block == nil {
		return nil, errors.New("no PEM block found: give a PKCS#8 \"PRIVATE KEY\" (Ed25519 or ECDSA P-256), e.g. from `openssl genpkey -algorithm ed25519`")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key: give a \"PRIVATE KEY\" (PKCS#8) or \"EC PRIVATE KEY\" block", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("PEM block %q does not parse as a private key; regenerate it with `openssl genpkey -algorithm ed25519`", block.Type)
	}
	return signerFor(key)
}

// signerFor wraps an Ed25519 or ECDSA P-256 private key.
func signerFor(key any) (Signer, error) {
	s := &keySigner{}
	switch k := key.(type) {
	case ed25519.PrivateKey:
		s.ed, s.alg = k, AlgEd25519
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key on curve %s: only P-256 is supported; use Ed25519 or P-256", k.Curve.Params().Name)
		}
		s.ec, s.alg = k, AlgECDSAP256
	default:
		return nil, fmt.Errorf("%T keys are not supported: use Ed25519 or ECDSA P-256", key)
	}
	id, err := KeyID(s.Public())
	if err != nil {
		return nil, err
	}
	s.id = id
	return s, nil
}

// GenerateEd25519 makes a new Ed25519 key and returns its signer and its PKCS#8 PEM, to be
// kept by the caller (the embedded control plane keeps it in its .rbook/ folder, mode 0600).
func GenerateEd25519() (Signer, []byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	s, err := signerFor(priv)
	if err != nil {
		return nil, nil, err
	}
	return s, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// PublicOf is a signer's public key with its id and algorithm.
func PublicOf(s Signer) PublicKey {
	return PublicKey{KeyID: s.KeyID(), Algorithm: s.Algorithm(), Key: s.Public()}
}

// MarshalPublicKeyPEM encodes a public key as a PEM "PUBLIC KEY" block (DER
// SubjectPublicKeyInfo), the form ParsePublicKeys reads.
func MarshalPublicKeyPEM(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode the public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKeys reads every "PUBLIC KEY" block of a PEM file (Ed25519 or ECDSA P-256).
// Other blocks are an error naming the block's number, so a private key handed to a
// verifier is refused rather than used. A file with no block is an error.
func ParsePublicKeys(pemBytes []byte) ([]PublicKey, error) {
	return parseKeys(pemBytes, false)
}

// ParseVerificationKeys is ParsePublicKeys that also takes private key blocks (PKCS#8 or
// SEC 1) and keeps only their public half: the form of a retired signing key file
// (`rbook serve --signing-key-previous`, docs/attestations.md, "Rotation").
func ParseVerificationKeys(pemBytes []byte) ([]PublicKey, error) {
	return parseKeys(pemBytes, true)
}

func parseKeys(rest []byte, allowPrivate bool) ([]PublicKey, error) {
	var out []PublicKey
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		var pub PublicKey
		var err error
		switch {
		case block.Type == "PUBLIC KEY":
			pub, err = parsePublic(block.Bytes)
		case allowPrivate && (block.Type == "PRIVATE KEY" || block.Type == "EC PRIVATE KEY"):
			var s Signer
			s, err = LoadSigner(pem.EncodeToMemory(block))
			if err == nil {
				pub = PublicOf(s)
			}
		default:
			err = fmt.Errorf("is a %q block, not a \"PUBLIC KEY\"", block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		out = append(out, pub)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM \"PUBLIC KEY\" block found: give the control plane's public key (GET /.well-known/rbook/keys lists them)")
	}
	return out, nil
}

func parsePublic(der []byte) (PublicKey, error) {
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return PublicKey{}, errors.New("does not parse as a public key (DER SubjectPublicKeyInfo)")
	}
	pub := PublicKey{Key: key}
	switch k := key.(type) {
	case ed25519.PublicKey:
		pub.Algorithm = AlgEd25519
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return PublicKey{}, fmt.Errorf("ECDSA key on curve %s: only P-256 is supported", k.Curve.Params().Name)
		}
		pub.Algorithm = AlgECDSAP256
	default:
		return PublicKey{}, fmt.Errorf("%T keys are not supported: use Ed25519 or ECDSA P-256", key)
	}
	if pub.KeyID, err = KeyID(key); err != nil {
		return PublicKey{}, err
	}
	return pub, nil
}

// verify reports whether sig is pub's signature of msg under pub.Algorithm.
func (pub PublicKey) verify(msg, sig []byte) bool {
	switch k := pub.Key.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(k, msg, sig)
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(msg)
		return ecdsa.VerifyASN1(k, sum[:], sig)
	}
	return false
}
