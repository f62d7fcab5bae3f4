package serveconfig

import (
	"strings"
	"testing"
)

// --github-webhook-secret-file holds one secret, or two lines while the secret is rotated:
// the current one, then the previous one (docs/tls.md, "Rotating the GitHub webhook secret").
func TestWebhookSecretFileHoldsTheCurrentThenThePreviousSecret(t *testing.T) {
	const cur, prev = "current-secret-0123456789", "previous-secret-0123456789"
	for _, c := range []struct {
		name, file string
		want       []string
		err        string
	}{
		{"one secret", "  " + cur + "\n", []string{cur}, ""},
		{"current then previous", cur + "\n\n" + prev + "\n", []string{cur, prev}, ""},
		{"three secrets", cur + "\n" + prev + "\nthird-secret-0123456789\n", nil, "line 3: the file holds at most two secrets"},
		{"short secret", "abcd\n", nil, "the secret is 4 bytes, need at least 16"},
		{"short previous secret", cur + "\nabcd\n", nil, "line 2: the secret is 4 bytes, need at least 16"},
	} {
		got, err := webhookSecrets([]byte(c.file))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "abcd") {
				t.Errorf("%s: error %v, want one saying %q without the secret", c.name, err, c.err)
			}
			continue
		}
		var gs []string
		for _, g := range got {
			gs = append(gs, string(g))
		}
		if err != nil || strings.Join(gs, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: %q, %v; want %q", c.name, gs, err, c.want)
		}
	}
}
