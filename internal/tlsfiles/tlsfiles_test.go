package tlsfiles_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/internal/tlsfiles"
	"github.com/rbookhq/rbook-action/internal/tlsfiles/tlstest"
)

// serial is the serial number of the pair's leaf certificate.
func serial(t *testing.T, p *tlsfiles.KeyPair) string {
	t.Helper()
	c := p.Current()
	if c.Leaf == nil {
		t.Fatal("the pair has no parsed leaf")
	}
	return c.Leaf.SerialNumber.String()
}

// A Kubernetes Secret volume holds its files in a timestamped folder that the symbolic link
// ..data points to, and the files are links through ..data; an update swaps ..data to a new
// folder at once. The pair follows the swap.
func TestKeyPairFollowsASwappedSecretMount(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a Secret mount's symbolic links are a Linux volume's; Windows needs a privilege to make them")
	}
	ca := tlstest.NewCA(t, "test CA")
	mount := t.TempDir()
	version := func(name string) tlstest.Issued {
		dir := filepath.Join(mount, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return ca.Server(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	}
	swap := func(name string) {
		tmp := filepath.Join(mount, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	first := version("..2026_01_01")
	swap("..2026_01_01")
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(mount, f)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := tlsfiles.LoadKeyPair(filepath.Join(mount, "tls.crt"), filepath.Join(mount, "tls.key"), tlsfiles.Options{Interval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(t, p); got != first.Serial.String() {
		t.Fatalf("serial %s, want the first certificate's %s", got, first.Serial)
	}
	second := version("..2026_02_01")
	swap("..2026_02_01")
	if got := serial(t, p); got != second.Serial.String() {
		t.Fatalf("after the swap: serial %s, want the second certificate's %s", got, second.Serial)
	}
}

// A changed pair that does not load keeps the last good one and is reported once, however
// often it is looked at; the next good pair is taken.
func TestKeyPairKeepsTheLastGoodPairAndReportsABadOneOnce(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	good := ca.Server(t, crt, key)
	var reports []error
	p, err := tlsfiles.LoadKeyPair(crt, key, tlsfiles.Options{CertName: "--tls-cert", KeyName: "--tls-key", Interval: time.Nanosecond,
		OnReloadError: func(err error) { reports = append(reports, err) }})
	if err != nil {
		t.Fatal(err)
	}
	other := ca.Server(t, filepath.Join(dir, "other.crt"), filepath.Join(dir, "other.key"))
	if err := os.Rename(other.CertFile, crt); err != nil { // the certificate changed, the key did not
		t.Fatal(err)
	}
	for range 3 {
		if got := serial(t, p); got != good.Serial.String() {
			t.Fatalf("with a mismatched pair: serial %s, want the last good %s", got, good.Serial)
		}
	}
	if len(reports) != 1 {
		t.Fatalf("the mismatched pair was reported %d times, want once: %v", len(reports), reports)
	}
	if err := os.Rename(other.KeyFile, key); err != nil {
		t.Fatal(err)
	}
	if got := serial(t, p); got != other.Serial.String() {
		t.Fatalf("with the matching key in place: serial %s, want %s", got, other.Serial)
	}
}
