package server

import "github.com/rbookhq/rbook-action/controlplane/store"

// RunStarterIdentities exposes runStarterIdentities to the tests.
func RunStarterIdentities(run store.Run) []string { return runStarterIdentities(run) }
