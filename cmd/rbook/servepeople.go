package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// servePeople holds rbook serve's --people (docs/people.md).
var servePeople struct{ file string }

// addServePeopleFlags registers --people on cmd.
func addServePeopleFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&servePeople.file, "people", "", "YAML file: the directory of people, linking each person's identities (auth file, github:, slack:, oidc:, email:) so M-of-N counts people and four-eyes compares them (see docs/people.md)")
}

// applyServePeople loads --people into cfg.People and returns the words for the listening
// line ("" without the flag). Errors name the file, line and field.
func applyServePeople(cfg *server.Config) (string, error) {
	if servePeople.file == "" {
		return "", nil
	}
	d, err := people.Load(servePeople.file)
	if err != nil {
		return "", err
	}
	cfg.People = d
	return fmt.Sprintf("people %s (%s)", servePeople.file, yamlerr.Plural(d.Len(), "person", "people")), nil
}
