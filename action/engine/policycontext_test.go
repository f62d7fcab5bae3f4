package engine

import (
	"reflect"
	"testing"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// TestPolicyContextCarriesTheNodesPin: the policy context of an approval node with policy:
// require-human carries it as node.policy (the control plane's evaluator reads it there), one
// without has no such key, and both list the commands they guard, up to the next approval.
func TestPolicyContextCarriesTheNodesPin(t *testing.T) {
	src := `version: "1.0"
name: pin
nodes:
  - {id: build, type: deterministic, command: echo, args: [building]}
  - {id: go-live, type: approval, prompt: "Deploy?", policy: require-human, depends: [build]}
  - {id: deploy, type: deterministic, command: echo, args: [deploying, "{{ build.stdout }}"], depends: [go-live]}
  - {id: check, type: approval, prompt: "Check?", depends: [deploy]}
  - {id: smoke, type: deterministic, command: ls, args: [], depends: [check]}
`
	plan, err := runbook.ParsePlaybook("pin.cantbook", []byte(src))
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
