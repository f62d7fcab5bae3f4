package runbook

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// PlaybookInputError is ValidatePlaybookInputs' error: every required input without a value
// and every given input the playbook does not declare, together (docs/playbooks.md, "Inputs and bindings": required
// inputs missing → refused before any record).
type PlaybookInputError struct {
	// Playbook is the playbook's name.
	Playbook string
	// Missing are the required inputs with neither a value nor a default, in declaration order.
	Missing []string
	// Unknown are the given names the playbook has no input for, sorted.
	Unknown []string
	// Declared are the playbook's input names, in declaration order (for the message).
	Declared []string
}

func (e *PlaybookInputError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "missing required input(s) "+quoteJoin(e.Missing)+" (give each with --input name=value)")
	}
	if len(e.Unknown) > 0 {
		var us []string
		for _, u := range e.Unknown {
			us = append(us, fmt.Sprintf("%q%s", u, didYouMean(u, e.Declared)))
		}
		declared := "none"
		if len(e.Declared) > 0 {
			declared = strings.Join(e.Declared, ", ")
		}
		parts = append(parts, "unknown input(s) "+strings.Join(us, ", ")+" (declared: "+declared+")")
	}
	return "playbook " + e.Playbook + ": " + strings.Join(parts, "; ")
}

// ValidatePlaybookInputs returns the run's first bindings (docs/playbooks.md, "Inputs and bindings"; docs/spec/playbooks.md):
// each given value as a string under its input's name, else the input's default (its YAML
// value: json.Number, bool, string, list, map or nil), an optional input with neither left
// out. The error is a *PlaybookInputError listing every missing required input and every
// unknown one; plan must be a playbook Plan (else a plain error).
func ValidatePlaybookInputs(plan *Plan, given map[string]string) (map[string]any, error) {
	if plan == nil || plan.Kind != KindPlaybook || plan.Playbook == nil {
		return nil, errors.New("ValidatePlaybookInputs: not a playbook plan")
	}
	e := &PlaybookInputError{Playbook: plan.Name}
	out := map[string]any{}
	for _, in := range plan.Playbook.Inputs {
		e.Declared = append(e.Declared, in.Name)
		v, ok := given[in.Name]
		switch {
		case ok:
			out[in.Name] = v
		case in.HasDefault:
			out[in.Name] = in.Default
		case in.Required:
			e.Missing = append(e.Missing, in.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if !slices.Contains(e.Declared, k) {
			e.Unknown = append(e.Unknown, k)
		}
	}
	if len(e.Missing) > 0 || len(e.Unknown) > 0 {
		return nil, e
	}
	return out, nil
}
