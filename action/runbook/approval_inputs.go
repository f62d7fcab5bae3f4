package runbook

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// pbFormKeys are the keys of one field of an approval node's inputs: (docs/approver-inputs.md,
// "Declaration").
var pbFormKeys = []string{"name", "type", "required", "pattern", "options", "default", "description"}

// form reads an approval node's inputs: list, the approver-input form, into rn.node.Form
// (readForm's rules; a later node reads a value as {{ <id>.inputs.<name> }}).
func (p *pbParser) form(rn *rawNode, n *yaml.Node, field string) {
	rn.node.Form = p.readForm(n, field+".inputs", "read later as {{ "+rn.node.ID+".inputs.<name> }}")
}

// readForm reads an approver-input form, the inputs: list of a playbook approval node or of a
// runbook confirm step (docs/approver-inputs.md, "Declaration"), at field. Each problem is
// reported at its own line and column with its field path (<field>[j].<attribute>); the rules
// are gateinputs.CheckField's, so the loader refuses exactly what the control plane would.
// nameUse ends the message of a missing name (how the value is used). It returns the fields
// that passed; the caller knows of the others by the issues reported.
func (p *pbParser) readForm(n *yaml.Node, field, nameUse string) []gateinputs.Field {
	items, ok := p.list(n, field)
	if !ok {
		return nil
	}
	if len(items) > gateinputs.MaxFields {
		p.report(n, field, "declares %d fields; at most %d (an approver fills them in every channel, Slack's modal included)", len(items), gateinputs.MaxFields)
		return nil
	}
	var form []gateinputs.Field
	seen := map[string]*yaml.Node{}
	for j, it := range items {
		f := fmt.Sprintf("%s[%d]", field, j)
		fs := p.fields(it, f, pbFormKeys)
		if fs == nil {
			continue
		}
		in := gateinputs.Field{Type: gateinputs.TypeString}
		ok := true
		if v := fs["name"]; v == nil {
			p.report(it, f+".name", "is required: [a-z][a-z0-9_]{0,63}, %s", nameUse)
			ok = false
		} else if s, good := p.str(v, f+".name"); good {
			in.Name = s
			if first := seen[s]; first != nil {
				p.report(v, f+".name", "duplicate input %q (first at line %d); names are unique in a form", s, first.Line)
				ok = false
			}
			seen[s] = v
		} else {
			ok = false
		}
		if v := fs["type"]; v != nil {
			in.Type, ok = p.strAnd(v, f+".type", ok)
		}
		if v := fs["required"]; v != nil {
			b, good := p.boolean(v, f+".required")
			in.Required, ok = b, ok && good
		}
		if v := fs["pattern"]; v != nil {
			in.Pattern, ok = p.strAnd(v, f+".pattern", ok)
		}
		if v := fs["description"]; v != nil {
			in.Description, ok = p.strAnd(v, f+".description", ok)
		}
		var optNodes []*yaml.Node
		if v := fs["options"]; v != nil {
			if opts, good := p.list(v, f+".options"); good {
				optNodes = opts
				for k, o := range opts {
					s, good := p.str(o, fmt.Sprintf("%s.options[%d]", f, k))
					in.Options, ok = append(in.Options, s), ok && good
				}
			} else {
				ok = false
			}
		}
		// A default written as null is no default; a scalar is taken by its source text.
		if v := fs["default"]; v != nil {
			in.Default, ok = p.strAnd(v, f+".default", ok)
			in.HasDefault = true
		}
		if !ok {
			continue
		}
		if e := gateinputs.CheckField(in); e != nil {
			at := it
			attr, _, _ := strings.Cut(e.Field, "[")
			if v := fs[attr]; v != nil {
				at = v
			}
			var k int
			if _, err := fmt.Sscanf(e.Field, "options[%d]", &k); err == nil && k < len(optNodes) {
				at = optNodes[k]
			}
			p.report(at, f+"."+e.Field, "%s", e.Msg)
			continue
		}
		form = append(form, in)
	}
	return form
}

// strAnd is str, and-ed into the caller's running ok.
func (p *pbParser) strAnd(n *yaml.Node, field string, ok bool) (string, bool) {
	s, good := p.str(n, field)
	return s, ok && good
}

// checkFormRef refuses a template path <approval node>.inputs.<name> whose name the node's
// form does not declare: the binding would never exist (docs/approver-inputs.md, "Where the
// values go"). It returns the message, or "" when the path is fine or not a form path.
func (p *pbParser) checkFormRef(ref string) string {
	parts := strings.Split(ref, ".")
	if len(parts) < 3 || parts[1] != "inputs" {
		return ""
	}
	i, ok := p.ids[parts[0]]
	if !ok || p.nodes[i].step.Type != TypeApproval {
		return ""
	}
	var names []string
	for _, f := range p.nodes[i].node.Form {
		if f.Name == parts[2] {
			return ""
		}
		names = append(names, f.Name)
	}
	if len(names) == 0 {
		return fmt.Sprintf("template names %q, but approval node %q declares no inputs", ref, parts[0])
	}
	return fmt.Sprintf("template names %q, but approval node %q declares only the inputs %s", ref, parts[0], strings.Join(names, ", "))
}
