package runplan

import (
	"testing"
	"unicode/utf8"
)

// Cut keeps at most limit bytes and never splits a rune, so a cut input stays valid text.
func TestCutNeverSplitsARune(t *testing.T) {
	for _, c := range []struct {
		in    string
		limit int
		want  string
		cut   bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"aé", 2, "a", true},  // é is two bytes
		{"a€b", 3, "a", true}, // € is three bytes
		{"a€b", 4, "a€", true},
	} {
		got, cut := Cut(c.in, c.limit)
		if got != c.want || cut != c.cut || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q, %v; want %q, %v", c.in, c.limit, got, cut, c.want, c.cut)
		}
	}
}
