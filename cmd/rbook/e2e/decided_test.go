package e2e

import rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"

// decidedMessage is the message of the run's last gate_decided transition (who decided the
// gate and why, docs/spec/runbooks.md "confirm"), or "" when no gate was decided.
func decidedMessage(resp *rbookv1.GetRunResponse) string {
	var msg string
	for _, tr := range resp.GetTransitions() {
		if tr.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_GATE_DECIDED {
			msg = tr.GetMessage()
		}
	}
	return msg
}
