package notify

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/store"
)

// DeliveryLine is one delivery as `rbook notifications -o json` prints it.
type DeliveryLine struct {
	Event    string `json:"event"`
	Kind     string `json:"kind"`
	RunID    string `json:"run_id"`
	Approval string `json:"approval_id,omitempty"`
	Channel  string `json:"channel"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// At is when it was delivered or given up, or its next attempt ("" for now).
	At     string `json:"at,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// WriteDeliveries prints deliveries as `rbook notifications` shows them: with asJSON an
// indented JSON array of DeliveryLine, else a table (event, channel, state, attempts, when,
// reason), or a line saying none match.
func WriteDeliveries(out io.Writer, list []store.NotificationDelivery, asJSON bool) error {
	lines := make([]DeliveryLine, 0, len(list))
	for _, d := range list {
		l := DeliveryLine{Event: d.Event.ID, Kind: d.Event.Kind, RunID: d.Event.RunID, Approval: d.Event.ApprovalID,
			Channel: d.Channel, State: d.State(), Attempts: d.Attempts, Reason: d.LastError}
		at := d.NextAttemptAt
		switch l.State {
		case "delivered":
			at = d.DeliveredAt
		case "given_up":
			at, l.Reason = d.GivenUpAt, d.GivenUpReason
		}
		if !at.IsZero() {
			l.At = at.UTC().Format(time.RFC3339)
		}
		lines = append(lines, l)
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(lines)
	}
	if len(lines) == 0 {
		fmt.Fprintln(out, "no notification deliveries match")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT\tCHANNEL\tSTATE\tATTEMPTS\tAT\tREASON")
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", l.Event, l.Channel, l.State, l.Attempts, l.At, strings.ReplaceAll(l.Reason, "\n", " "))
	}
	return tw.Flush()
}
