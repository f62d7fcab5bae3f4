package cpview

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// approvalIDRE is the shape of an approval id (controlplane/server newApprovalID: "a-" and 26
// lowercase base32 characters).
var approvalIDRE = lazyregexp.New(`^a-[a-z2-7]{26}$`)

// approvalIDPrefix starts every approval id; a token never does (a token is base64url of a
// JSON object, so it starts with "eyJ").
const approvalIDPrefix = "a-"

// approvalIDLen is the length of an approval id: "a-" and 26 base32 characters
// (controlplane/server newApprovalID).
const approvalIDLen = len(approvalIDPrefix) + 26

// CheckApprovalArg refuses an `rbook approve/reject` argument that starts like an approval
// id ("a-", any case) but is not one — mistyped, truncated, or a shortened "a-3k2m…" copied
// from a document — so it is not sent to the control plane as a token (which would answer
// the misleading E_TOKEN_INVALID). The message says what is wrong and how to list the
// waiting gates. nil for a valid id or anything else (a token, "-").
func CheckApprovalArg(arg string) error {
	if approvalIDRE.MatchString(arg) || !strings.HasPrefix(strings.ToLower(arg), approvalIDPrefix) {
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
	return fmt.Errorf("%q is not an approval id (%s): an approval id is \"a-\" and 26 characters a-z, 2-7, as the run's log prints it. "+
		"Copy it whole, or list the waiting gates: rbook approvals --pending --control-plane URL", shown, what)
}

// RPCHint is what to add to a control-plane error err that the server's message alone does
// not say how to fix, "" for none: for E_UNAUTHENTICATED when this command sent no
// credentials, where to get them; for E_APPROVAL_NOT_FOUND of an approval id, how to list the
// waiting gates. url is the control plane's address.
func RPCHint(err error, url string, sentCredentials bool) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	if url == "" {
		url = "URL"
	}
	switch {
	case ce.Code() == connect.CodeUnauthenticated && strings.Contains(ce.Message(), "this control plane has no auth file"):
		// A control plane without auth: RBOOK_TOKEN would not help; the server's message says
		// to use the approval token and how to see it.
		return ""
	case ce.Code() == connect.CodeUnauthenticated && !sentCredentials:
		return NoCredentialsHint()
	case ce.Code() == connect.CodeNotFound && strings.Contains(ce.Message(), "E_APPROVAL_NOT_FOUND") && strings.Contains(ce.Message(), "approval_id"):
		return fmt.Sprintf("List the gates still waiting, with their approval ids: rbook approvals --pending --control-plane %s", url)
	}
	return ""
}

// NoCredentialsHint says how to authenticate to a control plane that runs with an auth file:
// RBOOK_TOKEN, and in the Action its control-plane-token input or OIDC.
func NoCredentialsHint() string {
	return "No credentials were sent: set RBOOK_TOKEN to your token from the control plane's auth file (rbook serve --auth-file). " +
		"In the Action: the control-plane-token input (from a secret), or \"permissions: id-token: write\" on the job for GitHub OIDC."
}
