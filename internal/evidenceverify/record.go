package evidenceverify

import "fmt"

// checkRecord compares the journal's chain (ending at head) with the control plane's current
// record of the run (--control-plane): a record that goes on past the journal, or ends at
// another head at the same seq, means the journal is not the whole run, or not its record.
// A record that stops earlier must be a prefix of the chain (the control plane may not have
// been sent the last transitions yet).
func (v *verifier) checkRecord(head string) {
	r := v.in.Record
	ts := v.in.Transitions
	last := ts[len(ts)-1]
	var f *Failure
	switch {
	case r.LastSeq > last.Seq:
		f = &Failure{Seq: last.Seq + 1, Why: fmt.Sprintf("the control plane's record goes on to seq %d (head %s): this journal is not the whole run, it ends at seq %d", r.LastSeq, orNone(r.Head), last.Seq)}
	case r.Head == "":
	case r.LastSeq == last.Seq && r.Head != head:
		f = &Failure{Seq: last.Seq, Step: last.StepName, Why: fmt.Sprintf("the control plane's record ends at seq %d with head %s, the journal with %s: the journal is not the record the control plane kept", r.LastSeq, r.Head, head)}
	case r.LastSeq < last.Seq:
		for _, t := range ts {
			if t.Seq == r.LastSeq && t.Hash != r.Head {
				f = &Failure{Seq: t.Seq, Step: t.StepName, Why: fmt.Sprintf("the control plane's record ends at seq %d with head %s, but the journal's seq %d has hash %s: the journal is not the record the control plane kept", r.LastSeq, r.Head, t.Seq, t.Hash)}
			}
		}
	}
	if f != nil {
		v.rep.add(CheckRecord, ResultFailed, fmt.Sprintf("%s differs from %s's record of the run", v.in.JournalFrom, r.From), f)
		return
	}
	detail := fmt.Sprintf("%s's record of the run ends at seq %d, as the journal does", r.From, r.LastSeq)
	if r.LastSeq < last.Seq {
		detail = fmt.Sprintf("%s's record of the run stops at seq %d, where the journal's chain passes through its head (the rest was not sent to it yet)", r.From, r.LastSeq)
	}
	v.rep.add(CheckRecord, ResultOK, detail, nil)
}
