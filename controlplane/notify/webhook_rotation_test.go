package notify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/notify"
)

// While a webhook's signing secret is rotated (previous_secret_env beside secret_env), each
// message carries two signatures, space-separated as the Standard Webhooks specification
// allows: the new secret's first, then the previous one's, so a receiver holding either
// verifies it.
func TestWebhookSignsWithTheNewAndThePreviousSecretDuringARotation(t *testing.T) {
	prevSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("notify-previous-secret-0123456789"))
	env := func(k string) (string, bool) {
		if k == "PREV_SECRET" {
			return prevSecret, true
		}
		return testEnv(k)
	}
	cfg := "channels:\n  - name: hooks\n    kind: webhook\n    url: https://h.example.com\n    secret_env: HOOK_SECRET\n    previous_secret_env: PREV_SECRET\ndefault: {channels: [hooks]}\n"
	c, err := notify.ParseConfig([]byte(cfg), "n.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Channels["hooks"].(*notify.Webhook)
	body := []byte(`{"type":"gate.opened"}`)
	sig := func(secret string) string {
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		m := hmac.New(sha256.New, key)
		fmt.Fprintf(m, "%s.%d.", "evt-1", 1700000000)
		m.Write(body)
		return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	if got, want := w.Sign("evt-1", 1700000000, body), sig(testSecret)+" "+sig(prevSecret); got != want {
		t.Fatalf("webhook-signature %q, want %q", got, want)
	}

	bad := strings.Replace(cfg, "previous_secret_env: PREV_SECRET", "previous_secret_env: SHORT", 1)
	if _, err := notify.ParseConfig([]byte(bad), "n.yaml", env); err == nil || !strings.Contains(err.Error(), "n.yaml:6: channels[0]: previous secret: the signing secret decodes to") {
		t.Fatalf("a short previous secret: %v", err)
	}
}
