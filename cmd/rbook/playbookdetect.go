package main

// A .cantbook given to a runbook command: rbook run and rbook validate say it is a playbook
// and which command takes it, not that the runbook is broken.

import (
	"path/filepath"

	"github.com/rbookhq/rbook-action/action/runbook"
)

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
	if runbook.LooksLikePlaybook(name) {
		return playbookArgError(name, verb)
	}
	if p := filepath.Join(dir, name+".yaml"); runbook.LooksLikePlaybook(p) {
		return playbookArgError(p, verb)
	}
	return nil
}
