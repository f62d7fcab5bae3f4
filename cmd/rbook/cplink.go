package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rbookhq/rbook-action/action/state"
)

// stateFileLinks lists, for messages of the commands that read history, the separate
// control planes this folder's state files (.rbook/*.state.json) say their runs report to:
// "RUN_ID → URLS (FILE)", sorted. The embedded control plane and unreadable files are left
// out ('rbook runs' would otherwise read the stale embedded database while the state file
// names the replicas).
func stateFileLinks() []string {
	files, _ := filepath.Glob(filepath.Join(".rbook", "*.state.json"))
	var out []string
	for _, f := range files {
		st, err := state.ReadCurrent(f)
		if err != nil || st.ControlPlane == "" || st.ControlPlaneEmbedded {
			continue
		}
		out = append(out, fmt.Sprintf("run %s reports to %s (%s)", st.RunID, st.ControlPlane, f))
	}
	sort.Strings(out)
	return out
}

// stateLinksNote is one sentence naming stateFileLinks for a history read from the local
// database, or "" when there are none.
func stateLinksNote() string {
	links := stateFileLinks()
	if len(links) == 0 {
		return ""
	}
	return " This folder's state files name another control plane: " + strings.Join(links, "; ") +
		"; pass --control-plane with that URL list to see it there."
}
