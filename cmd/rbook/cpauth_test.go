package main

import "testing"

// TestFailoverOIDCAudienceIsTheFirstURL: without --oidc-audience or
// $RBOOK_OIDC_AUDIENCE, a list's OIDC audience is its first URL (the replicas verify one
// audience), not the whole list.
func TestFailoverOIDCAudienceIsTheFirstURL(t *testing.T) {
	t.Setenv("RBOOK_OIDC_AUDIENCE", "")
	old := cpAuth.audience
	cpAuth.audience = ""
	t.Cleanup(func() { cpAuth.audience = old })
	for in, want := range map[string]string{
		" https://cp-a.example/ , https://cp-b.example": "https://cp-a.example",
		"https://cp.example/":                           "https://cp.example",
	} {
		if got := cpAuthAudience(in); got != want {
			t.Errorf("cpAuthAudience(%q) = %q, want %q", in, got, want)
		}
	}
}
