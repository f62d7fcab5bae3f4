package evidenceverify

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// realRun is the run in testdata/demo-run (see its README.md).
const realRun = "RBOOK-20261202-demo-150d2498"

// copyRealRun copies testdata/demo-run into a new folder and returns the pack's path there.
func copyRealRun(t *testing.T) (dir, pack string) {
	t.Helper()
	dir = t.TempDir()
	entries, err := os.ReadDir("testdata/demo-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		writeFile(t, filepath.Join(dir, e.Name()), readFile(t, filepath.Join("testdata/demo-run", e.Name())))
	}
	return dir, filepath.Join(dir, realRun+packSuffix)
}

// rewriteLines keeps the lines of path for which keep returns true (1-based line numbers).
func rewriteLines(t *testing.T, path string, keep func(n int, line string) bool) {
	t.Helper()
	var out []string
	for i, l := range strings.SplitAfter(string(readFile(t, path)), "\n") {
		if l != "" && keep(i+1, l) {
			out = append(out, l)
		}
	}
	writeFile(t, path, []byte(strings.Join(out, "")))
}

func TestRealRunVerifiesAndItsTamperedCopiesDoNot(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir, pack string)
		code   int
		check  string
		why    string
	}{
		{"as the run left it", func(*testing.T, string, string) {}, ExitVerified, "", ""},
		{"the approver renamed in the pack", func(t *testing.T, _, pack string) {
			writeFile(t, pack, bytes.Replace(readFile(t, pack), []byte(`approved by unverified:root`), []byte(`approved by unverified:mallory`), 1))
		}, ExitFailed, CheckPack, "output differs from what the chain's seq"},
		{"a transition deleted from the journal", func(t *testing.T, dir, _ string) {
			rewriteLines(t, filepath.Join(dir, realRun+state.JournalSuffix), func(n int, _ string) bool { return n != 5 })
		}, ExitFailed, CheckChain, "a transition was removed"},
		{"the approver renamed in the attestation", func(t *testing.T, dir, _ string) {
			p := filepath.Join(dir, realRun+attestationSuffix)
			var env attest.Envelope
			if err := json.Unmarshal(readFile(t, p), &env); err != nil {
				t.Fatal(err)
			}
			payload, _ := base64.StdEncoding.DecodeString(env.Payload)
			payload = bytes.Replace(payload, []byte(`"identity":"`), []byte(`"identity":"someone-else/`), 1)
			env.Payload = base64.StdEncoding.EncodeToString(payload)
			data, _ := json.Marshal(env)
			writeFile(t, p, data)
		}, ExitFailed, CheckSignature, "the payload or the signature was changed"},
		{"the last transitions and their entries dropped", func(t *testing.T, dir, pack string) {
			journal := filepath.Join(dir, realRun+state.JournalSuffix)
			lines := strings.Count(string(readFile(t, journal)), "\n")
			rewriteLines(t, journal, func(n int, _ string) bool { return n <= lines-3 })
			_, ev, _, err := readPack(pack)
			if err != nil {
				t.Fatal(err)
			}
			rewritePack(t, &fixture{pack: pack}, ev[:len(ev)-1])
		}, ExitFailed, CheckSubjects, "were deleted (with their pack entries)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, pack := copyRealRun(t)
			c.tamper(t, dir, pack)
			in, err := Load(context.Background(), Options{Pack: pack, KeyFile: filepath.Join(dir, "embedded-signing.pub.pem")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			rep := Verify(in)
			var text strings.Builder
			rep.WriteText(&text, false)
			if rep.Code() != c.code {
				t.Fatalf("exit %d, want %d:\n%s", rep.Code(), c.code, text.String())
			}
			if c.check == "" {
				if !strings.Contains(text.String(), "the chain's 1 gate decision(s) are the attestation's") {
					t.Errorf("the run's one gate is not matched:\n%s", text.String())
				}
				return
			}
			if f := rep.First; f == nil || f.Check != c.check || !strings.Contains(f.Why, c.why) {
				t.Fatalf("first failure %+v, want check %s with %q:\n%s", f, c.check, c.why, text.String())
			}
		})
	}
}
