package server

import (
	"context"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/people"
)

// The people directory's side of the server (docs/people.md): every channel's voter gets its
// person here, so the one policy check (approval.CheckVote) and the store's tally see people.

// PersonOf is the person of the people directory an identity belongs to ("slack:T1/U2",
// "github:alice", "alice", "oidc:alice@example.com"), and whether there is one, the auth
// file's github= links included. A channel that must not count an identity with no person
// calls it and refuses when ok is false: the Slack channel refuses a Slack user with no
// person, telling them how to get linked (people.NotLinkedMessage; docs/people.md, "Slack"),
// and otherwise builds its voter with VoterFor. Every other channel counts such an identity as its own person.
func (s *Server) PersonOf(identity string) (people.Person, bool) {
	return s.people.PersonOf(identity)
}

// VoterFor is the voter of a verified channel identity (a Slack user "slack:<team>/<user>",
// a GitHub reviewer "github:<login>"): its person from the directory, that person's other
// identities (for four-eyes and the policy's identity entries) and groups. Pass it to
// approval.CheckVote through the store's Decision.Authorize, and its Person as
// store.Decision.Person, as Approve does.
func (s *Server) VoterFor(identity string) approval.Voter {
	return s.withPerson(approval.Voter{Identity: identity, Verified: true})
}

// withPerson adds v's person to a verified voter: Person, Identities and the person's
// directory groups added to Groups. An unverified voter, or one with no person, is returned
// as it is (it counts as itself).
func (s *Server) withPerson(v approval.Voter) approval.Voter {
	if !v.Verified {
		return v
	}
	per, ok := s.people.PersonOf(v.Identity)
	if !ok {
		return v
	}
	v.Person, v.Identities = per.ID, per.Identities
	v.Groups = append(append([]string(nil), v.Groups...), per.Groups...)
	return v
}

// voterOf is who casts a vote through ctx (the caller, the person at the keyboard, or a
// claimed name: callerVoter), with its person.
func (s *Server) voterOf(ctx context.Context, claimed string) approval.Voter {
	return s.withPerson(callerVoter(ctx, claimed))
}

// personLabel is the directory's display name of person id, "" when it has none.
func (s *Server) personLabel(id string) string {
	if per, ok := s.people.ByID(id); ok {
		return per.Name
	}
	return ""
}
