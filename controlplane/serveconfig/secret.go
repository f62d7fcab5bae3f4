package serveconfig

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// secretFlags are rbook serve's approval-secret flags (docs/tls.md, "Rotating the approval secret").
type secretFlags struct{ resetCheck bool }

// add registers --reset-approval-secret-check on fs.
func (sf *secretFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&sf.resetCheck, "reset-approval-secret-check", false,
		"record RBOOK_APPROVAL_SECRET as this database's approval secret even though it is not the one recorded (the old secret is lost; tokens of open gates stop working)")
}

// apply reads the verify-only RBOOK_APPROVAL_SECRET_PREVIOUS into cfg and turns on
// the start-up check that replicas agree on the secret. It returns the words for the
// listening line ("" without a previous secret). Errors: a short previous secret, naming the
// variable.
func (sf *secretFlags) apply(cfg *server.Config) (string, error) {
	prev, err := approval.PreviousSecretFromEnv(os.Getenv)
	if err != nil {
		return "", err
	}
	cfg.PreviousSecret = prev
	cfg.CheckSecretAgreement = true
	cfg.ReplaceSecretCheck = sf.resetCheck
	if prev == nil {
		return "", nil
	}
	return "approval tokens of the previous secret accepted (" + approval.EnvApprovalSecretPrevious + ")", nil
}
