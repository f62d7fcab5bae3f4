package evidenceverify

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/rbookhq/rbook-action/internal/termui"
)

// The exit codes of `rbook evidence verify` (docs/evidence-verify.md, "Exit codes").
const (
	// ExitVerified: every check ran and passed, the signature included.
	ExitVerified = 0
	// ExitFailed: a check failed; the report names the first failing entry.
	ExitFailed = 1
	// ExitUnreadable: bad usage, or an input that cannot be read (no pack, no journal, a
	// file that is not what it should be, a control plane that does not answer).
	ExitUnreadable = 2
	// ExitUnsigned: the chain and the pack verified, but nothing signed was checked: no
	// attestation, or no public key to check it with. The record is consistent, not proven.
	ExitUnsigned = 3
)

// The results of one check.
const (
	ResultOK      = "ok"
	ResultFailed  = "failed"
	ResultSkipped = "skipped"
	// ResultNotProved: the check ran and found nothing wrong, but what it would prove rests on
	// something the control plane could not vouch for (unverified identities). It does not
	// change the exit code: everything the attestation claims holds.
	ResultNotProved = "not_proved"
)

// Check is the result of one check: its name (chain, pack, head, signature, subjects, gates,
// policy), ResultOK, ResultFailed or ResultSkipped, and one line saying what it proved or why
// it failed or did not run.
type Check struct {
	Name   string `json:"name"`
	Result string `json:"result"`
	Detail string `json:"detail"`
}

// Failure is the first failing entry: the check that found it, the transition's seq (0 when
// the failure is not about one transition) and step name ("" for a run-level transition),
// and why.
type Failure struct {
	Check string `json:"check"`
	Seq   int64  `json:"seq,omitempty"`
	Step  string `json:"step,omitempty"`
	Why   string `json:"why"`
}

// Report is the outcome of Verify: the run, the pack file, the chain head the journal ends at,
// the signing key's id (lowercase hex SHA-256 of its DER SubjectPublicKeyInfo; "" when no
// signature verified), notes about the inputs (a torn last journal line), each check in the
// order it ran, and the first failure (nil when none).
type Report struct {
	RunID   string   `json:"run_id"`
	Pack    string   `json:"pack"`
	Notes   []string `json:"notes,omitempty"`
	Head    string   `json:"chain_head,omitempty"`
	KeyID   string   `json:"key_id,omitempty"`
	Checks  []Check  `json:"checks"`
	First   *Failure `json:"first_failure,omitempty"`
	Outcome string   `json:"outcome"`
}

// Code is the report's exit code: ExitFailed when a check failed, ExitUnsigned when none
// failed but the signature was not checked, else ExitVerified.
func (r *Report) Code() int {
	signed := false
	for _, c := range r.Checks {
		if c.Result == ResultFailed {
			return ExitFailed
		}
		if c.Name == CheckSignature && c.Result == ResultOK {
			signed = true
		}
	}
	if !signed {
		return ExitUnsigned
	}
	return ExitVerified
}

// outcomeWord is Report.Outcome for a code: "verified", "failed" or "unsigned".
func outcomeWord(code int) string {
	switch code {
	case ExitVerified:
		return "verified"
	case ExitFailed:
		return "failed"
	}
	return "unsigned"
}

// add appends a check; a failure with fail set becomes the report's first failure when it has
// none yet.
func (r *Report) add(name, result, detail string, fail *Failure) {
	r.Checks = append(r.Checks, Check{Name: name, Result: result, Detail: detail})
	if fail != nil && r.First == nil {
		fail.Check = name
		r.First = fail
	}
}

// WriteText writes the report as the terminal shows it: one line per check ("✓ chain  …",
// "✗ pack  …", "· signature  skipped: …") after the notes ("· …"), then the first failing entry and the outcome.
// color paints the marks (termui.ColorAllowed).
func (r *Report) WriteText(w io.Writer, color bool) {
	for _, n := range r.Notes {
		fmt.Fprintf(w, "%s %s\n", termui.SGR(color, termui.SGRDim, "·"), n)
	}
	for _, c := range r.Checks {
		mark, code := "✓", termui.SGRGreen
		switch c.Result {
		case ResultFailed:
			mark, code = "✗", termui.SGRRed
		case ResultSkipped, ResultNotProved:
			mark, code = "·", termui.SGRDim
		}
		fmt.Fprintf(w, "%s %s %s\n", termui.SGR(color, code, mark), termui.PadRunes(c.Name, 10), c.Detail)
	}
	if f := r.First; f != nil {
		fmt.Fprintf(w, "\nFirst failing entry: %s\n", f.where())
		fmt.Fprintf(w, "  %s\n", f.Why)
	}
	switch r.Code() {
	case ExitVerified:
		fmt.Fprintf(w, "\n%s run %s: its chain, its evidence pack and its signed attestation (key %s) agree.\n", termui.SGR(color, termui.SGRBold+termui.SGRGreen, "VERIFIED"), r.RunID, r.KeyID)
	case ExitUnsigned:
		fmt.Fprintf(w, "\n%s run %s: its chain and its evidence pack agree, but no signature was checked, so they prove nothing about who wrote them. Missing: %s.\n", termui.SGR(color, termui.SGRBold+termui.SGRYellow, "UNSIGNED"), r.RunID, r.missing())
	default:
		fmt.Fprintf(w, "\n%s run %s: the evidence does not verify (see the first failing entry above).\n", termui.SGR(color, termui.SGRBold+termui.SGRRed, "FAILED"), r.RunID)
	}
}

// missing is why the signature was not checked: the signature check's line (no attestation,
// no public key, a control plane without a key), which says what to give.
func (r *Report) missing() string {
	for _, c := range r.Checks {
		if c.Name == CheckSignature && c.Result == ResultSkipped {
			return c.Detail
		}
	}
	return "the attestation (--attestation FILE) and the control plane's public key (--key FILE or --control-plane URL)"
}

// where names a failure's entry: "seq 7, step 'deploy'", "seq 1 (run-level)" or the check.
func (f *Failure) where() string {
	switch {
	case f.Seq > 0 && f.Step != "":
		return fmt.Sprintf("seq %d, step '%s' (%s check)", f.Seq, f.Step, f.Check)
	case f.Seq > 0:
		return fmt.Sprintf("seq %d, a run-level transition (%s check)", f.Seq, f.Check)
	case f.Step != "":
		return fmt.Sprintf("step '%s' (%s check)", f.Step, f.Check)
	}
	return fmt.Sprintf("the %s check", f.Check)
}

// WriteJSON writes the report as one JSON object (-o json), its outcome set.
func (r *Report) WriteJSON(w io.Writer) error {
	r.Outcome = outcomeWord(r.Code())
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}
