package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/rbookhq/rbook-action/action/cpclient"
)

// haltedBeforeStart adds to err, a run's failure to start on its control plane, what became
// of the run when the control plane did not answer: a fresh run has no state file yet, so
// nothing is "kept in the state file"; a resumed one keeps everything there. Any other
// error (a refusal, with its own hint) is returned as it is.
func haltedBeforeStart(err error, statePath string) error {
	var ue *cpclient.UnreachableError
	if !errors.As(err, &ue) {
		return err
	}
	if _, serr := os.Stat(statePath); serr == nil {
		return fmt.Errorf("%w\nThe run is halted and everything is kept in the state file %s: run the same command again once the control plane is back", err, statePath)
	}
	return fmt.Errorf("%w\nNothing was run and no state file was written: run the same command again once the control plane is back", err)
}
