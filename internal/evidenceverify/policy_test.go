package evidenceverify

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/internal/attest"
)

// A gate approved by an identity nobody authenticated (the embedded control plane, or a
// control plane without sign-in) gets a not-proved line, not a ✓, and the exit code stays
// 0: whatever the attestation claims holds (docs/evidence-verify.md, "Unverified identities").
func TestGateByUnverifiedIdentityIsNotProvedButDoesNotFail(t *testing.T) {
	cases := []struct {
		name     string
		fourEyes bool // as an older control plane signed it: four_eyes true despite the unverified vote
	}{
		{"four eyes not claimed", false},
		{"four eyes claimed by an older control plane", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, runA, "unverified:root")
			f.predicate.StartedBy = "root"
			g := &f.predicate.Gates[0]
			g.Policy.FourEyes = c.fourEyes
			g.Votes = []attest.Vote{{Identity: "unverified:root", Channel: "terminal", Verdict: "approved"}}
			f.sign(t)
			rep := f.verify(t, Options{})
			var text bytes.Buffer
			rep.WriteText(&text, false)
			if rep.Code() != ExitVerified || rep.First != nil {
				t.Fatalf("exit %d, first %+v:\n%s", rep.Code(), rep.First, text.String())
			}
			last := rep.Checks[len(rep.Checks)-1]
			if last.Name != CheckPolicy || last.Result != ResultNotProved || !strings.Contains(last.Detail, "unverified:root") {
				t.Fatalf("last check %+v, want a not-proved policy line naming unverified:root:\n%s", last, text.String())
			}
			if strings.Contains(text.String(), "✓ policy") || !strings.Contains(text.String(), "· policy") {
				t.Fatalf("the policy line is not a not-proved line:\n%s", text.String())
			}
		})
	}
}
