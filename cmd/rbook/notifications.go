package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/notify"
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
			return notify.WriteDeliveries(cmd.OutOrStdout(), list, output == "json")
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
