package evidenceverify

import (
	"fmt"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// The verdicts of a chain gate: approved and rejected as the gate_decided message says,
// timedOut for a gate whose step the deadline closed (TIMED_OUT, no gate_decided), unknown
// for a gate_decided message that names no verdict rbook writes.
const (
	verdictApproved = "approved"
	verdictRejected = "rejected"
	verdictTimedOut = "timed out"
	verdictUnknown  = "unknown"
)

// channelDeadline is the channel of the control plane's decision when a gate's deadline
// passed (docs/approvals.md): it records the gate rejected.
const channelDeadline = "deadline"

// chainGate is a gate the chain shows decided: the seq of the transition that shows it
// (gate_decided, or the gate step's step_finished when no gate_decided preceded it), the
// step, the verdict (verdictApproved, …) and the approver the message names ("" when none).
type chainGate struct {
	seq     int64
	step    string
	verdict string
	by      string
}

// isGateStep reports whether a step of type typ opens a gate: a runbook confirm step or a
// playbook approval node.
func isGateStep(typ string) bool {
	return typ == string(runbook.TypeConfirm) || typ == string(runbook.TypeApproval)
}

// chainGates are the gates the chain shows decided, in order: every gate_decided transition
// but a cancel request (which a terminal answers and the control plane does not decide), and
// every gate step that finished PASS or TIMED_OUT without a gate_decided before it, so an
// executor that skipped a gate and wrote the step passed cannot go unpaired.
func chainGates(ts []engine.Transition) []chainGate {
	var out []chainGate
	decided := map[string]bool{} // step → a gate_decided since its gate last opened
	for _, t := range ts {
		switch t.Kind {
		case engine.TransitionGateOpened:
			decided[t.StepName] = false
		case engine.TransitionGateDecided:
			verdict, by := decidedVerdict(t.Message)
			if verdict == "" {
				continue
			}
			decided[t.StepName] = true
			out = append(out, chainGate{t.Seq, t.StepName, verdict, by})
		case engine.TransitionStepFinished:
			if t.Evidence == nil || !isGateStep(t.StepType) || decided[t.StepName] {
				decided[t.StepName] = false
				continue
			}
			switch t.Evidence.Status {
			case engine.StatusPass:
				out = append(out, chainGate{t.Seq, t.StepName, verdictApproved, ""})
			case engine.StatusTimedOut:
				out = append(out, chainGate{t.Seq, t.StepName, verdictTimedOut, ""})
			}
		}
	}
	return out
}

// decidedVerdict reads a gate_decided message (the engine's gateDecidedMessage): the
// verdict and the approver it names ("approved by github:alice via github: …"); "" verdict
// for a cancel request.
func decidedVerdict(m string) (verdict, by string) {
	switch {
	case strings.HasPrefix(m, "cancel requested"):
		return "", ""
	case strings.HasPrefix(m, "auto-passed by "):
		return verdictApproved, ""
	case strings.HasPrefix(m, "approved "):
		return verdictApproved, approverIn(strings.TrimPrefix(m, "approved "))
	case strings.HasPrefix(m, "rejected "):
		return verdictRejected, approverIn(strings.TrimPrefix(m, "rejected "))
	case strings.HasPrefix(m, "sent back to "):
		if _, rest, ok := strings.Cut(m, "' "); ok {
			return verdictRejected, approverIn(rest)
		}
		return verdictRejected, ""
	}
	return verdictUnknown, ""
}

// approverIn is X of "by X via Y…" ("" when the message names nobody: "via terminal").
func approverIn(rest string) string {
	rest, ok := strings.CutPrefix(rest, "by ")
	if !ok {
		return ""
	}
	by, _, _ := strings.Cut(rest, " via ")
	return strings.TrimSpace(by)
}

// signedGates are the attestation's decided gates: approved and rejected (a deadline's
// rejection included), and expired.
func signedGates(p *attest.RunPredicate) []attest.GateDecision {
	var out []attest.GateDecision
	for _, g := range p.Gates {
		switch g.Verdict {
		case "approved", "rejected", "expired":
			out = append(out, g)
		}
	}
	return out
}

// gatePairs reports whether chain gate c is attested gate g: the same step, and the verdict
// the chain shows (a timed-out gate is one the control plane rejected through the deadline
// or expired; a rejection by a person is not a deadline's).
func gatePairs(c chainGate, g attest.GateDecision) bool {
	if c.step != g.StepName {
		return false
	}
	deadline := g.Verdict == "expired" || (g.Verdict == "rejected" && g.Channel == channelDeadline)
	switch c.verdict {
	case verdictApproved:
		return g.Verdict == "approved"
	case verdictRejected:
		return g.Verdict == "rejected" && !deadline
	case verdictTimedOut:
		return deadline
	}
	return false
}

// approverMatches reports whether the approver the chain's message names (none: any) is the
// attested gate's deciding identity or one of its votes of that verdict.
func approverMatches(c chainGate, g attest.GateDecision) bool {
	if c.by == "" || c.by == g.DecidedBy {
		return true
	}
	for _, vt := range g.Votes {
		if vt.Verdict == g.Verdict && (vt.Identity == c.by || vt.Person == c.by) {
			return true
		}
	}
	return false
}

// checkGates pairs, in order, the gates the chain shows decided with the attestation's
// decided gates: the same step and verdict, the approver the chain names among the deciding
// votes, none missing on either side (docs/evidence-verify.md, "What each check proves"). A
// timed-out gate the attestation still shows undecided (pending, or closed as cancelled when
// the run ended before the control plane's deadline passed) pairs with nothing.
func (v *verifier) checkGates(p *attest.RunPredicate) bool {
	signed := signedGates(p)
	recorded := chainGates(v.in.Transitions)
	for i, j := 0, 0; i < len(recorded) || j < len(signed); i, j = i+1, j+1 {
		var c *chainGate
		var g *attest.GateDecision
		if i < len(recorded) {
			c = &recorded[i]
		}
		if j < len(signed) {
			g = &signed[j]
		}
		if c != nil && c.verdict == verdictTimedOut && (g == nil || !gatePairs(*c, *g)) && undecided(p, c.step) {
			j--
			continue
		}
		if f := gateMismatch(c, g); f != nil {
			v.rep.add(CheckGates, ResultFailed, "a gate decision of the chain and of the attestation differ", f)
			return false
		}
	}
	v.rep.add(CheckGates, ResultOK, fmt.Sprintf("the chain's %d gate decision(s) are the attestation's", len(recorded)), nil)
	return true
}

// undecided reports whether the attestation has a gate of step that was not decided when it
// was signed: pending, or cancelled.
func undecided(p *attest.RunPredicate, step string) bool {
	for _, g := range p.Gates {
		if g.StepName == step && (g.Verdict == "pending" || g.Verdict == "cancelled") {
			return true
		}
	}
	return false
}

// gateMismatch says why chain gate c and attested gate g do not pair (nil when they do; a
// nil side is missing).
func gateMismatch(c *chainGate, g *attest.GateDecision) *Failure {
	switch {
	case g == nil:
		return &Failure{Seq: c.seq, Step: c.step, Why: fmt.Sprintf("the chain shows gate '%s' %s at seq %d, but the attestation has no such decision: the gate was not decided on the control plane", c.step, c.verdict, c.seq)}
	case c == nil:
		return &Failure{Step: g.StepName, Why: fmt.Sprintf("the attestation has gate '%s' %s by %s (approval %s), but the chain shows no such decision", g.StepName, g.Verdict, orNone(g.DecidedBy), g.ApprovalID)}
	case c.verdict == verdictUnknown:
		return &Failure{Seq: c.seq, Step: c.step, Why: fmt.Sprintf("the chain's gate_decided at seq %d names no verdict rbook writes (approved, rejected, sent back, auto-passed, cancel requested): the transition was not written by rbook", c.seq)}
	case !gatePairs(*c, *g):
		return &Failure{Seq: c.seq, Step: c.step, Why: fmt.Sprintf("the chain shows gate '%s' %s at seq %d, the attestation gate '%s' %s by %s via %s", c.step, c.verdict, c.seq, g.StepName, g.Verdict, orNone(g.DecidedBy), orNone(g.Channel))}
	case !approverMatches(*c, *g):
		return &Failure{Seq: c.seq, Step: c.step, Why: fmt.Sprintf("the chain says gate '%s' was %s by %s at seq %d, but the attestation's deciding votes are not %s's (decided by %s)", c.step, c.verdict, c.by, c.seq, c.by, orNone(g.DecidedBy))}
	}
	return nil
}
