package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/state"
)

// Client-side hints added to control-plane errors where cmd/rbook prints them (issue 7
// new-user findings 8 and 9). The server's message is kept as it is; the hint follows it on
// its own lines.

// approvalIDPrefix starts every approval id; a token never does (a token is base64url of a
// JSON object, so it starts with "eyJ").
const approvalIDPrefix = "a-"

// approvalIDLen is the length of an approval id: "a-" and 26 base32 characters
// (controlplane/server newApprovalID).
const approvalIDLen = len(approvalIDPrefix) + 26

// checkApprovalArg refuses an `rbook approve/reject` argument that starts like an approval
// id ("a-", any case) but is not one — mistyped, truncated, or the README's shortened
// "a-3k2m…" — so it is not sent to the control plane as a token (which would answer the
// misleading E_TOKEN_INVALID; issue 7 new-user finding 8). The message says what is wrong
// and how to list the waiting gates. nil for a valid id or anything else (a token, "-").
func checkApprovalArg(arg string) error {
	if isApprovalID(arg) || !strings.HasPrefix(strings.ToLower(arg), approvalIDPrefix) {
		return nil
	}
	what := fmt.Sprintf("it has %d characters after \"a-\"", len([]rune(arg))-len(approvalIDPrefix))
	if bad := strings.IndexFunc(arg[len(approvalIDPrefix):], func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '2' && r <= '7')
	}); bad >= 0 {
		r := []rune(arg[len(approvalIDPrefix)+bad:])[0]
		what = fmt.Sprintf("%q is not one of a-z, 2-7", r)
	}
	shown := arg
	if len(shown) > 2*approvalIDLen {
		shown = shown[:2*approvalIDLen] + "…"
	}
	return abort("rbook: %q is not an approval id (%s): an approval id is \"a-\" and 26 characters a-z, 2-7, as the run's log prints it. "+
		"Copy it whole, or list the waiting gates: rbook approvals --pending --control-plane URL", shown, what)
}

// rpcHint is what to add to a control-plane error err that the server's message alone does
// not say how to fix, "" for none: for E_UNAUTHENTICATED when this command sent no
// credentials, where to get them (finding 9); for E_APPROVAL_NOT_FOUND of an approval id,
// how to list the waiting gates (finding 8). url is the control plane's address.
func rpcHint(err error, url string, sentCredentials bool) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	if url == "" {
		url = "URL"
	}
	switch {
	case ce.Code() == connect.CodeUnauthenticated && strings.Contains(ce.Message(), "this control plane has no auth file"):
		// A control plane without auth: RBOOK_TOKEN would not help (issue 10, new-user
		// finding 5); the server's message says to use the approval token and how to see it.
		return ""
	case ce.Code() == connect.CodeUnauthenticated && !sentCredentials:
		return noCredentialsHint()
	case ce.Code() == connect.CodeNotFound && strings.Contains(ce.Message(), "E_APPROVAL_NOT_FOUND") && strings.Contains(ce.Message(), "approval_id"):
		return fmt.Sprintf("List the gates still waiting, with their approval ids: rbook approvals --pending --control-plane %s", url)
	}
	return ""
}

// noCredentialsHint says how to authenticate to a control plane that runs with an auth file
// (finding 9): RBOOK_TOKEN, and in the Action its control-plane-token input or OIDC.
func noCredentialsHint() string {
	return "No credentials were sent: set RBOOK_TOKEN to your token from the control plane's auth file (rbook serve --auth-file). " +
		"In the Action: the control-plane-token input (from a secret), or \"permissions: id-token: write\" on the job for GitHub OIDC."
}

// cpSendsNoCredentials reports whether newCPClient would send no Authorization header
// (--control-plane-auth none, or auto without RBOOK_TOKEN outside a job that may request an
// OIDC token).
func cpSendsNoCredentials() bool {
	mode, err := cpAuthMode()
	if err != nil {
		return false
	}
	switch mode {
	case cpAuthNone:
		return true
	case cpAuthAuto:
		return os.Getenv("RBOOK_TOKEN") == "" && !github.CanRequestIDToken(os.Getenv)
	}
	return false
}

// startErrorHint adds rpcHint's hint to err, an `rbook run` that could not start on the
// control plane at url; in a runner whose run sent no credentials it also writes an error
// annotation (::error title=…::), the message escaped as workflow-command data.
func startErrorHint(err error, url string) error {
	noCreds := cpSendsNoCredentials()
	h := rpcHint(err, url, !noCreds)
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
	defer func(was bool) { f.fromFile = was }(f.fromFile)
	u, _, err := f.resolve()
	if err != nil {
		return ""
	}
	return u
}

// decideLong is the --help text of `rbook approve` (approve) or `rbook reject`: each its own
// exit codes and outcome (issue 7 new-user finding 7: reject's help was approve's).
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

// warnControlPlaneLeftBehind warns, on resuming run st with no control plane (--control-plane
// off or RBOOK_CONTROL_PLANE=off), when st's state file says the run reports to one: that
// control plane's record keeps the run in progress and never gets this run's transitions
// (issue 7 new-user finding 12). It names the URL and the command that resumes with it.
// Nothing for a run that never reported to a control plane.
func warnControlPlaneLeftBehind(w io.Writer, st *state.State, runbookName string) {
	if st.ControlPlane == "" {
		return
	}
	resume := "rbook run " + runbookName + " --control-plane " + st.ControlPlane
	where := "the control plane " + st.ControlPlane
	if st.ControlPlaneEmbedded {
		resume = "rbook run " + runbookName + ", with RBOOK_CONTROL_PLANE unset"
		where = "the embedded control plane (" + embeddedDB + ")"
	}
	fmt.Fprintf(w, "Warning: run %s reports to %s, but this resume runs with the control plane off: its record there will not get "+
		"this run's transitions and keeps the run in progress. To keep it in step, stop now (Ctrl-C) and resume with: %s\n",
		st.RunID, where, resume)
}
