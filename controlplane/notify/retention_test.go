package notify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/notify"
)

// retention: is a duration of at least an hour; absent, the store's default applies.
func TestRetentionIsADurationOfAtLeastAnHour(t *testing.T) {
	const rest = "channels:\n  - {name: h, kind: webhook, url: 'https://a.example.com', secret_env: HOOK_SECRET}\ndefault: {channels: [h]}\n"
	for _, tc := range []struct {
		text string
		want time.Duration
		err  string
	}{
		{rest, 0, ""},
		{"retention: 720h\n" + rest, 720 * time.Hour, ""},
		{"retention: 5m\n" + rest, 0, `n.yaml:1: retention: "5m": want a duration of at least 1h0m0s, such as 720h`},
		{"retention: 30d\n" + rest, 0, `n.yaml:1: retention: "30d": want a duration`},
	} {
		c, err := notify.ParseConfig([]byte(tc.text), "n.yaml", testEnv)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err = %v, want …%s…", tc.text, err, tc.err)
		case tc.err == "" && (err != nil || c.Retention != tc.want):
			t.Errorf("%q: retention = %v, %v; want %v", tc.text, c, err, tc.want)
		}
	}
}
