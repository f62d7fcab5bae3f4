package report

import (
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
)

func TestReportShowsTheChainHead(t *testing.T) {
	r, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	const head = "sha256:1505ce7410acb5c6302e37c7b9fe62032cfbbcf5f0881b8a6d9da731460b777e"
	for _, playbook := range []bool{false, true} {
		with, err := r.RenderReport(Report{RunID: "R", RunStatus: engine.RunCompleted, ChainHead: head, Playbook: playbook})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(with, "| Chain head | `"+head+"` |") {
			t.Errorf("playbook %v: the report does not show the chain head:\n%s", playbook, with)
		}
		without, err := r.RenderReport(Report{RunID: "R", RunStatus: engine.RunCompleted, Playbook: playbook})
		if err != nil || strings.Contains(without, "Chain head") {
			t.Errorf("playbook %v: a run without the chain shows a chain head row (%v):\n%s", playbook, err, without)
		}
	}
}
