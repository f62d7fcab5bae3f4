package serveconfig

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/server"
)

// tlsFlags are rbook serve's TLS flags (docs/tls.md).
type tlsFlags struct{ cert, key, clientCA string }

// add registers --tls-cert, --tls-key and --tls-client-ca on fs.
func (t *tlsFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&t.cert, "tls-cert", "", "PEM certificate chain (leaf first): serve HTTPS, with HTTP/2 for gRPC, instead of HTTP and h2c; re-read when the file changes (needs --tls-key)")
	fs.StringVar(&t.key, "tls-key", "", "PEM private key of --tls-cert; re-read with it")
	fs.StringVar(&t.clientCA, "tls-client-ca", "", "PEM CA bundle: ask clients for a certificate and verify one given against it; a verified certificate is the executor cert:<common name> (docs/tls.md)")
}

// apply checks the TLS flags (--tls-cert and --tls-key together; --tls-client-ca only
// with them) and sets cfg.TLS; the files are read when the server starts. It returns the
// words for the listening line ("" without TLS).
func (t *tlsFlags) apply(cfg *server.Config) (string, error) {
	switch {
	case t.cert == "" && t.key == "" && t.clientCA != "":
		return "", fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for over TLS")
	case t.cert == "" && t.key == "":
		return "", nil
	case t.cert == "":
		return "", fmt.Errorf("--tls-key needs --tls-cert (the certificate chain of that key, PEM)")
	case t.key == "":
		return "", fmt.Errorf("--tls-cert needs --tls-key (the certificate's private key, PEM)")
	}
	cfg.TLS = &server.TLSConfig{CertFile: t.cert, KeyFile: t.key, ClientCAFile: t.clientCA}
	words := "TLS " + t.cert + " (reloaded when it changes)"
	if t.clientCA != "" {
		words += ", client certificates of " + t.clientCA + " as executors cert:<common name>"
	}
	return words, nil
}
