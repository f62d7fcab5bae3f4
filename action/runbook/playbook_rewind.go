package runbook

import (
	"slices"
	"strings"
)

// maxNamedAncestors bounds the ancestors a rewind_targets diagnostic lists.
const maxNamedAncestors = 10

// checkRewinds checks every approval node's rewind_targets once the graph is built
// (docs/push-back.md, "Declaring"): each entry names a node, that node runs before the
// approval node on every run (a chain of depends and edges leads from it to the approval
// node), and no entry repeats. The accepted entries become Node.RewindTargets.
func (p *pbParser) checkRewinds() {
	for to, rn := range p.nodes {
		if len(rn.rewind) == 0 || p.ids[rn.node.ID] != to {
			continue
		}
		var ancestors []string
		for i, other := range p.nodes {
			if i != to && other.node.ID != "" && p.upstream(i, to) {
				ancestors = append(ancestors, other.node.ID)
			}
		}
		allowed := "it has no ancestors: give it depends first"
		if len(ancestors) > maxNamedAncestors {
			ancestors = append(ancestors[:maxNamedAncestors], "…")
		}
		if len(ancestors) > 0 {
			allowed = "its ancestors are " + strings.Join(ancestors, ", ")
		}
		for _, r := range rn.rewind {
			from, ok := p.ids[r.id]
			switch {
			case !ok:
				p.report(r.n, r.field, "unknown node id %q: a rewind target must name a node this approval node depends on, directly or not (%s)%s", r.id, allowed, p.didYouMeanID(r.id))
			case from == to:
				p.report(r.n, r.field, "an approval node cannot send the run back to itself: name a node it depends on (%s)", allowed)
			case p.upstream(to, from):
				p.report(r.n, r.field, "node %q runs after approval node %q (it depends on it), so the run cannot go back to it from the gate; name one of its ancestors (%s)", r.id, rn.node.ID, allowed)
			case !p.upstream(from, to):
				p.report(r.n, r.field, "node %q is not an ancestor of approval node %q (no chain of depends and edges leads from it to %q), so the run could not go back to it from the gate; name one of its ancestors (%s) or make %q depend on %q", r.id, rn.node.ID, rn.node.ID, allowed, rn.node.ID, r.id)
			case slices.Contains(rn.node.RewindTargets, r.id):
				p.report(r.n, r.field, "duplicate rewind target %q; list each node once", r.id)
			default:
				rn.node.RewindTargets = append(rn.node.RewindTargets, r.id)
			}
		}
	}
}
