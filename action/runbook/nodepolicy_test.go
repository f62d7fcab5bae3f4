package runbook

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestApprovalNodePolicyPinsItToAPerson: an approval node's policy: require-human loads into
// Node.Policy; any other value, a non-string, or the field on a node that is no approval node
// is refused with file:line:col: field.
func TestApprovalNodePolicyPinsItToAPerson(t *testing.T) {
	plan, err := LoadPlaybook(filepath.Join("testdata", "playbooks", "policy", "pinned.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range plan.Steps {
		want := ""
		if s.Name == "go-live" {
			want = NodePolicyRequireHuman
		}
		if s.Node.Policy != want {
			t.Errorf("node %s: Policy %q, want %q", s.Name, s.Node.Policy, want)
		}
	}

	_, err = LoadPlaybook(filepath.Join("testdata", "playbooks", "policy", "bad-values.cantbook"))
	var pe *PlaybookParseError
	if !errors.As(err, &pe) {
		t.Fatalf("bad-values: %v, want a *PlaybookParseError", err)
	}
	want := []string{
		`bad-values.cantbook:7:13: nodes[0].policy: must be require-human (a person decides this node; no auto-pass rule can pass it), got "require-humans" (did you mean "require-human"?)`,
		`bad-values.cantbook:11:13: nodes[1].policy: must be require-human (a person decides this node; no auto-pass rule can pass it), got "auto"`,
		`bad-values.cantbook:15:13: nodes[2].policy: must be a string`,
		`bad-values.cantbook:20:5: nodes[3].policy: is for approval nodes only; this node is deterministic`,
	}
	if len(pe.Issues) != len(want) {
		t.Fatalf("%d issues, want %d:\n%v", len(pe.Issues), len(want), err)
	}
	for i, d := range pe.Issues {
		got := strings.TrimPrefix(d.String(), filepath.Join("testdata", "playbooks", "policy")+string(filepath.Separator))
		if !strings.HasPrefix(got, want[i]) {
			t.Errorf("issue %d:\n got %s\nwant %s…", i, got, want[i])
		}
	}
}
