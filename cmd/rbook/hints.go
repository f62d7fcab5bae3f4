package main

import (
	"fmt"
	"os"

	pipeline "github.com/rbookhq/rbook-action/action/run"

	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/internal/cpview"
)

// Client-side hints added to control-plane errors where cmd/rbook prints them (the hints
// themselves are internal/cpview's). The server's message is kept as it is; the hint follows
// it on its own lines.

// cpSendsNoCredentials reports whether newCPClient would send no Authorization header
// (--control-plane-auth none, or auto without RBOOK_TOKEN outside a job that may request an
// OIDC token).
func cpSendsNoCredentials() bool {
	mode, err := cpAuthConfig().ResolvedMode()
	if err != nil {
		return false
	}
	switch mode {
	case pipeline.AuthNone:
		return true
	case pipeline.AuthAuto:
		return os.Getenv("RBOOK_TOKEN") == "" && !github.CanRequestIDToken(os.Getenv)
	}
	return false
}

// startErrorHint adds rpcHint's hint to err, an `rbook run` that could not start on the
// control plane at url; in a runner whose run sent no credentials it also writes an error
// annotation (::error title=…::), the message escaped as workflow-command data.
func startErrorHint(err error, url string) error {
	noCreds := cpSendsNoCredentials()
	h := cpview.RPCHint(err, url, !noCreds)
	if h == "" {
		return err
	}
	if ciOut != nil {
		ciOut.log.Annotate("", 0, "rbook: the control plane refused the run (E_UNAUTHENTICATED)", h)
	} else if github.InRunner() {
		fmt.Println(github.CommandLine("error", map[string]string{"title": "rbook: the control plane refused the run (E_UNAUTHENTICATED)"}, h))
	}
	return fmt.Errorf("%w\n%s", err, h)
}

// hintURL is the control plane's address for a hint, "" when it cannot be resolved.
func (f *cpFlags) hintURL() string {
	defer func(was bool) { f.t.FromFile = was }(f.t.FromFile)
	u, _, err := f.resolve()
	if err != nil {
		return ""
	}
	return u
}

// decideLong is the --help text of `rbook approve` (approve) or `rbook reject`: each its own
// exit codes and outcome.
func decideLong(approve bool) string {
	name := `a waiting confirm gate, named by its APPROVAL_ID ("a-" and 26 characters a-z, 2-7,
what a run prints in CI) or by the TOKEN it was issued with (the executor prints "rbook
approve <token>" on a terminal; "-" reads the token from stdin, keeping it out of shell
history). An argument that starts with "a-" but is not a whole approval id is refused here.

By approval id you need an approver's bearer token ($RBOOK_TOKEN, rbook serve --auth-file):
the control plane records your identity from it, and its gate policy decides whether you
may decide the gate (E_PERMISSION_DENIED)`
	auth := `--approver NAME is only for a control plane without auth (no $RBOOK_TOKEN): it then records
the name as "unverified:NAME". With a bearer token your identity is the token's.

On the embedded control plane of an 'rbook run' in this folder (no --control-plane, no
$RBOOK_CONTROL_PLANE) the approval id works without auth: the folder's
.rbook/local-approver-key (0600, only you can read it) shows the control plane you own the
run, and the decision is recorded as "unverified:<your user name>" (or --approver NAME).`
	if approve {
		return "Approve " + name + `, whether you started the run (E_SELF_APPROVAL:
another person must approve) and how many distinct approvers the gate needs. A gate that
needs more prints how far it got ("approval a-…: 1 of 2 approvals (alice); waiting for 1
more"); approving twice counts once. One reject by an allowed approver rejects. The first
decision wins; a second one fails with E_APPROVAL_ALREADY_DECIDED.

A gate that declares an approver-input form (docs/approver-inputs.md) takes its values as
--input NAME=VALUE, once per field; defaults fill the fields you leave out. A missing
required field, a wrong type, a pattern or options mismatch or an unknown name is refused
naming the field (E_INVALID_ARGUMENT, exit 1), and nothing is decided. The decided values
are printed after the decision ("Inputs: target=blue").

` + auth + `

` + cpHelp + `

Exit codes: 0 approved (or your approval was counted and the gate waits for more), 1 refused
or the control plane unreachable (the message names the error code, e.g.
E_APPROVAL_ALREADY_DECIDED, E_TOKEN_EXPIRED, E_SELF_APPROVAL), 2 usage, a malformed
approval id, or no control plane.`
	}
	return "Reject " + name + `. One reject by an allowed approver rejects the
gate, however many approvals it needs and has: the run takes the gate's on_fail. --reason
is recorded with the decision and shown in the run's log. The first decision wins; a second
one fails with E_APPROVAL_ALREADY_DECIDED.

--redo-from NODE sends a playbook run back instead (docs/push-back.md): NODE must be one of
the approval node's rewind_targets (E_INVALID_ARGUMENT names the allowed ones, and nothing
is decided); the run re-executes from NODE with --reason bound as {{ <approval node
id>.feedback }}, and the gate opens again, a new approval, when the run gets back to it.

` + auth + `

` + cpHelp + `

Exit codes: 0 rejected, 1 refused or the control plane unreachable (the message names the
error code, e.g. E_APPROVAL_ALREADY_DECIDED, E_TOKEN_EXPIRED, E_PERMISSION_DENIED), 2 usage,
a malformed approval id, or no control plane.`
}

// decideExample is the Examples section of `rbook approve` (approve) or `rbook reject`.
func decideExample(approve bool) string {
	if approve {
		return `  RBOOK_TOKEN=$APPROVER_TOKEN rbook approve a-5wbvol5fcc25vsfvgyhmosr26e --reason "checked the canary" --control-plane https://rbook.example.com
  rbook approve <token>                      # the token the waiting run printed
  rbook approve - --reason "checked the canary" < token.txt
  rbook approve <token> --control-plane http://127.0.0.1:7070 -o json
  rbook approve a-5wbvol5fcc25vsfvgyhmosr26e --input target=blue --input replicas=3   # the gate's form`
	}
	return `  RBOOK_TOKEN=$APPROVER_TOKEN rbook reject a-5wbvol5fcc25vsfvgyhmosr26e --reason "error rate up on the canary" --control-plane https://rbook.example.com
  rbook reject <token> --reason "wrong change window"   # the token the waiting run printed
  rbook reject - --reason "not now" < token.txt
  rbook reject <token> --approver alice       # a control plane without auth: recorded as unverified:alice
  rbook reject a-5wbvol5fcc25vsfvgyhmosr26e --redo-from build --reason "add the changelog entry"   # send a playbook back to build`
}
