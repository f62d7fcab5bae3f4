// Package evidenceverify checks a run's evidence offline, as an auditor would: the hash
// chain of its journal from the first transition to the head, the evidence pack against the
// chain, the control plane's signed attestation (DSSE, in-toto) with its public keys, the
// gate decisions on both sides and the gate policy each decision was held to
// (docs/evidence-verify.md).
package evidenceverify

import (
	"github.com/rbookhq/rbook-action/internal/attest"
)

// verifier is one verification: its input, the report it builds, and the signed statement
// once its signature verified.
type verifier struct {
	in   *Input
	rep  *Report
	stmt attest.Statement
}

// Verify runs every check on in and returns the report: each check's result, the first
// failing entry (seq, step, why) and the exit code (Report.Code). A check that needs what an
// earlier one could not give (a verified chain, a signature) is skipped and says why.
func Verify(in *Input) *Report {
	v := &verifier{in: in, rep: &Report{RunID: in.RunID, Pack: in.PackPath, Notes: in.Notes}}
	head := v.checkChain()
	if head == "" {
		v.skip("not checked: the chain did not verify", CheckPack, CheckHead, CheckRecord, CheckSignature, CheckSubjects, CheckGates, CheckPolicy)
		return v.finish()
	}
	v.rep.Head = head
	v.checkPack()
	if in.Head != "" {
		if detail, f := v.headMismatch(head, in.Head, "--head"); f != nil {
			v.rep.add(CheckHead, ResultFailed, detail, f)
		} else {
			v.rep.add(CheckHead, ResultOK, "the chain ends at the head --head keeps", nil)
		}
	}
	if in.Record != nil {
		v.checkRecord(head)
	}
	p := v.checkSignature()
	switch {
	case p == nil:
		v.skip("not checked: no verified signature to check against", CheckSubjects, CheckGates, CheckPolicy)
	case !v.checkSubjects(p, head):
		// Say what failed: another run's attestation, a moved head, or only a changed pack.
		v.skip("not checked: "+v.rep.Checks[len(v.rep.Checks)-1].Detail, CheckGates, CheckPolicy)
	case !v.checkGates(p):
		v.skip("not checked: the gate decisions differ", CheckPolicy)
	default:
		v.checkPolicy(p)
	}
	return v.finish()
}

// skip records checks that did not run because an earlier one failed or was skipped.
func (v *verifier) skip(why string, names ...string) {
	for _, n := range names {
		if (n == CheckHead && v.in.Head == "") || (n == CheckRecord && v.in.Record == nil) {
			continue
		}
		v.rep.add(n, ResultSkipped, why, nil)
	}
}

func (v *verifier) finish() *Report {
	v.rep.Outcome = outcomeWord(v.rep.Code())
	return v.rep
}
