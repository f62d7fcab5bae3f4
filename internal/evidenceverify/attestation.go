package evidenceverify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rbookhq/rbook-action/internal/attest"
)

// checkSignature verifies the attestation's DSSE signature with the keys given
// (attest.VerifyEnvelope) and returns its run predicate (nil when it did not verify or was
// skipped).
func (v *verifier) checkSignature() *attest.RunPredicate {
	switch {
	case v.in.Envelope == nil:
		v.rep.add(CheckSignature, ResultSkipped, "no attestation: none beside the pack ("+beside(v.in.PackPath, v.in.RunID, attestationSuffix)+"), none given with --attestation or fetched from a control plane", nil)
		return nil
	case len(v.in.Keys) == 0 && v.in.NoKeys != "":
		v.rep.add(CheckSignature, ResultSkipped, v.in.NoKeys, nil)
		return nil
	case len(v.in.Keys) == 0:
		v.rep.add(CheckSignature, ResultSkipped, "no public key: give the control plane's key with --key FILE, or --control-plane URL to fetch its published keys", nil)
		return nil
	}
	stmtJSON, keyID, err := attest.VerifyEnvelope(v.in.Envelope, v.in.Keys)
	var unknown *attest.UnknownKeyError
	if errors.As(err, &unknown) {
		v.rep.add(CheckSignature, ResultFailed, fmt.Sprintf("%s is signed by key %s, which %s does not hold", v.in.EnvelopeFrom, unknown.KeyID, v.in.KeysFrom),
			&Failure{Why: fmt.Sprintf("the attestation is signed by key %s, not by a key of %s. A run of the embedded control plane (`rbook run` without --control-plane) "+
				"is signed by the .rbook/signing-key.pem of the folder it ran in: give --key that file. A control plane that rotated its key "+
				"publishes the old one when started with --signing-key-previous OLD.pem; or give the old key with --key", unknown.KeyID, v.in.KeysFrom)})
		return nil
	}
	if err != nil {
		v.rep.add(CheckSignature, ResultFailed, fmt.Sprintf("%s does not verify with %s", v.in.EnvelopeFrom, v.in.KeysFrom),
			&Failure{Why: fmt.Sprintf("the attestation's signature does not verify (%v): it was changed after the control plane signed it, or another key signed it", err)})
		return nil
	}
	v.rep.KeyID = keyID
	stmt, err := attest.ParseStatement(stmtJSON)
	var p attest.RunPredicate
	if err == nil && stmt.PredicateType != attest.RunPredicateType {
		err = fmt.Errorf("its predicate is %s, not a run's (%s)", stmt.PredicateType, attest.RunPredicateType)
	}
	if err == nil {
		err = json.Unmarshal(stmt.Predicate, &p)
	}
	if err != nil {
		v.rep.add(CheckSignature, ResultFailed, v.in.EnvelopeFrom+" is signed but is not a run attestation",
			&Failure{Why: fmt.Sprintf("the signed statement is not an rbook run attestation: %v", err)})
		return nil
	}
	v.stmt = stmt
	v.rep.add(CheckSignature, ResultOK, fmt.Sprintf("%s is signed by key %s (%s)", v.in.EnvelopeFrom, keyID, v.in.KeysFrom), nil)
	return &p
}

