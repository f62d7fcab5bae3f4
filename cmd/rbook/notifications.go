package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/store"
)

// newNotificationsCmd is `rbook notifications`: where each notification delivery of a
// control plane stands (docs/notifications.md, "Delivery guarantees"), read from its
// database without writing (store.OpenReadOnly), so an operator sees what was given up and why.
func newNotificationsCmd() *cobra.Command {
	var (
		db, output string
		f          store.NotificationDeliveryFilter
	)
	cmd := &cobra.Command{
		Use:   "notifications",
		Short: "List a control plane's notification deliveries: delivered, pending, given up and why",
		Long: `List the notification deliveries of a control plane (rbook serve --notify-config), read
from its database (--db: the SQLite file or the PostgreSQL DSN rbook serve uses), opened read
only: one line per event and channel with its state (delivered, pending, given_up), the
failed attempts so far, when it was delivered or given up (or its next attempt), and the
last error or the reason it was given up. Oldest event first. With --approval, a gate that
escalated is said first: "Gate a-… escalated (step 2) at …". See docs/notifications.md.

Exit codes:
  0  listed (possibly nothing)
  2  bad arguments, or the database could not be read`,
		Example: `  rbook notifications --db .rbook/controlplane.db --state given_up
  rbook notifications --db postgres://rbook@db:5432/rbook --run R1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return &usageError{cmd, fmt.Errorf("--output %q: want text or json", output)}
			}
			st, err := store.OpenReadOnly(cmd.Context(), db)
			if err != nil {
				return abort("rbook notifications: --db %s: %v", store.RedactDSN(db), err)
			}
			defer st.Close()
			list, err := st.ListNotificationDeliveries(cmd.Context(), f)
			if err != nil {
				return abort("rbook notifications: %v", err)
			}
			if f.ApprovalID != "" && output == "text" {
				if g, err := st.GateNotices(cmd.Context(), f.ApprovalID); err == nil && g.Escalations > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "Gate %s escalated (step %d) at %s.\n", f.ApprovalID, g.Escalations, g.EscalatedAt.Format(time.RFC3339))
				}
			}
			return printNotifications(cmd, list, output == "json")
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&db, "db", ".rbook/controlplane.db", "the control plane's database: SQLite file or PostgreSQL DSN")
	fl.StringVar(&f.State, "state", "", "only deliveries in this state: pending, delivered or given_up")
	fl.StringVar(&f.RunID, "run", "", "only the events of this run")
	fl.StringVar(&f.ApprovalID, "approval", "", "only the events of this gate (approval id)")
	fl.IntVar(&f.Limit, "limit", store.DefaultPageSize, fmt.Sprintf("at most this many (up to %d)", store.MaxPageSize))
	fl.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// notificationLine is one delivery as `rbook notifications -o json` prints it.
type notificationLine struct {
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

func printNotifications(cmd *cobra.Command, list []store.NotificationDelivery, asJSON bool) error {
	lines := make([]notificationLine, 0, len(list))
	for _, d := range list {
		l := notificationLine{Event: d.Event.ID, Kind: d.Event.Kind, RunID: d.Event.RunID, Approval: d.Event.ApprovalID,
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
	out := cmd.OutOrStdout()
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
