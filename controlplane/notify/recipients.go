package notify

import (
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/controlplane/store"
)

func init() {
	// to_approvers: mail the approvers a gate's policy names (docs/notifications.md, "Who a
	// gate's policy notifies"). Kept apart from the channelFields table, which every
	// channel kind extends.
	channelFields["email"] = append(channelFields["email"], "to_approvers")
}

// IsGateEvent reports whether an event of kind is about a gate (its opening, votes,
// escalations and end): the events a gate policy's approvers and notify list are told of.
func IsGateEvent(kind string) bool {
	return kind == store.EventVoteCast || strings.HasPrefix(kind, "gate.")
}

// recipients is who mail m goes to: the configured to addresses; the run's starter for a
// gate's outcome and the run's end (to_requester); the gate policy's approvers
// (to_approvers) and notify list for gate events. Each address once (compared without
// regard to case), in that order.
func (e *Email) recipients(m Message) []string {
	to := slices.Clone(e.to)
	add := func(addrs ...string) {
		for _, a := range addrs {
			if a != "" && !slices.ContainsFunc(to, func(x string) bool { return strings.EqualFold(x, a) }) {
				to = append(to, a)
			}
		}
	}
	if e.toRequester && tellsRequester(m.Kind) {
		add(m.RequesterEmail)
	}
	if IsGateEvent(m.Kind) {
		if e.toApprovers {
			add(m.ApproverEmails...)
		}
		add(m.NotifyEmails...)
	}
	return to
}
