package approval

import (
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// errAtFunc formats an error at a YAML node as "file:line: message".
type errAtFunc func(n *yaml.Node, format string, args ...any) error

// readRulesFile reads a rules file (a gate policy or a playbook policy, named by what in
// errors) of at most maxBytes+1 bytes: the parser refuses more than maxBytes, naming the
// limit. Errors are "<what>: <open error>" and "<what> <file>: <read error>".
func readRulesFile(file, what string, maxBytes int) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(maxBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, file, err)
	}
	return data, nil
}

// parseRulesList reads the one YAML document of a rules file (what names its kind in
// errors: "gate policy", "playbook policy") as strictly as every rbook YAML file
// (docs/decisions/yaml-safety.md): at most maxBytes, exactly one document, no aliases, merge keys or non-core tags
// (checkNodes), a mapping whose only key is "rules", holding a list of at most maxRules
// entries. It returns that list and the errAt that names file:line. Errors are
// "file:line: message" (or "file: message" without a line).
func parseRulesList(data []byte, file, what string, maxBytes, maxRules int) (*yaml.Node, errAtFunc, error) {
	errAt := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", file, n.Line, fmt.Sprintf(format, args...))
	}
	doc, err := yamlerr.DecodeOne(file, data, maxBytes, what, `a mapping with "rules"`)
	if err != nil {
		return nil, nil, err
	}
	if err := checkNodes(doc, errAt); err != nil {
		return nil, nil, err
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil, errAt(root, "a %s is a mapping with the key \"rules\"", what)
	}
	var list *yaml.Node
	for i := 0; i < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "rules" {
			return nil, nil, errAt(k, "unknown field %q (the only top-level field is \"rules\")", k.Value)
		}
		list = v
	}
	switch {
	case list == nil:
		return nil, nil, errAt(root, "rules: missing")
	case list.Kind != yaml.SequenceNode:
		return nil, nil, errAt(list, "rules: want a list of rules")
	case len(list.Content) > maxRules:
		return nil, nil, errAt(list, "rules: %s, over the limit of %d", yamlerr.Plural(len(list.Content), "rule", "rules"), maxRules)
	}
	return list, errAt, nil
}
