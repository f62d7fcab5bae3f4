package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// fixture returns the bytes of testdata/<elem...>, the runbooks and playbooks the end-to-end
// tests write into their work folders; it fails the test when the file cannot be read.
func fixture(t *testing.T, elem ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeFixture copies testdata/<elem...> to dst.
func writeFixture(t *testing.T, dst string, elem ...string) {
	t.Helper()
	writeTestFile(t, dst, fixture(t, elem...))
}
