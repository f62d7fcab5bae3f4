// Package tlsfiles reads the PEM files TLS is configured with, for the control plane
// (rbook serve --tls-cert, --tls-key, --tls-client-ca) and for its clients (RBOOK_CA_FILE,
// RBOOK_CLIENT_CERT, RBOOK_CLIENT_KEY): a certificate pair re-read when its files change
// (cert-manager rotates them, a Kubernetes Secret mount swaps a symlinked folder; docs/tls.md,
// "Certificate rotation"), and a pool of CA certificates.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// MaxPEMBytes caps a certificate, key or CA file: a chain or a CA bundle is a few dozen KiB.
const MaxPEMBytes = 1 << 20

// DefaultCheckInterval is how often KeyPair looks at its files again: a handshake at least
// this long after the last look stats both files, and re-reads them when either's
// modification time or size changed.
const DefaultCheckInterval = 5 * time.Second

// KeyPair is a certificate and its key, read from two PEM files and read again when they
// change. Its Certificate and ClientCertificate methods plug into tls.Config.GetCertificate
// and GetClientCertificate. Safe for concurrent use.
type KeyPair struct {
	certFile, keyFile string
	certName, keyName string // Options.CertName, KeyName
	interval          time.Duration
	now               func() time.Time
	onReloadError     func(error)
	onReload          func()

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     [2]fileStamp
	checked   time.Time
	badStamps [2]fileStamp // the stamps of the last pair that failed to load, when bad
	bad       bool
}

// fileStamp is what tells a changed file: its modification time, size and identity (a file
// replaced by a rename, or a Secret mount's swapped folder, is another file even within the
// file system's time granularity).
type fileStamp struct {
	mod  time.Time
	size int64
	fi   os.FileInfo
}

// same reports whether a and b stamp the same unchanged file (two missing files are the same).
func (a fileStamp) same(b fileStamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == nil && b.fi == nil
	}
	return a.mod.Equal(b.mod) && a.size == b.size && os.SameFile(a.fi, b.fi)
}

func samePair(a, b [2]fileStamp) bool { return a[0].same(b[0]) && a[1].same(b[1]) }

func stampOf(fi os.FileInfo) fileStamp { return fileStamp{mod: fi.ModTime(), size: fi.Size(), fi: fi} }

// Options adjust a KeyPair.
type Options struct {
	// CertName and KeyName name the files' settings in errors ("--tls-cert", "RBOOK_CLIENT_CERT").
	CertName, KeyName string
	// Interval is how often the files are looked at again; 0 means DefaultCheckInterval.
	Interval time.Duration
	// OnReloadError is called once for each changed pair that fails to load (the old pair
	// stays in use); nil ignores the failure.
	OnReloadError func(error)
	// OnReload is called after a changed pair was loaded; nil does nothing.
	OnReload func()
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// LoadKeyPair reads the pair from certFile (the certificate chain, leaf first) and keyFile
// (its private key), both PEM. Errors name the files' settings and the files: unreadable,
// over MaxPEMBytes, not PEM, a key that does not match the certificate.
func LoadKeyPair(certFile, keyFile string, o Options) (*KeyPair, error) {
	p := &KeyPair{certFile: certFile, keyFile: keyFile, certName: o.CertName, keyName: o.KeyName,
		interval: o.Interval, now: o.Now, onReloadError: o.OnReloadError, onReload: o.OnReload}
	if p.interval <= 0 {
		p.interval = DefaultCheckInterval
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.certName == "" {
		p.certName = "certificate"
	}
	if p.keyName == "" {
		p.keyName = "key"
	}
	cert, stamp, err := p.load()
	if err != nil {
		return nil, err
	}
	p.cert, p.stamp, p.checked = cert, stamp, p.now()
	return p, nil
}

// load reads both files and parses the pair.
func (p *KeyPair) load() (*tls.Certificate, [2]fileStamp, error) {
	var stamp [2]fileStamp
	certPEM, st, err := readPEM(p.certFile)
	if err != nil {
		return nil, stamp, fmt.Errorf("%s %s: %w", p.certName, p.certFile, err)
	}
	stamp[0] = st
	keyPEM, st, err := readPEM(p.keyFile)
	if err != nil {
		return nil, stamp, fmt.Errorf("%s %s: %w", p.keyName, p.keyFile, err)
	}
	stamp[1] = st
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// tls.X509KeyPair's messages never hold key material.
		return nil, stamp, fmt.Errorf("%s %s and %s %s: %w (the certificate file holds the chain, leaf first, the key file its private key, both PEM)",
			p.certName, p.certFile, p.keyName, p.keyFile, err)
	}
	return &cert, stamp, nil
}

// stat is the stamps of both files now (a missing file has a zero stamp).
func (p *KeyPair) stat() [2]fileStamp {
	var s [2]fileStamp
	for i, f := range []string{p.certFile, p.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			s[i] = stampOf(fi)
		}
	}
	return s
}

// Current returns the pair in use, first re-reading the files when Interval passed since the
// last look and either file's modification time or size changed. A changed pair that fails to
// load leaves the old one in use and is reported once (Options.OnReloadError).
func (p *KeyPair) Current() *tls.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if now.Sub(p.checked) < p.interval {
		return p.cert
	}
	p.checked = now
	s := p.stat()
	if samePair(s, p.stamp) || p.bad && samePair(s, p.badStamps) {
		return p.cert
	}
	cert, stamp, err := p.load()
	if err != nil {
		p.badStamps, p.bad = s, true
		if p.onReloadError != nil {
			p.onReloadError(err)
		}
		return p.cert
	}
	p.cert, p.stamp, p.bad = cert, stamp, false
	if p.onReload != nil {
		p.onReload()
	}
	return p.cert
}

// Certificate is for tls.Config.GetCertificate: the current pair (see Current).
func (p *KeyPair) Certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.Current(), nil
}

// ClientCertificate is for tls.Config.GetClientCertificate: the current pair, whatever CAs
// the server asks for (the server's refusal says more than an empty certificate would).
func (p *KeyPair) ClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.Current(), nil
}

// readPEM reads a PEM file of at most MaxPEMBytes and returns it with its stamp. Errors:
// unreadable, empty or oversized file.
func readPEM(path string) ([]byte, fileStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileStamp{}, err
	}
	defer f.Close()
	var st fileStamp
	if fi, err := f.Stat(); err == nil {
		st = stampOf(fi)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxPEMBytes+1))
	if err != nil {
		return nil, st, err
	}
	if len(b) > MaxPEMBytes {
		return nil, st, fmt.Errorf("file is over %d bytes: is it the right file?", MaxPEMBytes)
	}
	if len(b) == 0 {
		return nil, st, errors.New("file is empty")
	}
	return b, st, nil
}

// CAPool returns pool (a new empty pool when nil) with the certificates of the PEM file at
// path added; name names the file's setting in errors. Errors: the file's (readPEM), no
// certificate in it.
func CAPool(pool *x509.CertPool, path, name string) (*x509.CertPool, error) {
	b, _, err := readPEM(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", name, path, err)
	}
	if pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s %s: no PEM certificate (-----BEGIN CERTIFICATE-----) in the file", name, path)
	}
	return pool, nil
}
