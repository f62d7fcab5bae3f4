package serveconfig

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// The signing key comes from a file or RBOOK_SIGNING_KEY_PEM, not both; retired keys are
// published only beside a current one; no error or address line shows a key's content.
func TestSigningKeySettings(t *testing.T) {
	cur, curPEM, err := attest.GenerateEd25519()
	if err != nil {
		t.Fatal(err)
	}
	old, oldPEM, err := attest.GenerateEd25519()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"cur.pem": curPEM, "old.pem": oldPEM, "junk.pem": []byte("not a key")}
	read := func(name string) ([]byte, error) {
		if b, ok := files[name]; ok {
			return b, nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	for _, c := range []struct {
		name             string
		flags            signingFlags
		env              string
		wantID, wantWord string
		wantPrevious     int
		wantErr          string
	}{
		{name: "none"},
		{name: "file", flags: signingFlags{key: "cur.pem"}, wantID: cur.KeyID(), wantWord: "attestations signed by ed25519 key " + cur.KeyID()[:16]},
		{name: "environment", env: string(curPEM), wantID: cur.KeyID(), wantWord: "ed25519"},
		{name: "with a previous key", flags: signingFlags{key: "cur.pem", previous: []string{"old.pem"}}, wantID: cur.KeyID(), wantPrevious: 1, wantWord: "1 previous key published"},
		{name: "file and environment", flags: signingFlags{key: "cur.pem"}, env: string(curPEM), wantErr: "both set"},
		{name: "missing file", flags: signingFlags{key: "gone.pem"}, wantErr: "--signing-key: open gone.pem"},
		{name: "not a key", flags: signingFlags{key: "junk.pem"}, wantErr: "--signing-key junk.pem: no PEM block"},
		{name: "previous alone", flags: signingFlags{previous: []string{"old.pem"}}, wantErr: "without --signing-key"},
		{name: "previous not a key", flags: signingFlags{key: "cur.pem", previous: []string{"junk.pem"}}, wantErr: "--signing-key-previous junk.pem"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg server.Config
			words, err := c.flags.load(&cfg, c.env, read)
			for _, secret := range [][]byte{curPEM, oldPEM} {
				body := strings.Split(strings.TrimSpace(string(secret)), "\n")[1]
				if strings.Contains(words, body) || err != nil && strings.Contains(err.Error(), body) {
					t.Fatalf("a key's content shows: %q %v", words, err)
				}
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(words, c.wantWord) || len(cfg.PreviousKeys) != c.wantPrevious {
				t.Fatalf("words %q, %d previous, %v", words, len(cfg.PreviousKeys), err)
			}
			if got := ""; cfg.Signer != nil {
				got = cfg.Signer.KeyID()
				if got != c.wantID {
					t.Fatalf("signer %s, want %s", got, c.wantID)
				}
			} else if c.wantID != "" {
				t.Fatal("no signer")
			}
			if c.wantPrevious > 0 && cfg.PreviousKeys[0].KeyID != old.KeyID() {
				t.Fatalf("previous key %s, want %s", cfg.PreviousKeys[0].KeyID, old.KeyID())
			}
		})
	}
}

// RBOOK_SIGNING_KEY_PEM is a secret: --print-config says it is set, never what it holds,
// and the configuration file may not carry it.
func TestSigningKeyNeverReachesPrintConfig(t *testing.T) {
	_, keyPEM, err := attest.GenerateEd25519()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("RBOOK_SIGNING_KEY_PEM", string(keyPEM))
	t.Setenv("RBOOK_CONFIG", "")
	// --print-config checks the settings as a start would, and a start needs the approval secret.
	t.Setenv("RBOOK_APPROVAL_SECRET", "print-config-test-secret-0123456789")
	cmd := newServeCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--print-config"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	body := strings.Split(strings.TrimSpace(string(keyPEM)), "\n")[1]
	if strings.Contains(out.String()+errOut.String(), body) {
		t.Fatalf("--print-config shows the signing key:\n%s", out.String())
	}
	if want := "# signing key PEM: <set, from RBOOK_SIGNING_KEY_PEM, "; !strings.Contains(out.String(), want) {
		t.Fatalf("the output lacks %q:\n%s", want, out.String())
	}
	file := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(file, []byte("signing-key-pem: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = newServeCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--print-config", "--config", file})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "RBOOK_SIGNING_KEY_PEM") {
		t.Fatalf("a config file with the key's PEM: %v", err)
	}
}
