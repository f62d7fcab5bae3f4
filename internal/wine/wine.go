// Package wine tells a Windows build whether it runs under Wine, so that its tests can skip,
// by name and with the reason, what Wine does not implement (docs/development.md, section
// "Windows under Wine"). Off Windows nothing runs under Wine: Version reports false.
package wine

import "testing"

// Skip skips t when the program runs under Wine, with a message naming Wine's version and
// why: what Wine lacks that the test needs. Elsewhere, real Windows included, it does
// nothing, so the test runs.
func Skip(t testing.TB, why string) {
	t.Helper()
	if v, ok := Version(); ok {
		t.Skipf("skipped under Wine %s: %s", v, why)
	}
}
