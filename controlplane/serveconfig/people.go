package serveconfig

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// peopleFlags are rbook serve's --people (docs/people.md).
type peopleFlags struct{ file string }

// add registers --people on fs.
func (p *peopleFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&p.file, "people", "", "YAML file: the directory of people, linking each person's identities (auth file, github:, slack:, oidc:, email:) so M-of-N counts people and four-eyes compares them (see docs/people.md)")
}

// apply loads --people into cfg.People and returns the words for the listening
// line ("" without the flag). Errors name the file, line and field.
func (p *peopleFlags) apply(cfg *server.Config) (string, error) {
	if p.file == "" {
		return "", nil
	}
	d, err := people.Load(p.file)
	if err != nil {
		return "", err
	}
	cfg.People = d
	return fmt.Sprintf("people %s (%s)", p.file, yamlerr.Plural(d.Len(), "person", "people")), nil
}
