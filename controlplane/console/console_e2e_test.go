package console_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPageLogicUnderNode runs the app's logic tests (web/test, `npm test`: what runs after a
// gate, how transitions fold into steps, a click's outcome, where sign-in may return to) when
// Node.js and the web app's packages are installed.
func TestPageLogicUnderNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Node.js")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the console's logic tests need Node.js 20 or later")
	}
	if _, err := os.Stat(filepath.Join("web", "node_modules", ".bin", "esbuild")); err != nil {
		t.Skip("the console's packages are not installed; run: npm ci --prefix controlplane/console/web")
	}
	cmd := exec.Command(node, filepath.Join("test", "run.mjs"))
	cmd.Dir = "web"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test in controlplane/console/web failed: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("# fail 0")) {
		t.Fatalf("the logic tests did not report their results:\n%s", out)
	}
}
