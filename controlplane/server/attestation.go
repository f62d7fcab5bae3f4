package server

import (
	"context"

	"connectrpc.com/connect"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// GetAttestation returns a run's signed attestation (docs/attestations.md). This control
// plane signs nothing yet, so every call is E_ATTESTATION_UNAVAILABLE after the run is found.
func (h runService) GetAttestation(ctx context.Context, req *rbookv1.GetAttestationRequest) (*rbookv1.GetAttestationResponse, error) {
	return nil, rpcError(connect.CodeFailedPrecondition, CodeAttestationUnavailable,
		"run %q has no attestation: this control plane has no signing key", req.GetRunId())
}
