package planview

import (
	"path/filepath"
	"testing"
)

func TestRunbookArgumentIsANameInDirOrAYAMLPath(t *testing.T) {
	for _, tc := range []struct{ arg, dir, name string }{
		{"demo", "runbooks", "demo"},
		{filepath.Join("runbooks", "demo.yaml"), "runbooks", "demo"},
		{"demo.yaml", ".", "demo"},
		{filepath.Join("elsewhere", "ops", "prod.yaml"), filepath.Join("elsewhere", "ops"), "prod"},
	} {
		dir, name := RunbookTarget("runbooks", tc.arg)
		if dir != tc.dir || name != tc.name {
			t.Errorf("RunbookTarget(runbooks, %q) = %q, %q; want %q, %q", tc.arg, dir, name, tc.dir, tc.name)
		}
	}
}

func TestMissingPlaybookListsThePlaybooksInDir(t *testing.T) {
	if got := MissingPlaybook("testdata", filepath.Join("testdata", "ship.cantbook")); got != "" {
		t.Errorf("an existing playbook is not missing, got %q", got)
	}
	want := "ship.cantbook: playbook file not found; playbooks in testdata: branch.cantbook, broken.cantbook, ship.cantbook (give its path: rbook plan " +
		filepath.Join("testdata", "ship.cantbook") + ")"
	if got := MissingPlaybook("testdata", "ship.cantbook"); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	want = "gone.cantbook: playbook file not found; playbooks in testdata: branch.cantbook, broken.cantbook, ship.cantbook"
	if got := MissingPlaybook("testdata", "gone.cantbook"); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
