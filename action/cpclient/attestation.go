package cpclient

import (
	"context"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// codeAttestationUnavailable is the control plane's refusal of GetAttestation when it has no
// attestation of the run: it has no signing key, or the run has not finished (docs/attestations.md).
const codeAttestationUnavailable = "E_ATTESTATION_UNAVAILABLE"

// Attestation is GetAttestation of run runID, retried like every unary call: the signed
// envelope, its key id, the chain head and the pack's SHA-256 it attests. It returns nil and
// no error when the control plane has none (E_ATTESTATION_UNAVAILABLE). Other errors are the
// control plane's refusal, or *UnreachableError after the Deadline.
func (c *Client) Attestation(ctx context.Context, runID string) (*rbookv1.GetAttestationResponse, error) {
	var resp *rbookv1.GetAttestationResponse
	err := c.retry(ctx, func(ctx context.Context) error {
		r, err := c.Runs.GetAttestation(ctx, &rbookv1.GetAttestationRequest{RunId: runID})
		resp = r
		return err
	})
	if Code(err) == codeAttestationUnavailable {
		return nil, nil
	}
	return resp, err
}
