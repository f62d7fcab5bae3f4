package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/server"
)

// serveTLS holds rbook serve's TLS flags (docs/tls.md).
var serveTLS struct{ cert, key, clientCA string }

// addServeTLSFlags registers --tls-cert, --tls-key and --tls-client-ca on cmd.
func addServeTLSFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&serveTLS.cert, "tls-cert", "", "PEM certificate chain (leaf first): serve HTTPS, with HTTP/2 for gRPC, instead of HTTP and h2c; re-read when the file changes (needs --tls-key)")
	fs.StringVar(&serveTLS.key, "tls-key", "", "PEM private key of --tls-cert; re-read with it")
	fs.StringVar(&serveTLS.clientCA, "tls-client-ca", "", "PEM CA bundle: ask clients for a certificate and verify one given against it; a verified certificate is the executor cert:<common name> (docs/tls.md)")
}

// applyServeTLS checks the TLS flags (--tls-cert and --tls-key together; --tls-client-ca only
// with them) and sets cfg.TLS; the files are read when the server starts. It returns the
// words for the listening line ("" without TLS).
func applyServeTLS(cfg *server.Config) (string, error) {
	switch {
	case serveTLS.cert == "" && serveTLS.key == "" && serveTLS.clientCA != "":
		return "", fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for over TLS")
	case serveTLS.cert == "" && serveTLS.key == "":
		return "", nil
	case serveTLS.cert == "":
		return "", fmt.Errorf("--tls-key needs --tls-cert (the certificate chain of that key, PEM)")
	case serveTLS.key == "":
		return "", fmt.Errorf("--tls-cert needs --tls-key (the certificate's private key, PEM)")
	}
	cfg.TLS = &server.TLSConfig{CertFile: serveTLS.cert, KeyFile: serveTLS.key, ClientCAFile: serveTLS.clientCA}
	words := "TLS " + serveTLS.cert + " (reloaded when it changes)"
	if serveTLS.clientCA != "" {
		words += ", client certificates of " + serveTLS.clientCA + " as executors cert:<common name>"
	}
	return words, nil
}
