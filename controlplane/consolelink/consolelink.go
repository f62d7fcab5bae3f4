// Package consolelink builds the links to the approver's console, the web page a control
// plane serves on its own port (docs/console-links.md): the public URL a control plane is
// reached at (rbook serve --public-url; the embedded control plane of rbook run uses its
// loopback address) and a gate's page under it. Every channel that points at a gate — the
// Approval message's approval_url, GitHub protection-rule status reports, the job log and
// summary, rbook approvals, the terminal — gets its link from the control plane, which builds
// it here, so there is one spelling of it.
//
// A link carries no secret: it names the approval id only, and the page asks whoever opens
// it to sign in (docs/console-links.md, "What a link carries").
package consolelink

import (
	"fmt"
	"net/url"
	"strings"
)

// ApprovalsPath is the path prefix of a gate's page on the console: a gate's page is
// <public URL>/approvals/<approval id>.
const ApprovalsPath = "/approvals/"

// ParsePublicURL checks raw as the public URL of a control plane and returns it in one
// spelling: its trailing slashes trimmed. It must be an absolute http:// or https:// URL with
// a host, and may have a path (a control plane behind a reverse proxy under a prefix); it may
// not carry user information (a password would be printed in every link), a query or a
// fragment (a link appends a path to it). "" is returned as is (no public URL).
//
// name is what the user gave it as (a flag such as "--public-url"); every error names it and
// says what to give instead.
func ParsePublicURL(raw, name string) (string, error) {
	if raw == "" {
		return "", nil
	}
	example := "e.g. https://rbook.example.com or http://127.0.0.1:7070"
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%s %q is not a URL (%v): give the http:// or https:// address approvers open, %s", name, raw, unwrapURLError(err), example)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%s %q: the scheme must be http:// or https://, %s", name, raw, example)
	case u.Opaque != "" || u.Host == "":
		return "", fmt.Errorf("%s %q has no host: give the http:// or https:// address approvers open, %s", name, raw, example)
	case u.User != nil:
		return "", fmt.Errorf("%s %q carries a user name or password (user@): links to the console are printed in logs and summaries, so give the address without it", name, withoutUser(u))
	case u.RawQuery != "" || u.ForceQuery:
		return "", fmt.Errorf("%s %q has a query (?…): give the address without it, %s", name, raw, example)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", fmt.Errorf("%s %q has a fragment (#…): give the address without it, %s", name, raw, example)
	}
	return strings.TrimRight(raw, "/"), nil
}

// ApprovalURL is the page of gate approvalID on the console at publicURL (as
// ParsePublicURL returns it): publicURL + "/approvals/" + the path-escaped id. It is "" when
// either is "" (a control plane without a public URL has no links).
func ApprovalURL(publicURL, approvalID string) string {
	if publicURL == "" || approvalID == "" {
		return ""
	}
	return publicURL + ApprovalsPath + url.PathEscape(approvalID)
}

// unwrapURLError is the reason of a url.Parse error without the repeated URL.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// withoutUser is u without its user information, for an error message: a user name may be a
// token as well as a password.
func withoutUser(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}
