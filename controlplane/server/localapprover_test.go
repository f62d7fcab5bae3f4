package server

import "testing"

// TestLocalApproverKeyNeedsTheKeyFromLoopback: the local approver key counts only as the one
// bearer value, equal to the key, from a loopback peer.
func TestLocalApproverKeyNeedsTheKeyFromLoopback(t *testing.T) {
	i := localApproverInterceptor{key: []byte("k3y-of-this-folder-0123456789")}
	for _, c := range []struct {
		name, peer string
		auth       []string
		want       bool
	}{
		{"the key from 127.0.0.1", "127.0.0.1:5000", []string{"Bearer k3y-of-this-folder-0123456789"}, true},
		{"the key from ::1", "[::1]:5000", []string{"Bearer k3y-of-this-folder-0123456789"}, true},
		{"the key from another host", "192.0.2.7:5000", []string{"Bearer k3y-of-this-folder-0123456789"}, false},
		{"another key", "127.0.0.1:5000", []string{"Bearer k3y-of-this-folder-0123456780"}, false},
		{"a prefix of the key", "127.0.0.1:5000", []string{"Bearer k3y-of-this-folder"}, false},
		{"no header", "127.0.0.1:5000", nil, false},
		{"two headers", "127.0.0.1:5000", []string{"Bearer k3y-of-this-folder-0123456789", "Bearer x"}, false},
		{"no peer address", "", []string{"Bearer k3y-of-this-folder-0123456789"}, false},
	} {
		if got := i.matches(c.peer, c.auth); got != c.want {
			t.Errorf("%s: matches = %v, want %v", c.name, got, c.want)
		}
	}
	if (localApproverInterceptor{}).matches("127.0.0.1:1", []string{"Bearer "}) {
		t.Error("an empty key matched")
	}
}
