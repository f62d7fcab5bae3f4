package github

import (
	"slices"
	"testing"
)

// SecretTexts lists the texts of the values-file keys that look secret, each once, longest
// first, and nothing of the other keys.
func TestSecretTextsAreTheSecretKeysTextsLongestFirst(t *testing.T) {
	got := SecretTexts(map[string][]string{
		"api_token":   {"tok-1"},
		"DB_PASSWORD": {"hunter2-long", "tok-1"},
		"app_name":    {"app-checkout"},
	})
	if want := []string{"hunter2-long", "tok-1"}; !slices.Equal(got, want) {
		t.Fatalf("SecretTexts = %q, want %q", got, want)
	}
}

// MaskParts is a value and each of its lines, blank ones left out, as the runner matches masks.
func TestMaskPartsAreTheValueAndItsLines(t *testing.T) {
	if got, want := MaskParts("line one\n\n line two\r\n"), []string{"line one\n\n line two\r\n", "line one", " line two"}; !slices.Equal(got, want) {
		t.Fatalf("MaskParts = %q, want %q", got, want)
	}
	if got := MaskParts("  "); got != nil {
		t.Fatalf("MaskParts of a blank value = %q, want none", got)
	}
}
