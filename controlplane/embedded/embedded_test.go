package embedded

import "testing"

// TestLocalApproverKeyGoesOnlyToLoopbackURLs: the URL a .rbook/controlplane.url names gets
// the local approver key only when its host is a loopback IP address.
func TestLocalApproverKeyGoesOnlyToLoopbackURLs(t *testing.T) {
	for raw, want := range map[string]bool{
		"http://127.0.0.1:35797":      true,
		"http://[::1]:7070":           true,
		"http://127.0.0.2:7070":       true,
		"http://localhost:7070":       false, // a name: whatever it resolves to
		"http://192.0.2.10:7070":      false,
		"https://rbook.example:443":   false,
		"http://127.0.0.1.nip.io:80":  false,
		"::not a url::":               false,
		"http://[::ffff:10.0.0.1]:80": false,
	} {
		if got := LoopbackURL(raw); got != want {
			t.Errorf("LoopbackURL(%q) = %v, want %v", raw, got, want)
		}
	}
}
