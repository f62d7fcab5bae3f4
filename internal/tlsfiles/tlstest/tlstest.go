// Package tlstest makes certificate authorities and certificates for tests of TLS: a CA
// whose certificate a test trusts, server certificates for 127.0.0.1 and localhost, and
// client certificates with a common name, written as PEM files (docs/tls.md).
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority for one test: an ECDSA P-256 key and a self-signed
// certificate valid for a day.
type CA struct {
	// CertFile is the CA certificate as a PEM file (what RBOOK_CA_FILE or --tls-client-ca name).
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
}

// serials numbers every certificate of the process, so each has its own serial.
var serials atomic.Int64

// NewCA creates a CA named name with its PEM certificate in a new folder of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serials.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir()}
	ca.CertFile = filepath.Join(ca.dir, "ca.crt")
	writePEM(t, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// Issued is a certificate the CA signed, with its PEM files.
type Issued struct {
	CertFile, KeyFile string
	// Serial is the certificate's serial number (each certificate of a process has its own).
	Serial *big.Int
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost, writing its files as
// certFile and keyFile (replacing what is there, modification time now).
func (ca *CA) Server(t testing.TB, certFile, keyFile string) Issued {
	t.Helper()
	return ca.issue(t, certFile, keyFile, &x509.Certificate{
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client issues a client certificate whose subject common name is cn, into files of a new
// folder of t.
func (ca *CA) Client(t testing.TB, cn string) Issued {
	t.Helper()
	dir := t.TempDir()
	return ca.issue(t, filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), &x509.Certificate{
		Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(t testing.TB, certFile, keyFile string, tmpl *x509.Certificate) Issued {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = big.NewInt(serials.Add(1))
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return Issued{CertFile: certFile, KeyFile: keyFile, Serial: tmpl.SerialNumber}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// writePEM writes one PEM block to path through a temporary file and a rename, as
// cert-manager's writers do, so a reader never sees half a file.
func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
