package procgroup

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// readParentEnviron is the re-executed test binary standing in for rbook: it hides its
// environment when hide is set, then starts a command (as rbook starts a node, with Environ)
// that prints its own RBOOK_TOKEN and then its parent's /proc/<pid>/environ, and prints what
// the command printed.
func readParentEnviron(hide bool) {
	if hide {
		if err := HideEnvironment(); err != nil {
			fmt.Fprintln(os.Stderr, "HideEnvironment:", err)
			os.Exit(2)
		}
	}
	cmd := Command(context.Background(), 0, "sh", "-c", `echo "own:${RBOOK_TOKEN:-none}"; tr '\0' '\n' < /proc/$PPID/environ 2>&1`)
	cmd.Env = Environ()
	out, _ := cmd.CombinedOutput()
	os.Stdout.Write(out)
	os.Exit(0)
}

// TestAStartedProcessCannotReadRbooksStartingEnvironment: Environ keeps rbook's credentials
// out of a started process's environment, but on Linux that process could still read
// rbook's own from /proc/<rbook's pid>/environ; after HideEnvironment it cannot. Without it,
// the same command reads the token (the test would see a leak). Run as root, the stand-in
// for rbook runs as nobody, since root may read any process's environment.
func TestAStartedProcessCannotReadRbooksStartingEnvironment(t *testing.T) {
	const token = "tok-from-rbooks-environment"
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	bin := self
	if os.Geteuid() == 0 {
		// A copy nobody can run: the test binary's own folder is private to root.
		dir, err := os.MkdirTemp("", "rbook-hide-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		bin = filepath.Join(dir, "procgroup.test")
		if err := copyExecutable(self, bin); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	for _, tc := range []struct {
		mode   string
		leaked bool
	}{
		{"read-parent-environ", true},
		{"hide-then-read-parent-environ", false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cmd := exec.Command(bin, "-test.run=^$")
			cmd.Dir = os.TempDir()
			cmd.Env = append(os.Environ(), helperEnv+"="+tc.mode, "RBOOK_TOKEN="+token)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(string(out), "own:none\n") {
				t.Fatalf("the started process's own environment holds the token:\n%s", out)
			}
			if leaked := strings.Contains(string(out), token); leaked != tc.leaked {
				t.Errorf("the started process read rbook's token from /proc: %v, want %v\n%s", leaked, tc.leaked, out)
			}
		})
	}
}

// copyExecutable copies the file at from to a new file at to, mode 0755.
func copyExecutable(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
