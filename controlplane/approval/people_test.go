package approval

import (
	"errors"
	"strings"
	"testing"
)

// alice is a voter whose person (docs/people.md) links three identities.
func alice(identity string) Voter {
	return Voter{Identity: identity, Verified: true, Person: "alice", Groups: []string{"sre"},
		Identities: []string{"alice", "github:alice-gh", "slack:T1/U1"}}
}

func TestPolicyNamingAPersonOrGroupAllowsOnlyThem(t *testing.T) {
	bob := Voter{Identity: "github:bob", Verified: true, Person: "bob", Identities: []string{"github:bob"}}
	nobody := Voter{Identity: "carol", Verified: true}
	for _, c := range []struct {
		name    string
		allowed []string
		v       Voter
		want    bool
	}{
		{"person entry, that person through a channel identity", []string{"person:alice"}, alice("slack:T1/U1"), true},
		{"person entry, another person", []string{"person:alice"}, bob, false},
		{"person entry, an identity without a person", []string{"person:alice"}, nobody, false},
		{"person entry never matches an identity named like the id", []string{"person:carol"}, nobody, false},
		{"directory group, a member", []string{"group:sre"}, alice("github:alice-gh"), true},
		{"directory group, not a member", []string{"group:sre"}, bob, false},
		{"identity entry, another identity of the same person", []string{"alice"}, alice("github:alice-gh"), true},
		{"github entry, another identity of the same person, any case", []string{"github:Alice-GH"}, alice("alice"), true},
		{"identity entry, another person", []string{"alice"}, bob, false},
		{"unverified voter with the person's name", []string{"person:alice"}, Voter{Identity: "unverified:alice"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := GateRequirement{Rule: "gates.yaml rule 1 (line 2)", ApprovalsRequired: 1, AllowedApprovers: c.allowed}
			err := CheckVote(r, Starter{StartedBy: "ci-bot"}, c.v, true)
			if got := err == nil; got != c.want {
				t.Fatalf("CheckVote(%v, %s) = %v, want allowed=%v", c.allowed, c.v.Identity, err, c.want)
			}
			if err != nil && !errors.Is(err, ErrNotAllowedApprover) {
				t.Fatalf("refusal is %v, want ErrNotAllowedApprover", err)
			}
		})
	}
}

func TestFourEyesRefusesTheStartersOtherIdentity(t *testing.T) {
	r := Default()
	for _, c := range []struct {
		name    string
		starter Starter
		v       Voter
		refused bool
	}{
		{"started with the auth-file token, approves through Slack", Starter{StartedBy: "alice"}, alice("slack:T1/U1"), true},
		{"started by an OIDC job she triggered, approves with her token", Starter{StartedBy: "oidc:o/r@refs/heads/main", GitHubActor: "ALICE-gh"}, alice("alice"), true},
		{"started by another person", Starter{StartedBy: "bob"}, alice("github:alice-gh"), false},
		{"an identity without a person is compared as itself", Starter{StartedBy: "carol"}, Voter{Identity: "carol", Verified: true}, true},
		{"an identity without a person is not another identity", Starter{StartedBy: "carol"}, Voter{Identity: "github:carol", Verified: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckVote(r, c.starter, c.v, true)
			if got := errors.Is(err, ErrSelfApproval); got != c.refused {
				t.Fatalf("CheckVote = %v, want self-approval refusal %v", err, c.refused)
			}
			if err := CheckVote(r, c.starter, c.v, false); err != nil {
				t.Fatalf("a reject by the starter is refused: %v", err)
			}
		})
	}
}

func TestVoterKeyIsThePersonElseTheIdentity(t *testing.T) {
	if got := alice("slack:T1/U1").Key(); got != "person:alice" {
		t.Errorf("Key of a voter with a person = %q, want person:alice", got)
	}
	if got := (Voter{Identity: "github:carol", Verified: true}).Key(); got != "github:carol" {
		t.Errorf("Key of a voter without a person = %q, want its identity", got)
	}
}

func TestGatePolicyPersonEntrySyntax(t *testing.T) {
	for _, c := range []struct {
		entry, wantErr string
	}{
		{`"person:alice"`, ""},
		{`"person:al ice"`, "is not an identity"},
		{`"person:al/ice"`, "no person of a people file could have that id"},
		{`"slack:T1/U1"`, ""},
		{`"email:alice@example.com"`, ""},
	} {
		t.Run(c.entry, func(t *testing.T) {
			_, err := ParseGatePolicy([]byte("rules:\n  - approvers: ["+c.entry+"]\n"), "gates.yaml")
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("ParseGatePolicy: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.HasPrefix(err.Error(), "gates.yaml:2:")):
				t.Fatalf("ParseGatePolicy error = %v, want gates.yaml:2: … %s", err, c.wantErr)
			}
		})
	}
}
