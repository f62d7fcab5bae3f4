package attest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// PayloadType is the DSSE payload type of an in-toto Statement.
const PayloadType = "application/vnd.in-toto+json"

// Envelope is a DSSE envelope (github.com/secure-systems-lab/dsse, "envelope.md"): the
// payload is base64 (standard alphabet, padded) of the Statement's JSON.
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one signature of an Envelope: the key's id (KeyID) and the base64 signature
// of the pre-authentication encoding.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// PAE is DSSE's pre-authentication encoding of a payload, the bytes a signature covers:
// "DSSEv1" SP len(type) SP type SP len(body) SP body, lengths in decimal ASCII.
func PAE(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("DSSEv1 ")
	b.WriteString(strconv.Itoa(len(payloadType)))
	b.WriteByte(' ')
	b.WriteString(payloadType)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(len(payload)))
	b.WriteByte(' ')
	b.Write(payload)
	return b.Bytes()
}

// SignStatement signs an in-toto Statement's JSON (kept byte for byte as the payload) and
// returns the DSSE envelope's JSON with one signature by s. It checks the payload is a
// Statement v1 first; errors are the signer's or that check's.
func SignStatement(ctx context.Context, s Signer, statementJSON []byte) ([]byte, error) {
	if _, err := ParseStatement(statementJSON); err != nil {
		return nil, err
	}
	sig, err := s.Sign(ctx, PAE(PayloadType, statementJSON))
	if err != nil {
		return nil, fmt.Errorf("sign with key %s: %w", s.KeyID(), err)
	}
	return json.Marshal(Envelope{
		PayloadType: PayloadType,
		Payload:     base64.StdEncoding.EncodeToString(statementJSON),
		Signatures:  []Signature{{KeyID: s.KeyID(), Sig: base64.StdEncoding.EncodeToString(sig)}},
	})
}

// ErrNoValidSignature is wrapped by VerifyEnvelope when no signature verifies under the keys given.
var ErrNoValidSignature = errors.New("no signature verifies")

// UnknownKeyError is VerifyEnvelope's error when every signature names a key id none of the
// keys given has: KeyID is the first signature's key id ("" when it names none), Given the
// number of keys given. It wraps ErrNoValidSignature.
type UnknownKeyError struct {
	KeyID string
	Given int
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("envelope is signed by key %s, which is not among the %d key(s) given (the control plane's keys are at %s): %v",
		e.KeyID, e.Given, KeysPath, ErrNoValidSignature)
}

// Unwrap is ErrNoValidSignature.
func (e *UnknownKeyError) Unwrap() error { return ErrNoValidSignature }

// VerifyEnvelope checks a DSSE envelope: its payload type is PayloadType, and at least one
// signature verifies with one of keys (matched by key id; a signature without a key id is
// tried with every key). It returns the Statement's JSON (checked to be a Statement v1) and
// the id of the key that verified it. Errors say which check failed; a signature that does
// not verify wraps ErrNoValidSignature; one signed by no key given is *UnknownKeyError.
func VerifyEnvelope(envelopeJSON []byte, keys []PublicKey) (statementJSON []byte, keyID string, err error) {
	var env Envelope
	if err := json.Unmarshal(envelopeJSON, &env); err != nil {
		return nil, "", fmt.Errorf("not a DSSE envelope (JSON): %w", err)
	}
	if env.PayloadType != PayloadType {
		return nil, "", fmt.Errorf("envelope payloadType is %q, want %q", env.PayloadType, PayloadType)
	}
	payload, err := decodeB64(env.Payload)
	if err != nil {
		return nil, "", fmt.Errorf("envelope payload is not base64: %w", err)
	}
	if len(env.Signatures) == 0 {
		return nil, "", fmt.Errorf("envelope has no signature: %w", ErrNoValidSignature)
	}
	if len(keys) == 0 {
		return nil, "", fmt.Errorf("no public key to check the envelope with: give the control plane's key: %w", ErrNoValidSignature)
	}
	msg := PAE(env.PayloadType, payload)
	var unknown []string
	for _, sig := range env.Signatures {
		raw, err := decodeB64(sig.Sig)
		if err != nil {
			continue
		}
		matched := false
		for _, k := range keys {
			if sig.KeyID != "" && sig.KeyID != k.KeyID {
				continue
			}
			matched = true
			if k.verify(msg, raw) {
				if _, err := ParseStatement(payload); err != nil {
					return nil, "", err
				}
				return payload, k.KeyID, nil
			}
		}
		if !matched {
			unknown = append(unknown, sig.KeyID)
		}
	}
	if len(unknown) == len(env.Signatures) {
		return nil, "", &UnknownKeyError{KeyID: unknown[0], Given: len(keys)}
	}
	return nil, "", fmt.Errorf("the envelope's signature does not match its payload: the payload or the signature was changed: %w", ErrNoValidSignature)
}

// decodeB64 accepts standard or URL-safe base64, padded or not, as DSSE requires of a reader.
func decodeB64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("neither standard nor URL-safe base64")
}
