package embedded

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The embedded control plane's signing key is generated once (0600) and then kept: the same
// key id on every start, so attestations of earlier runs verify with the key it has now.
func TestEmbeddedSigningKeyIsGeneratedOnceAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".rbook", "signing-key.pem")
	first, created, err := LoadOrCreateSigningKey(path)
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	again, created, err := LoadOrCreateSigningKey(path)
	if err != nil || created || again.KeyID() != first.KeyID() {
		t.Fatalf("second start: key %s (created %v, %v), want the kept key %s", again.KeyID(), created, err, first.KeyID())
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm() != 0o600 {
		t.Fatalf("signing key file mode %v, want 0600", info.Mode().Perm())
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateSigningKey(path); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("a damaged key file: %v, want an error saying to delete it", err)
	}
}
