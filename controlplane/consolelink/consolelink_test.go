package consolelink_test

import (
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/consolelink"
)

// A public URL is kept in one spelling (no trailing slash), with a path prefix allowed.
func TestParsePublicURLKeepsOneSpelling(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"https://rbook.example.com", "https://rbook.example.com"},
		{"https://rbook.example.com/", "https://rbook.example.com"},
		{"http://127.0.0.1:7070//", "http://127.0.0.1:7070"},
		{"https://ops.example.com/rbook/", "https://ops.example.com/rbook"},
		{"http://[::1]:7070", "http://[::1]:7070"},
	} {
		got, err := consolelink.ParsePublicURL(c.in, "--public-url")
		if err != nil || got != c.want {
			t.Errorf("ParsePublicURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// A URL a link cannot be built on is refused with an error that names the flag and says why;
// user information never appears in the message.
func TestParsePublicURLRefusesWhatALinkCannotCarry(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"bad scheme", "ftp://rbook.example.com", `--public-url "ftp://rbook.example.com": the scheme must be http:// or https://`},
		{"no scheme", "rbook.example.com", `--public-url "rbook.example.com": the scheme must be http:// or https://`},
		{"no host", "https:///approvals", `--public-url "https:///approvals" has no host`},
		{"opaque", "http:rbook.example.com", `--public-url "http:rbook.example.com" has no host`},
		{"query", "https://rbook.example.com/?team=sre", `--public-url "https://rbook.example.com/?team=sre" has a query (?…)`},
		{"empty query", "https://rbook.example.com/?", `--public-url "https://rbook.example.com/?" has a query (?…)`},
		{"fragment", "https://rbook.example.com/#top", `--public-url "https://rbook.example.com/#top" has a fragment (#…)`},
		{"user and password", "https://ann:hunter2@rbook.example.com", `--public-url "https://rbook.example.com" carries a user name or password (user@)`},
		{"user only", "https://tok3n@rbook.example.com", `--public-url "https://rbook.example.com" carries a user name or password (user@)`},
		{"not a URL", "http://rbook example.com", `--public-url "http://rbook example.com" is not a URL`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := consolelink.ParsePublicURL(c.in, "--public-url")
			if err == nil {
				t.Fatalf("ParsePublicURL(%q) = %q, want an error", c.in, got)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error %q\nwant it to start with %q", err, c.want)
			}
			for _, secret := range []string{"hunter2", "tok3n", "ann:"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q repeats the user information %q", err, secret)
				}
			}
		})
	}
}

// A gate's page is the public URL, /approvals/ and the path-escaped approval id; without a
// public URL or an id there is no link.
func TestApprovalURLIsThePublicURLAndTheEscapedID(t *testing.T) {
	for _, c := range []struct{ base, id, want string }{
		{"https://rbook.example.com", "a-rrxue2gitwmu7h2zouywpfof7i", "https://rbook.example.com/approvals/a-rrxue2gitwmu7h2zouywpfof7i"},
		{"https://ops.example.com/rbook", "a-1", "https://ops.example.com/rbook/approvals/a-1"},
		{"http://127.0.0.1:7070", "a/../b?c#d", "http://127.0.0.1:7070/approvals/a%2F..%2Fb%3Fc%23d"},
		{"", "a-1", ""},
		{"https://rbook.example.com", "", ""},
	} {
		if got := consolelink.ApprovalURL(c.base, c.id); got != c.want {
			t.Errorf("ApprovalURL(%q, %q) = %q, want %q", c.base, c.id, got, c.want)
		}
	}
}
