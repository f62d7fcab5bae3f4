package main

import (
	"context"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/embedded"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// anyListening is listening for a control-plane value that may list several URLs: true when
// at least one of them accepts connections.
func anyListening(list string) bool {
	urls, err := cpclient.SplitURLs(list)
	if err != nil {
		return embedded.Listening(list)
	}
	for _, u := range urls {
		if embedded.Listening(u) {
			return true
		}
	}
	return false
}

// openLocalHistory is a client of the embedded control plane's database, opened read-only and
// served in this process (embedded.OpenHistory). The returned func closes it.
func openLocalHistory(ctx context.Context, dbPath string) (*cpclient.Client, func(), error) {
	hc, closeDB, err := embedded.OpenHistory(ctx, dbPath)
	if err != nil {
		return nil, nil, err
	}
	const base = "http://local-database.invalid" // never dialled: the transport answers
	c := &cpclient.Client{
		URL:       dbPath,
		Runs:      rbookv1connect.NewRunServiceClient(hc, base),
		Approvals: rbookv1connect.NewApprovalServiceClient(hc, base),
		Deadline:  10 * time.Second,
	}
	return c, closeDB, nil
}
