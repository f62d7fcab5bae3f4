package main

import (
	"context"
	"io"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/controlplane/embedded"
)

// Where the embedded control plane keeps its data (controlplane/embedded).
const (
	embeddedDB       = embedded.DB
	embeddedSecret   = embedded.Secret
	embeddedLocalKey = embedded.LocalKey
)

// startEmbedded starts this folder's embedded control plane (embedded.Start) with the server's
// default playbook policy. The returned func stops it.
func startEmbedded(ctx context.Context, errw io.Writer) (string, func(), error) {
	return startEmbeddedWith(ctx, errw, embeddedPolicy{})
}

// startEmbeddedWith is startEmbedded whose control plane decides playbook approval nodes
// with pol (rbook playbook run --policy, --policy-shadow).
func startEmbeddedWith(ctx context.Context, errw io.Writer, pol embeddedPolicy) (string, func(), error) {
	return embedded.Start(ctx, errw, embedded.Options{
		Policy: pol.policy, Shadow: pol.shadow, LocalPerson: currentUser(), PublicURLIsListener: !github.InRunner(),
		LockRetry: state.LockRetryWindow, WriteURL: writeEmbeddedURL, BeforeClose: cpclient.CloseIdleConnections,
	})
}

// lockDB lets one control plane at a time serve dbPath (embedded.LockDB).
func lockDB(dbPath string) (func(), error) { return embedded.LockDB(dbPath, state.LockRetryWindow) }

// The embedded control plane's helpers the history and approval verbs use.
var (
	readLocalKey = embedded.ReadLocalKey
	loopbackURL  = embedded.LoopbackURL
	dbServed     = embedded.DBServed
	listening    = embedded.Listening
)
