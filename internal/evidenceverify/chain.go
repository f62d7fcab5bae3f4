package evidenceverify

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// The checks, in the order Verify runs them (docs/evidence-verify.md, "What each check proves").
const (
	CheckChain     = "chain"
	CheckPack      = "pack"
	CheckHead      = "head"
	CheckRecord    = "record"
	CheckSignature = "signature"
	CheckSubjects  = "subjects"
	CheckGates     = "gates"
	CheckPolicy    = "policy"
)

// checkChain verifies the journal's chain from seq 1 (evidencechain.Verify) and returns its
// head ("" when it breaks).
func (v *verifier) checkChain() string {
	ts := v.in.Transitions
	links := make([]evidencechain.Link, len(ts))
	for i, t := range ts {
		links[i] = t.Link()
		if t.RunID != v.in.RunID {
			v.rep.add(CheckChain, ResultFailed, fmt.Sprintf("seq %d of %s is of run %s, not the pack's run %s", t.Seq, v.in.JournalFrom, t.RunID, v.in.RunID),
				&Failure{Seq: t.Seq, Step: t.StepName, Why: fmt.Sprintf("the transition belongs to run %s, not %s: the journal mixes runs", t.RunID, v.in.RunID)})
			return ""
		}
	}
	if len(ts) == 0 {
		v.rep.add(CheckChain, ResultFailed, v.in.JournalFrom+" holds no transition", &Failure{Why: "the journal holds no transition: there is no chain to check the pack against"})
		return ""
	}
	head, err := evidencechain.Verify(links)
	var be *evidencechain.BreakError
	if errors.As(err, &be) {
		v.rep.add(CheckChain, ResultFailed, fmt.Sprintf("broken at seq %d of %s", be.Seq, v.in.JournalFrom), &Failure{Seq: be.Seq, Step: v.stepAt(be.Seq), Why: be.Reason})
		return ""
	} else if err != nil {
		v.rep.add(CheckChain, ResultFailed, err.Error(), &Failure{Why: err.Error()})
		return ""
	}
	last := ts[len(ts)-1]
	end := fmt.Sprintf("ends at seq %d (%s, run %s)", last.Seq, last.Kind, last.RunStatus)
	if !last.RunStatus.Final() {
		end += ", before the run finished"
	}
	v.rep.add(CheckChain, ResultOK, fmt.Sprintf("%s from seq 1 %s: head %s", v.in.JournalFrom, end, head), nil)
	return head
}

// stepAt is the step name of the transition with seq ("" when none has it).
func (v *verifier) stepAt(seq int64) string {
	for _, t := range v.in.Transitions {
		if t.Seq == seq {
			return t.StepName
		}
	}
	return ""
}

// sameEntry reports whether two evidence entries are equal but for their transition_hash,
// and names the first field that differs.
func sameEntry(a, b engine.Evidence) (field string, ok bool) {
	a.TransitionHash, b.TransitionHash = "", ""
	if reflect.DeepEqual(a, b) {
		return "", true
	}
	switch {
	case a.StepName != b.StepName:
		return "step_name", false
	case a.Type != b.Type:
		return "type", false
	case a.Status != b.Status:
		return "status", false
	case a.Output != b.Output:
		return "output", false
	case a.TimestampUTC != b.TimestampUTC:
		return "timestamp_utc", false
	case !reflect.DeepEqual(a.Input, b.Input):
		return "input", false
	}
	return "source_input", false
}
