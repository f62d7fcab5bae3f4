package runbook

import (
	"slices"
	"testing"
)

// gate is an approval node "review" depending on deps with a rewind_targets line.
func gate(deps, targets string) string {
	return "  - id: review\n    type: approval\n    prompt: ok?\n    depends: " + deps + "\n    rewind_targets: " + targets + "\n"
}

// rewind_targets are read into Node.RewindTargets in file order; an ancestor reached only
// through another node (build → test → review) is a valid target.
func TestRewindTargetsAreReadIntoThePlan(t *testing.T) {
	plan := parsePB(t, pbOf(det("build"), det("test", "depends: [build]"), gate("[test]", "[test, build]"),
		det("deploy", `args: ["{{ review.feedback }}", "{{ review.redo_from }}"]`, "depends: [review]")))
	if got := plan.Steps[2].Node.RewindTargets; !slices.Equal(got, []string{"test", "build"}) {
		t.Fatalf("RewindTargets = %v; want [test build]", got)
	}
}

// A rewind target that is not an ancestor of the approval node, names no node, is the node
// itself or repeats is refused at its own line with its field path and what to do; the key
// on another node type is refused as belonging to approval nodes.
func TestRewindTargetsErrorsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, src, field, msg string
		line                  int
	}{
		{"not an ancestor", pbOf(det("build"), det("lint"), gate("[build]", "[lint]")), "nodes[2].rewind_targets[0]",
			`node "lint" is not an ancestor of approval node "review"`, 16},
		{"a descendant", pbOf(det("build"), gate("[build]", "[deploy]"), det("deploy", "depends: [review]")), "nodes[1].rewind_targets[0]",
			`node "deploy" runs after approval node "review" (it depends on it), so the run cannot go back to it from the gate; name one of its ancestors (its ancestors are build)`, 12},
		{"unknown node", pbOf(det("build"), gate("[build]", "[biuld]")), "nodes[1].rewind_targets[0]",
			`unknown node id "biuld": a rewind target must name a node this approval node depends on`, 12},
		{"itself", pbOf(det("build"), gate("[build]", "[review]")), "nodes[1].rewind_targets[0]", "cannot send the run back to itself", 12},
		{"duplicate", pbOf(det("build"), gate("[build]", "[build, build]")), "nodes[1].rewind_targets[1]", `duplicate rewind target "build"`, 12},
		{"not a list", pbOf(det("build"), gate("[build]", "build")), "nodes[1].rewind_targets", "must be a list", 12},
		{"on a deterministic node", pbOf(det("build"), det("test", "depends: [build]", "rewind_targets: [build]")), "nodes[1].rewind_targets",
			"is for approval nodes only; this node is deterministic", 13},
	} {
		t.Run(tc.name, func(t *testing.T) { wantIssue(t, tc.src, tc.field, tc.msg, tc.line) })
	}
}
