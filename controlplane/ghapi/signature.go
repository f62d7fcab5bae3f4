package ghapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// The headers of a GitHub webhook delivery (GitHub's "Webhook events and payloads",
// "Delivery headers").
const (
	// EventTypeHeader names the event (deployment_review, …).
	EventTypeHeader = "X-GitHub-Event"
	// DeliveryIDHeader is the delivery's GUID, the same on a redelivery.
	DeliveryIDHeader = "X-GitHub-Delivery"
	// SHA256SignatureHeader is "sha256=" + hex HMAC-SHA256 of the body with the webhook secret.
	SHA256SignatureHeader = "X-Hub-Signature-256"
)

// ValidateSignature checks an X-Hub-Signature-256 value against body and secret (GitHub's
// "Validating webhook deliveries"), comparing in constant time (hmac.Equal). Errors: a
// value that is not "sha256=" and hex, or a signature that does not match; neither error
// holds the secret or the signature.
func ValidateSignature(signature string, body, secret []byte) error {
	h, ok := strings.CutPrefix(signature, "sha256=")
	if !ok {
		return errors.New("webhook signature: want sha256=<hex>")
	}
	got, err := hex.DecodeString(h)
	if err != nil || len(got) != sha256.Size {
		return errors.New("webhook signature: not 64 hexadecimal digits after sha256=")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errors.New("webhook signature does not match the secret")
	}
	return nil
}
