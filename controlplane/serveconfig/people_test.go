package serveconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/server"
)

// TestPeopleFlagLoadsTheDirectoryOrNamesTheBadLine: --people reaches the server's options and
// the listening line; a bad file is refused with file:line and the field.
func TestPeopleFlagLoadsTheDirectoryOrNamesTheBadLine(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "people.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("people:\n  - id: alice\n    identities: [alice, \"github:alice\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("people:\n  - id: alice\n    identities: [\"github:alice\"]\n  - id: al\n    identities: [\"github:Alice\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var p peopleFlags
	p.file = good
	var cfg server.Config
	mode, err := p.apply(&cfg)
	if err != nil || cfg.People == nil || mode != "people "+good+" (1 person)" {
		t.Fatalf("apply = %q, %v (People %v); want the directory loaded and named", mode, err, cfg.People)
	}
	p.file = bad
	_, err = p.apply(&server.Config{})
	if err == nil || !strings.Contains(err.Error(), bad+":5: people[1] (al).identities: \"github:alice\" already belongs to person alice at "+bad+":3") {
		t.Fatalf("bad file: err = %v, want both lines named", err)
	}
}