// checkSubjects checks what the attestation is about: the pack's run (a replayed attestation
// of another run fails here), the chain's head, and the pack file's SHA-256.
func (v *verifier) checkSubjects(p *attest.RunPredicate, head string) bool {
	if p.RunID != v.in.RunID {
		v.rep.add(CheckSubjects, ResultFailed, fmt.Sprintf("the attestation is of run %s, the pack of run %s", p.RunID, v.in.RunID),
			&Failure{Why: fmt.Sprintf("the attestation was signed for run %s, not for this pack's run %s: it is another run's attestation", p.RunID, v.in.RunID)})
		return false
	}
	if detail, f := v.headMismatch(head, p.ChainHead, "the attestation"); f != nil {
		v.rep.add(CheckSubjects, ResultFailed, detail, f)
		return false
	}
	name := v.in.RunID + packSuffix
	sum := sha256.Sum256(v.in.Pack)
	got := hex.EncodeToString(sum[:])
	var attested string
	for _, s := range v.stmt.Subject {
		if s.Name == name {
			attested = s.Digest["sha256"]
		}
	}
	switch {
	case attested == "":
		v.rep.add(CheckSubjects, ResultFailed, "the attestation names no subject "+name,
			&Failure{Why: fmt.Sprintf("the attestation has no subject %s: it does not attest this pack", name)})
		return false
	case attested != got:
		v.rep.add(CheckSubjects, ResultFailed, fmt.Sprintf("the pack's SHA-256 %s is not the attested %s", got, attested),
			&Failure{Why: fmt.Sprintf("%s's SHA-256 is %s, the attestation signed %s: the pack was changed after the run ended", v.in.PackPath, got, attested)})
		return false
	}
	v.rep.add(CheckSubjects, ResultOK, fmt.Sprintf("the attestation is of run %s, of this pack (sha256 %s) and of the chain's head", p.RunID, got), nil)
	return true
}

// checkPolicy checks that each approved gate met the policy the attestation recorded for it:
// at least required_approvals distinct people among its approving votes, and with four_eyes
// none of them the run's starter. A gate the auto-pass policy passed has no votes to count.
// A gate decided by unverified identities ("unverified:<name>": nobody authenticated them)
// proves neither four eyes nor who approved: it gets a ResultNotProved line of its own.
func (v *verifier) checkPolicy(p *attest.RunPredicate) {
	n := 0
	var unverified []string
	for _, g := range p.Gates {
		if g.Verdict != "approved" || g.AutoPassed {
			continue
		}
		people := map[string]bool{}
		var asserted []string
		for _, vt := range g.Votes {
			if vt.Verdict != "approved" {
				continue
			}
			who := vt.Person
			if who == "" {
				who = vt.Identity
			}
			if !vt.Verified {
				asserted = append(asserted, vt.Identity)
			} else if g.Policy.FourEyes && (who == p.StartedBy || vt.Identity == p.StartedBy) {
				v.rep.add(CheckPolicy, ResultFailed, fmt.Sprintf("gate '%s' was approved by the run's starter", g.StepName),
					&Failure{Seq: v.gateSeq(g), Step: g.StepName, Why: fmt.Sprintf("%s started the run and approved gate '%s', whose policy (rule %q) requires four eyes", vt.Identity, g.StepName, g.Policy.Rule)})
				return
			}
			people[who] = true
		}
		if m := max(g.Policy.RequiredApprovals, 1); len(people) < m {
			v.rep.add(CheckPolicy, ResultFailed, fmt.Sprintf("gate '%s' has %d approving people of the %d its policy requires", g.StepName, len(people), m),
				&Failure{Seq: v.gateSeq(g), Step: g.StepName, Why: fmt.Sprintf("gate '%s' was approved by %d distinct people, but its policy (rule %q) requires %d", g.StepName, len(people), g.Policy.Rule, m)})
			return
		}
		if len(asserted) > 0 {
			unverified = append(unverified, fmt.Sprintf("gate '%s' was approved by %s, an identity nobody authenticated (a control plane without sign-in, or the embedded one): "+
				"who approved, and four eyes, are not proved", g.StepName, strings.Join(asserted, ", ")))
			continue
		}
		n++
	}
	if n > 0 || len(unverified) == 0 {
		v.rep.add(CheckPolicy, ResultOK, fmt.Sprintf("%d approved gate(s) by verified identities each met the policy recorded for it (M distinct people, four eyes where recorded)", n), nil)
	}
	for _, u := range unverified {
		v.rep.add(CheckPolicy, ResultNotProved, u, nil)
	}
}

// gateSeq is the seq of the chain's gate_decided transition of attested gate g, 0 when none.
func (v *verifier) gateSeq(g attest.GateDecision) int64 {
	for _, c := range chainGates(v.in.Transitions) {
		if c.step == g.StepName && c.verdict == g.Verdict {
			return c.seq
		}
	}
	return 0
}
