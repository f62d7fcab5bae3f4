package main

import (
	"context"
	"io"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/controlplane/embedded"
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
		LockRetry: state.LockRetryWindow, WriteURL: folder.WriteURL, BeforeClose: cpclient.CloseIdleConnections,
	})
}
