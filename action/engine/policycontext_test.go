package engine

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// TestPolicyContextCarriesTheNodesPin: the policy context of an approval node with policy:
// require-human carries it as node.policy (the control plane's evaluator reads it there), one
// without has no such key, and both list the commands they guard, up to the next approval.
func TestPolicyContextCarriesTheNodesPin(t *testing.T) {
	plan, err := runbook.LoadPlaybook(filepath.Join("testdata", "policy-pin.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	pinned := PolicyContextOf(plan, plan.Steps[1], "Deploy?", map[string]any{})
	if pinned.Node["policy"] != runbook.NodePolicyRequireHuman || !reflect.DeepEqual(pinned.Commands, []string{"echo deploying {{ build.stdout }}"}) {
		t.Errorf("pinned node: node %v, commands %q", pinned.Node, pinned.Commands)
	}
	free := PolicyContextOf(plan, plan.Steps[3], "Check?", map[string]any{})
	if _, ok := free.Node["policy"]; ok || !reflect.DeepEqual(free.Commands, []string{"ls"}) {
		t.Errorf("unpinned node: node %v, commands %q", free.Node, free.Commands)
	}
}
