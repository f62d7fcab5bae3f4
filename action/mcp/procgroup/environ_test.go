package procgroup

import (
	"os"
	"slices"
	"testing"
)

// TestWithheldNamesAreRbooksCredentials: the names a started process does not inherit are
// the RBOOK_ ones holding a credential word, in any case; nothing else.
func TestWithheldNamesAreRbooksCredentials(t *testing.T) {
	for name, want := range map[string]bool{
		"RBOOK_TOKEN":                    true,
		"RBOOK_APPROVAL_SECRET":          true,
		"RBOOK_SIGNING_KEY":              true,
		"RBOOK_CLIENT_KEY":               true,
		"RBOOK_OKTA_CLIENT_PASSWORD":     true,
		"rbook_hook_secret":              true,
		"Rbook_Token":                    true,
		"RBOOK_DB":                       true,
		"actions_runtime_token":          true,
		"ACTIONS_ID_TOKEN_REQUEST_TOKEN": false,
		"RBOOK_DB_POOL":                  false,
		"RBOOK_SERVER":                   false,
		"RBOOK_STATE_FILE":               false,
		"RBOOK_":                         false,
		"RBOOKTOKEN":                     false,
		"GITHUB_TOKEN":                   false,
		"AWS_SECRET_ACCESS_KEY":          false,
		"TOKEN":                          false,
		"":                               false,
	} {
		if got := Withheld(name); got != want {
			t.Errorf("Withheld(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestEnvironLeavesOutOnlyWithheldVariables: Environ is os.Environ in its order, minus the
// withheld names.
func TestEnvironLeavesOutOnlyWithheldVariables(t *testing.T) {
	t.Setenv("RBOOK_TOKEN", "tok")
	t.Setenv("RBOOK_SERVER", "http://cp.example")
	t.Setenv("RBOOK_X_SECRET", "a=b=c")
	t.Setenv("GITHUB_TOKEN", "gh")
	got := Environ()
	for _, kv := range []string{"RBOOK_TOKEN=tok", "RBOOK_X_SECRET=a=b=c"} {
		if slices.Contains(got, kv) {
			t.Errorf("Environ holds %q", kv)
		}
	}
	for _, kv := range []string{"RBOOK_SERVER=http://cp.example", "GITHUB_TOKEN=gh"} {
		if !slices.Contains(got, kv) {
			t.Errorf("Environ lacks %q", kv)
		}
	}
	var want []string
	for _, kv := range os.Environ() {
		if kv != "RBOOK_TOKEN=tok" && kv != "RBOOK_X_SECRET=a=b=c" {
			want = append(want, kv)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Environ = %q\nwant os.Environ() minus the withheld: %q", got, want)
	}
}
