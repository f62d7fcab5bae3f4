package run

import (
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxInputsFileBytes caps an --inputs file (1 MiB, the playbook's own limit).
const MaxInputsFileBytes = 1 << 20

// GivenInputs reads --inputs FILE (inputsFile) and then each --input NAME=VALUE (inputs, which
// win) into the map
// runbook.ValidatePlaybookInputs takes. Errors name the flag, the file and line, or the entry.
func GivenInputs(inputsFile string, inputs []string) (map[string]string, error) {
	given := map[string]string{}
	if inputsFile != "" {
		fi, err := os.Stat(inputsFile)
		if err != nil {
			return nil, fmt.Errorf("--inputs %s: %w", inputsFile, err)
		}
		if fi.Size() > MaxInputsFileBytes {
			return nil, fmt.Errorf("--inputs %s: %d bytes is over the limit of %d", inputsFile, fi.Size(), MaxInputsFileBytes)
		}
		data, err := os.ReadFile(inputsFile)
		if err != nil {
			return nil, fmt.Errorf("--inputs %s: %w", inputsFile, err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("--inputs %s: %v", inputsFile, err)
		}
		if len(doc.Content) > 0 {
			m := doc.Content[0]
			if m.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("%s:%d:%d: --inputs must be a mapping of input names to values", inputsFile, m.Line, m.Column)
			}
			for i := 0; i+1 < len(m.Content); i += 2 {
				k, v := m.Content[i], m.Content[i+1]
				if k.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("%s:%d:%d: --inputs: an input name must be a plain string", inputsFile, k.Line, k.Column)
				}
				if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
					return nil, fmt.Errorf("%s:%d:%d: %s: an input value must be a string, number or boolean", inputsFile, v.Line, v.Column, k.Value)
				}
				if _, dup := given[k.Value]; dup {
					return nil, fmt.Errorf("%s:%d:%d: %s: the input is given twice", inputsFile, k.Line, k.Column, k.Value)
				}
				given[k.Value] = v.Value
			}
		}
	}
	flagged := map[string]bool{}
	for _, kv := range inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--input %q: write NAME=VALUE", kv)
		}
		// The same input twice on the command line is refused as in an --inputs file (the
		// last one used to win silently).
		if flagged[k] {
			return nil, fmt.Errorf("--input %s: the input is given twice; give each input once", k)
		}
		flagged[k] = true
		given[k] = v
	}
	return given, nil
}
