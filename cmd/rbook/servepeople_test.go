package main

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
	saved := servePeople
	t.Cleanup(func() { servePeople = saved })
	servePeople.file = good
	var cfg server.Config
	mode, err := applyServePeople(&cfg)
	if err != nil || cfg.People == nil || mode != "people "+good+" (1 person)" {
		t.Fatalf("applyServePeople = %q, %v (People %v); want the directory loaded and named", mode, err, cfg.People)
	}
	servePeople.file = bad
	_, err = applyServePeople(&server.Config{})
	if err == nil || !strings.Contains(err.Error(), bad+":5: people[1] (al).identities: \"github:alice\" already belongs to person alice at "+bad+":3") {
		t.Fatalf("bad file: err = %v, want both lines named", err)
	}
}
