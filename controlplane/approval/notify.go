package approval

import (
	"net/mail"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// ParseNotify reads a notify list — a gate-policy rule's, or a notification route's
// escalation step's — from YAML node v: "person:<id>", "group:<name>" (people-directory
// names) or "email:<address>", each at most once, at most MaxPolicyApprovers of them
// (docs/notifications.md, "Who a gate's policy notifies"). field names the list in errors,
// which errAt makes ("file:line: field: …"); they say what an entry may be.
func ParseNotify(v *yaml.Node, field string, errAt func(*yaml.Node, string, ...any) error) ([]string, error) {
	const want = `"person:<id>", "group:<name>" or "email:<address>"`
	if v.Kind != yaml.SequenceNode {
		return nil, errAt(v, "%s: want a list of %s", field, want)
	}
	if len(v.Content) > MaxPolicyApprovers {
		return nil, errAt(v, "%s: %s, over the limit of %d", field, yamlerr.Plural(len(v.Content), "entry", "entries"), MaxPolicyApprovers)
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range v.Content {
		s, err := scalarString(e, field, errAt)
		if err != nil {
			return nil, err
		}
		kind, rest, _ := strings.Cut(s, ":")
		switch kind {
		case "person", "group":
			if !groupNameRE.MatchString(rest) {
				return nil, errAt(e, "%s: %q: no %s of a people file could have that name (1-64 of A-Z a-z 0-9 . _ -), so it would reach nobody", field, s, kind)
			}
		case "email":
			if a, err := mail.ParseAddress(rest); err != nil || a.Name != "" || a.Address != rest {
				return nil, errAt(e, "%s: %q: want email:<address>, e.g. email:ops@example.com", field, s)
			}
		default:
			return nil, errAt(e, "%s: %q is not %s (an identity such as github:<login> has no address: name its person)", field, s, want)
		}
		if seen[s] {
			return nil, errAt(e, "%s: %q is listed twice", field, s)
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, nil
}
