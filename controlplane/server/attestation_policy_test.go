package server

import (
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/store"
)

// Four eyes is signed only where the control plane could enforce it: approval.IsRunStarter
// never takes an unverified vote for the run's starter.
func TestAttestedFourEyesRequiresVerifiedVotes(t *testing.T) {
	cases := []struct {
		name          string
		starterMay    bool
		votes         []store.Vote
		fourEyes, ids bool
	}{
		{"verified votes under a four-eyes rule", false, []store.Vote{{Approver: "alice", Verdict: store.ApprovalApproved, Verified: true}}, true, true},
		{"an unverified vote under a four-eyes rule", false, []store.Vote{{Approver: "unverified:root", Verdict: store.ApprovalApproved}}, false, false},
		{"one verified and one unverified vote", false, []store.Vote{{Approver: "alice", Verdict: store.ApprovalApproved, Verified: true},
			{Approver: "unverified:bob", Verdict: store.ApprovalApproved}}, false, false},
		{"a rule that lets the starter approve", true, []store.Vote{{Approver: "alice", Verdict: store.ApprovalApproved, Verified: true}}, false, true},
		{"no votes (auto-passed)", false, nil, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := gateDecision(store.Approval{ApprovalID: "a-1", Status: store.ApprovalApproved, StarterMayApprove: c.starterMay, Votes: c.votes})
			if g.Policy.FourEyes != c.fourEyes || g.Policy.IdentitiesVerified != c.ids {
				t.Fatalf("four_eyes %v identities_verified %v, want %v %v", g.Policy.FourEyes, g.Policy.IdentitiesVerified, c.fourEyes, c.ids)
			}
		})
	}
}
