// Package gatechannel is the one home of how a gate decision names the channel it came by
// when the wire has no field for it: the executor sends a decision typed at its own terminal
// prompt as an ordinary Approve or Reject whose reason starts with TerminalReasonPrefix, and
// the control plane counts such a decision under the channel "terminal" (docs/metrics.md,
// rbook_gate_decisions_total). Both halves import this package, so the two sides cannot
// drift apart.
package gatechannel

import (
	"strings"
	"unicode"
)

// TerminalReasonPrefix starts the reason of every decision answered at the executor's
// terminal prompt; the typed answer follows it.
const TerminalReasonPrefix = "answered at the executor's terminal: "

// TerminalReason is the reason the executor sends with answer, the text typed at its
// terminal prompt: TerminalReasonPrefix, then answer with each control or bidirectional
// control character replaced by U+FFFD (the control plane refuses them in a reason, as they
// could forge terminal output, and a stray arrow key must not halt the run).
func TerminalReason(answer string) string {
	return TerminalReasonPrefix + strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return unicode.ReplacementChar
		}
		return r
	}, answer)
}

// IsTerminalReason reports whether reason is one TerminalReason built: a decision answered
// at the executor's terminal.
func IsTerminalReason(reason string) bool {
	return strings.HasPrefix(reason, TerminalReasonPrefix)
}
