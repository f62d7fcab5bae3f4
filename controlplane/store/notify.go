package store

import (
	"encoding/json"
	"fmt"
)

// pgNotifyChannel is the PostgreSQL channel every committed change is announced on
// (docs/decisions/change-fanout.md).
const pgNotifyChannel = "rbook_changes"

// maxNotifyPayload is the largest payload sent as a list of ids (docs/decisions/change-fanout.md); PostgreSQL's limit
// is 8,000 bytes. A larger change is announced as {"o":…,"all":true}.
const maxNotifyPayload = 7000

// notifyPayload is the JSON a batch's pg_notify carries (docs/decisions/change-fanout.md):
// {"o":"<origin>","r":["run_id",…],"a":["approval_id",…]}, each id once in first-seen
// order, or {"o":"<origin>","all":true} when that would exceed maxNotifyPayload bytes.
type notifyPayload struct {
	Origin    string   `json:"o"`
	Runs      []string `json:"r,omitempty"`
	Approvals []string `json:"a,omitempty"`
	All       bool     `json:"all,omitempty"`
}

// changePayload builds the notification of change c from the store with origin.
func changePayload(origin string, c Change) string {
	p := notifyPayload{Origin: origin, Runs: []string{}, Approvals: []string{}}
	seen := map[string]bool{}
	addRun := func(id string) {
		if !seen[id] {
			seen[id] = true
			p.Runs = append(p.Runs, id)
		}
	}
	for _, r := range c.Runs {
		addRun(r.RunID)
	}
	for _, pr := range c.Progress {
		addRun(pr.RunID)
	}
	for _, t := range c.Transitions {
		addRun(t.RunID)
	}
	seenA := map[string]bool{}
	for _, a := range c.Approvals {
		if !seenA[a.ApprovalID] {
			seenA[a.ApprovalID] = true
			p.Approvals = append(p.Approvals, a.ApprovalID)
		}
	}
	b, err := json.Marshal(struct {
		Origin    string   `json:"o"`
		Runs      []string `json:"r"`
		Approvals []string `json:"a"`
	}{p.Origin, p.Runs, p.Approvals})
	if err != nil || len(b) > maxNotifyPayload {
		b, _ = json.Marshal(notifyPayload{Origin: origin, All: true})
	}
	return string(b)
}

// notifyChange sends c's notification inside the batch's transaction, so PostgreSQL
// delivers it on COMMIT, in commit order (docs/decisions/change-fanout.md). Only called on PostgreSQL.
func (w *writeTx) notifyChange(origin string, c Change) error {
	if _, err := w.tx.ExecContext(w.ctx, "SELECT pg_notify(?, ?)", pgNotifyChannel, changePayload(origin, c)); err != nil {
		return fmt.Errorf("store: pg_notify: %w", err)
	}
	return nil
}
