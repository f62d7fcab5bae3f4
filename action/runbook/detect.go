package runbook

import (
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// PlaybookExt is the file extension of a playbook.
const PlaybookExt = ".cantbook"

// maxSniffBytes caps how much of a file LooksLikePlaybook reads (the playbook size limit).
const maxSniffBytes = 1 << 20

// LooksLikePlaybook reports whether path is a playbook: its name ends in .cantbook, or it is
// a YAML mapping with a top-level "nodes" key and no "steps" key (a runbook has steps). A
// file that cannot be read or parsed is no playbook (the runbook loader then says why).
func LooksLikePlaybook(path string) bool {
	if strings.HasSuffix(path, PlaybookExt) {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSniffBytes))
	if err != nil {
		return false
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return false
	}
	nodes, steps := false, false
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch m.Content[i].Value {
		case "nodes":
			nodes = true
		case "steps":
			steps = true
		}
	}
	return nodes && !steps
}
