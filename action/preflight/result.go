package preflight

import (
	"errors"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// Result is rbook playbook validate -o json: one entry per file, in argument order.
type Result struct {
	Files []File `json:"files"`
}

// File is one checked file: ok with the playbook's name, node count and SHA-256
// hash, or its issues (every one, sorted by line and column); warnings in both cases.
type File struct {
	File     string  `json:"file"`
	OK       bool    `json:"ok"`
	Name     string  `json:"name,omitempty"`
	Nodes    int     `json:"nodes,omitempty"`
	Hash     string  `json:"hash,omitempty"`
	Issues   []Issue `json:"issues"`
	Warnings []Issue `json:"warnings"`
}

// Issue is a runbook.Diagnostic as JSON (line and column 1-based; 0 when unknown).
type Issue struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// IssueOf is d as JSON.
func IssueOf(d runbook.Diagnostic) Issue {
	return Issue{File: d.File, Line: d.Line, Column: d.Column, Field: d.Field, Message: d.Message}
}

// IssuesOf lists the issues of a playbook that did not load: every issue of a
// PlaybookParseError, else the one error (a file that cannot be read).
func IssuesOf(path string, err error) []Issue {
	var pe *runbook.PlaybookParseError
	if errors.As(err, &pe) {
		out := make([]Issue, 0, len(pe.Issues))
		for _, d := range pe.Issues {
			out = append(out, IssueOf(d))
		}
		return out
	}
	return []Issue{{File: path, Message: err.Error()}}
}
