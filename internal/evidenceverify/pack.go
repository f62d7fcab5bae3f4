package evidenceverify

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
)

// checkPack compares the pack's entries, in order, with the evidence of the chain's
// evidence-bearing transitions (step_finished, and run_finished's cancel audit entry): equal
// fields, and each entry's transition_hash the hash of the transition that carried it. Then
// the pack file's bytes must be the one encoding of its entries (state.EvidencePackJSON), so
// nothing outside the entries' values was added.
func (v *verifier) checkPack() {
	var carried []engine.Transition
	for _, t := range v.in.Transitions {
		if t.Evidence != nil {
			carried = append(carried, t)
		}
	}
	pack := v.in.Entries
	for i := 0; i < max(len(pack), len(carried)); i++ {
		if f := entryMismatch(i, pack, carried); f != nil {
			v.rep.add(CheckPack, ResultFailed, fmt.Sprintf("entry %d of %s does not match the chain", i+1, v.in.PackPath), f)
			return
		}
	}
	if enc, err := state.EvidencePackJSON(pack); err != nil || !bytes.Equal(enc, v.in.Pack) {
		v.rep.add(CheckPack, ResultFailed, v.in.PackPath+" is not the encoding of its entries",
			&Failure{Why: "the pack file's bytes are not the JSON rbook writes for its entries (a field was added, or the file was re-encoded): compare it with the run's own pack"})
		return
	}
	v.rep.add(CheckPack, ResultOK, fmt.Sprintf("%s: its %s are the chain's, in order, each naming its transition's hash", v.in.PackPath, entries(len(pack))), nil)
}

// entryMismatch says why pack entry i is not the evidence chain transition i carried (nil
// when it is).
func entryMismatch(i int, pack []engine.Evidence, carried []engine.Transition) *Failure {
	n := strconv.Itoa(i + 1)
	if i >= len(pack) {
		t := carried[i]
		return &Failure{Seq: t.Seq, Step: t.StepName, Why: fmt.Sprintf("the pack ends after %s, but the chain's seq %d carries entry %s: entries were deleted from the pack", entries(len(pack)), t.Seq, n)}
	}
	e := pack[i]
	if i >= len(carried) {
		return &Failure{Step: e.StepName, Why: fmt.Sprintf("entry %s is not in the chain, which carries %s: an entry was added to the pack", n, entries(len(carried)))}
	}
	t := carried[i]
	field, ok := sameEntry(e, *t.Evidence)
	if !ok {
		why := fmt.Sprintf("entry %s's %s differs from what the chain's seq %d recorded", n, field, t.Seq)
		if j := findEntry(e, carried); j >= 0 {
			why = fmt.Sprintf("entry %s is the chain's entry %d (seq %d), out of place: entries were deleted or reordered", n, j+1, carried[j].Seq)
		} else if field == "output" {
			why += fmt.Sprintf(": the pack says %q, the chain %q", cut(e.Output), cut(t.Evidence.Output))
		}
		return &Failure{Seq: t.Seq, Step: t.StepName, Why: why}
	}
	if e.TransitionHash != t.Hash {
		return &Failure{Seq: t.Seq, Step: t.StepName, Why: fmt.Sprintf("entry %s's transition_hash %s is not the hash %s of the transition that carried it", n, orNone(e.TransitionHash), t.Hash)}
	}
	return nil
}

// findEntry is the index of the carried entry equal to e, -1 when none is.
func findEntry(e engine.Evidence, carried []engine.Transition) int {
	for j, t := range carried {
		if _, ok := sameEntry(e, *t.Evidence); ok && e.TransitionHash == t.Hash {
			return j
		}
	}
	return -1
}

// entries is "1 entry" or "n entries".
func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return strconv.Itoa(n) + " entries"
}

// cut shortens a quoted value to 80 bytes.
func cut(s string) string {
	if len(s) > 80 {
		return s[:77] + "…"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// headMismatch compares the chain's head with a head kept elsewhere (want, from where): nil
// when equal, else a failure that says whether the kept head is an earlier transition's (the
// record goes on past it) or none of the chain's (transitions after the last were dropped, or
// the chain was re-sealed: no seq is named then), and the check's line.
func (v *verifier) headMismatch(head, want, from string) (detail string, f *Failure) {
	if head == want {
		return "", nil
	}
	last := v.in.Transitions[len(v.in.Transitions)-1]
	for _, t := range v.in.Transitions {
		if t.Hash == want {
			return fmt.Sprintf("%s keeps the head of seq %d, not the chain's last (seq %d)", from, t.Seq, last.Seq),
				&Failure{Seq: t.Seq + 1, Step: v.stepAt(t.Seq + 1), Why: fmt.Sprintf("%s pins the chain at seq %d (%s); seq %d to %d were added after it", from, t.Seq, want, t.Seq+1, last.Seq)}
		}
	}
	// A chain that verifies but ends elsewhere was re-sealed after a change, or cut short:
	// the head alone does not say which entry differs, so no seq is blamed.
	return fmt.Sprintf("%s keeps head %s, which no transition of the chain has", from, want),
		&Failure{Why: fmt.Sprintf("the chain verifies from seq 1 to seq %d (head %s), but %s keeps %s, which no transition of the chain has: the chain was changed and sealed again, or transitions after seq %d were deleted (with their pack entries). The first entry that differs cannot be named from the head alone: compare the journal with the run's own copy or the control plane's record (--control-plane URL)", last.Seq, head, from, want, last.Seq)}
}
