// Package yamlerr reads the control plane's YAML config files (gate policy, auto-pass policy,
// OIDC and sign-in configs, notification config, people directory) as one document each
// (DecodeOne) and turns a gopkg.in/yaml.v3 syntax error into "file:line: message": yaml.v3
// writes "yaml: line N: …", leaves the line out for a problem on line 1, and counts parser
// (not scanner) problems from 0 (the same rules as the runbook loader, action/runbook
// yamlsafe.go).
package yamlerr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

var lineRE = lazyregexp.New(`^yaml: line (\d+): `)

// parserProblems are the problems yaml.v3's parser (as opposed to its scanner) reports,
// with a 0-based line.
var parserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator",
	"did not find expected <document start>", "did not find expected <stream-start>", "did not find expected key",
	"did not find expected node content", "found duplicate %TAG directive", "found duplicate %YAML directive",
	"found incompatible YAML document", "found undefined tag handle",
}

// At is err, a syntax error yaml.v3 returned for data (the text of file), as
// "file:LINE: message" with a 1-based LINE; a tab in the indentation is named with its line
// and a hint to indent with spaces.
func At(file string, data []byte, err error) error {
	line, msg := Position(data, err)
	return fmt.Errorf("%s:%d: %s", file, line, msg)
}

// Position is the 1-based line of a yaml.v3 syntax error err in data, and its message
// without yaml.v3's "yaml: line N: " prefix.
func Position(data []byte, err error) (line int, msg string) {
	msg = strings.TrimPrefix(err.Error(), "yaml: ")
	line = 1 // no line: yaml.v3 leaves out line 1 (its 0-based mark 0)
	if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimPrefix(err.Error(), m[0])
		if slices.Contains(parserProblems, msg) {
			line++
		}
	}
	if strings.Contains(msg, "tab character") || strings.Contains(msg, "cannot start any token") {
		// "cannot start any token" is reported at the offending line itself; the
		// tab-indentation errors at the line of the scalar before it.
		if tl := indentTabLine(data, line); tl > 0 && (tl == line || strings.Contains(msg, "tab character")) {
			line = tl
			msg += " (indent YAML with spaces, not tabs)"
		}
	}
	return line, msg
}

// indentTabLine is the first line at or after fromLine whose indentation holds a tab, 0 for none.
func indentTabLine(data []byte, fromLine int) int {
	for i, text := range bytes.Split(data, []byte("\n")) {
		if i+1 < fromLine {
			continue
		}
		indent := text[:len(text)-len(bytes.TrimLeft(text, " \t"))]
		if bytes.IndexByte(indent, '\t') >= 0 {
			return i + 1
		}
	}
	return 0
}

// Plural is "1 one" for n == 1, else "n many" ("1 rule", "2 rules"), for the counts in
// config-file and CLI messages, which must never say "1 rules" or "1 entries".
func Plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// DecodeOne decodes data, the text of file, as exactly one YAML document, the first step of
// every control-plane config parser (gate policy, auto-pass policy, OIDC and sign-in configs,
// notification config, people directory). Errors: data longer than maxBytes
// ("file: larger than N bytes"), no document ("file: empty WHAT: want WANT"), a syntax error
// (At), and a second document ("file:LINE: a WHAT is exactly one YAML document").
func DecodeOne(file string, data []byte, maxBytes int, what, want string) (*yaml.Node, error) {
	if len(data) > maxBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, maxBytes)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty %s: want %s", file, what, want)
		}
		return nil, At(file, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: a %s is exactly one YAML document", file, extra.Line, what)
	}
	return &doc, nil
}
