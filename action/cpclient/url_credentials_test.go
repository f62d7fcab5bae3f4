package cpclient

import (
	"errors"
	"strings"
	"testing"
)

// TestURLWithCredentialsRefused: a control-plane URL carrying user:password@
// used to be accepted and then printed in the move notice, the approve hint and errors, and
// recorded in the state file. SplitURLs now refuses it, naming the item with its password
// redacted, also when the item does not parse at all.
func TestURLWithCredentialsRefused(t *testing.T) {
	for _, c := range []struct{ list, want string }{
		{"http://u:SECRETPW@127.0.0.1:1, http://127.0.0.1:7070",
			`URL 1 "http://xxxxx@127.0.0.1:1" holds credentials (user:password@)`},
		{"http://127.0.0.1:7070,https://ops:SECRETPW@cp.example:443/",
			`URL 2 "https://xxxxx@cp.example:443/" holds credentials`},
		{"http://u:SECRETPW@127.0.0.1:7070", `"http://xxxxx@127.0.0.1:7070" holds credentials`},
		{"http://SECRETPW@127.0.0.1:7070", `"http://xxxxx@127.0.0.1:7070" holds credentials`}, // a user name alone may be a token
		{"ftp://u:SECRETPW@h", `"ftp://xxxxx@h" holds credentials`},
		{"http://u:SEC%zzRETPW@127.0.0.1:7070/x", `"http://xxxxx@127.0.0.1:7070/x" is not a control plane URL`},
	} {
		urls, err := SplitURLs(c.list)
		var ue *URLError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || urls != nil {
			t.Errorf("SplitURLs(%q) = %v, %v; want a *URLError with %q", c.list, urls, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "SECRETPW") {
			t.Errorf("SplitURLs(%q): the error prints the password: %v", c.list, err)
		}
	}
	// Hosts with an @ only in the path, or none, are fine.
	if urls, err := SplitURLs("http://127.0.0.1:7070/a@b, http://127.0.0.1:7071"); err != nil || len(urls) != 2 {
		t.Fatalf("SplitURLs of URLs without credentials = %v, %v", urls, err)
	}
}
