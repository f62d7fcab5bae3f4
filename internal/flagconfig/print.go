package flagconfig

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Redactor is how a setting's value is shown: value itself, or a form without its secret
// part (a database URL without its password). It is called for every string value and list
// item; nil shows values as they are.
type Redactor func(f *pflag.Flag, value string) string

// Effective is the effective configuration of fs after Apply (res) as YAML: one key per
// setting with its value and, as a comment, where the value came from (Origin.String). The
// output is itself a valid configuration file. A flag marked secret (SecretAnnotation) is
// shown only as a comment, "<set, N bytes>" or "<not set>"; other strings go through redact.
// header lines are written first and footer lines last, each as a comment.
func Effective(fs *pflag.FlagSet, res *Result, opts Options, redact Redactor, header, footer []string) ([]byte, error) {
	if redact == nil {
		redact = func(_ *pflag.Flag, v string) string { return v }
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	var secrets []string
	for _, f := range Settings(fs, opts) {
		origin := res.Origins[f.Name].String()
		if len(f.Annotations[SecretAnnotation]) > 0 {
			secrets = append(secrets, f.Name+": "+SecretState(f.Value.String(), origin))
			continue
		}
		key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: f.Name}
		val := valueNode(f, redact)
		val.LineComment = origin
		m.Content = append(m.Content, key, val)
	}
	var b bytes.Buffer
	for _, l := range header {
		fmt.Fprintf(&b, "# %s\n", l)
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("print the configuration: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("print the configuration: %w", err)
	}
	for _, l := range append(secrets, footer...) {
		fmt.Fprintf(&b, "# %s\n", l)
	}
	return b.Bytes(), nil
}

// SecretState is how a secret is shown: "<not set>" when value is empty, else
// "<set, from SOURCE, N bytes>" (SOURCE: a variable name, "flag", "file line 3").
func SecretState(value, source string) string {
	if value == "" {
		return "<not set>"
	}
	return fmt.Sprintf("<set, from %s, %d bytes>", source, len(value))
}

// valueNode is f's current value as a YAML node of its Kind.
func valueNode(f *pflag.Flag, redact Redactor) *yaml.Node {
	kind := KindOf(f.Value)
	if sv, ok := f.Value.(pflag.SliceValue); ok && kind.List {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, item := range sv.GetSlice() {
			seq.Content = append(seq.Content, scalarNode(f, kind.Item, item, redact))
		}
		return seq
	}
	if kind.List { // a list type that is no SliceValue: shown as pflag prints it
		return scalarNode(f, String, strings.Trim(f.Value.String(), "[]"), redact)
	}
	return scalarNode(f, kind.Item, f.Value.String(), redact)
}

func scalarNode(f *pflag.Flag, s Scalar, v string, redact Redactor) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: v}
	switch s {
	case Boolean:
		n.Tag = "!!bool"
	case Integer:
		n.Tag = "!!int"
	case Number:
		n.Tag = "!!float"
	default:
		n.Tag, n.Value = "!!str", redact(f, v)
	}
	return n
}
