package serveconfig

import (
	"bytes"
	"strings"
	"testing"
)

// Serve warns once at start when it would take bearer tokens over plain HTTP on an address
// that is not loopback, and says how to fix it; TLS, a loopback address, no tokens, or the
// signs of a TLS-terminating proxy in front (an https:// --public-url, --trusted-proxies)
// keep it quiet (docs/tls.md, "Behind a reverse proxy or an ingress").
func TestBearerTokensOverPlainHTTPOnTheNetworkAreWarnedOf(t *testing.T) {
	t.Setenv("RBOOK_APPROVAL_SECRET", "c2lnbmluZy1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZmdo")
	t.Setenv("RBOOK_CONFIG", "")
	auth := []string{"--auth-file", "testdata/auth.txt"}
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"auth file on every interface", append([]string{"--addr", "0.0.0.0:7070"}, auth...), true},
		{"auth file on every IPv6 interface", append([]string{"--addr", "[::]:7070"}, auth...), true},
		{"auth file on a host name", append([]string{"--addr", "rbook.internal:7070"}, auth...), true},
		{"OIDC on every interface", []string{"--addr", "0.0.0.0:7070", "--oidc-config", "testdata/oidc.yaml"}, true},
		{"an http:// public URL", append([]string{"--addr", "0.0.0.0:7070", "--public-url", "http://rbook.internal:7070"}, auth...), true},
		{"loopback", append([]string{"--addr", "127.0.0.1:7070"}, auth...), false},
		{"localhost", append([]string{"--addr", "localhost:7070"}, auth...), false},
		{"TLS", append([]string{"--addr", "0.0.0.0:7070", "--tls-cert", "tls.crt", "--tls-key", "tls.key"}, auth...), false},
		{"an https:// public URL", append([]string{"--addr", "0.0.0.0:7070", "--public-url", "https://rbook.example.com"}, auth...), false},
		{"trusted proxies", append([]string{"--addr", "0.0.0.0:7070", "--trusted-proxies", "10.0.0.0/8"}, auth...), false},
		{"no tokens", []string{"--addr", "0.0.0.0:7070", "--insecure"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newServeCmd()
			var errOut bytes.Buffer
			cmd.SetErr(&errOut)
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			n := strings.Count(errOut.String(), "bearer tokens are accepted over plain HTTP on ")
			switch {
			case tc.warn && n != 1:
				t.Fatalf("%d warnings, want 1; stderr:\n%s", n, errOut.String())
			case !tc.warn && n != 0:
				t.Fatalf("a warning, want none; stderr:\n%s", errOut.String())
			}
			if tc.warn {
				for _, want := range []string{"level=WARN", "--tls-cert FILE --tls-key FILE", "--trusted-proxies", "--public-url its https:// URL", "docs/tls.md"} {
					if !strings.Contains(errOut.String(), want) {
						t.Errorf("the warning lacks %q:\n%s", want, errOut.String())
					}
				}
			}
		})
	}
}
