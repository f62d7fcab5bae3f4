package runner

import (
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/state"
)

func TestStepOutputsNameTheChainHead(t *testing.T) {
	const head = "sha256:1505ce7410acb5c6302e37c7b9fe62032cfbbcf5f0881b8a6d9da731460b777e"
	find := func(outs []github.Output, name string) (string, bool) {
		for _, o := range outs {
			if o.Name == name {
				return o.Value, true
			}
		}
		return "", false
	}
	c := &Output{}
	st := &state.State{RunID: "R", RunStatus: engine.RunCompleted, ChainHead: head}
	if v, ok := find(c.outputs(st, Files{}), "chain-head"); !ok || v != head {
		t.Fatalf("chain-head output = %q (set %v), want %s", v, ok, head)
	}
	st.ChainHead = ""
	if v, ok := find(c.outputs(st, Files{}), "chain-head"); ok {
		t.Fatalf("a run without the chain has a chain-head output %q", v)
	}
}
