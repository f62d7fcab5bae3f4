package main

// A .cantbook given to a runbook command (issue 9 UX, item 6): rbook run and rbook validate
// said the runbook was broken; they say it is a playbook and which command takes it.

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// PlaybookExt is the file extension of a playbook (seed playbooks.txt).
const PlaybookExt = ".cantbook"

// maxSniffBytes caps how much of a file looksLikePlaybook reads (the playbook size limit).
const maxSniffBytes = 1 << 20

// looksLikePlaybook reports whether path is a playbook: its name ends in .cantbook, or it is
// a YAML mapping with a top-level "nodes" key and no "steps" key (a runbook has steps). A
// file that cannot be read or parsed is no playbook (the runbook loader then says why).
func looksLikePlaybook(path string) bool {
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

// playbookArgError is the refusal of a runbook command given a playbook: "FILE is a playbook
// (.cantbook), not a runbook: use rbook playbook VERB FILE". verb is "run" or "validate".
func playbookArgError(file, verb string) error {
	other := "validate"
	if verb == "validate" {
		other = "run"
	}
	return abort("%s is a playbook (.cantbook), not a runbook: use rbook playbook %s %s (rbook playbook %s %s to %s it)", file, verb, file, other, file, map[string]string{"run": "run", "validate": "check"}[other])
}

// playbookGiven returns the refusal when the RUNBOOK argument name of a runbook command
// names a playbook: the file itself, or <dir>/<name>.yaml; nil otherwise.
func playbookGiven(dir, name, verb string) error {
	if name == "" {
		return nil
	}
	if looksLikePlaybook(name) {
		return playbookArgError(name, verb)
	}
	if p := filepath.Join(dir, name+".yaml"); looksLikePlaybook(p) {
		return playbookArgError(p, verb)
	}
	return nil
}
