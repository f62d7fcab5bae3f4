package serveconfig

import (
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/server"
)

// --tls-cert and --tls-key come together, and --tls-client-ca only with them; the address
// line says TLS is on and whether client certificates are asked for.
func TestServeTLSFlagsComeTogether(t *testing.T) {
	for _, c := range []struct {
		name               string
		cert, key, client  string
		wantWords, wantErr string
	}{
		{name: "none"},
		{name: "pair", cert: "tls.crt", key: "tls.key", wantWords: "TLS tls.crt (reloaded when it changes)"},
		{name: "pair and client CA", cert: "tls.crt", key: "tls.key", client: "ca.crt", wantWords: "client certificates of ca.crt as executors cert:<common name>"},
		{name: "cert alone", cert: "tls.crt", wantErr: "--tls-cert needs --tls-key"},
		{name: "key alone", key: "tls.key", wantErr: "--tls-key needs --tls-cert"},
		{name: "client CA alone", client: "ca.crt", wantErr: "--tls-client-ca needs --tls-cert and --tls-key"},
	} {
		f := tlsFlags{cert: c.cert, key: c.key, clientCA: c.client}
		var cfg server.Config
		words, err := f.apply(&cfg)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
			}
		case err != nil || !strings.Contains(words, c.wantWords) || (cfg.TLS == nil) != (c.cert == ""):
			t.Errorf("%s: words %q, TLS %+v, error %v; want words with %q", c.name, words, cfg.TLS, err, c.wantWords)
		}
	}
}
