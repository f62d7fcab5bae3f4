package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/state"
)

// AttestationSuffix ends the name of a run's attestation file, "<run_id>.attestation.json",
// beside its evidence pack (docs/attestations.md, docs/evidence-verify.md).
const AttestationSuffix = ".attestation.json"

// AttestationFile is the attestation a finished run's control plane signed, as the executor
// wrote it: the file, the id of the key that signed it, and the chain head it attests. The
// zero value is a run without one (no control plane, or one without a signing key).
type AttestationFile struct{ Path, KeyID, ChainHead string }

// writeAttestation asks the control plane c for the signed attestation of st's finished run
// (GetAttestation) and writes its envelope atomically to "<run_id>.attestation.json" beside
// the state file statePath. A control plane without a signing key (E_ATTESTATION_UNAVAILABLE) gives
// no file and one note on errw, as does any failure: the run's outcome stands. A pack whose
// SHA-256 is not the one the control plane attested is said too (the file is still written:
// `rbook evidence verify` then names the difference).
func writeAttestation(ctx context.Context, c *cpclient.Client, statePath string, st *state.State, evPath string, errw io.Writer) AttestationFile {
	if c == nil || !st.RunStatus.Final() {
		return AttestationFile{}
	}
	resp, err := c.Attestation(context.WithoutCancel(ctx), st.RunID)
	switch {
	case err != nil:
		fmt.Fprintf(errw, "note: the control plane's attestation of run %s was not fetched (%v): the run is not signed here; fetch it later with 'rbook evidence verify %s --control-plane %s'.\n", st.RunID, err, evPath, c.URL)
		return AttestationFile{}
	case resp == nil:
		fmt.Fprintf(errw, "note: the control plane signs no attestation of run %s: it has no signing key (docs/attestations.md, \"Keys\").\n", st.RunID)
		return AttestationFile{}
	}
	p := filepath.Join(filepath.Dir(statePath), st.RunID+AttestationSuffix)
	if err := state.WriteFileAtomic(p, []byte(resp.GetEnvelopeJson())); err != nil {
		fmt.Fprintf(errw, "note: the attestation of run %s was not written to %s: %v\n", st.RunID, p, err)
		return AttestationFile{}
	}
	if data, err := os.ReadFile(evPath); err == nil && evPath != "" {
		sum := sha256.Sum256(data)
		if got, want := hex.EncodeToString(sum[:]), strings.TrimPrefix(resp.GetEvidencePackSha256(), "sha256:"); want != "" && got != want {
			fmt.Fprintf(errw, "warning: the evidence pack %s (sha256 %s) is not the pack the control plane attested (sha256 %s): 'rbook evidence verify %s' says where they differ.\n", evPath, got, want, evPath)
		}
	}
	return AttestationFile{Path: p, KeyID: resp.GetKeyId(), ChainHead: resp.GetChainHead()}
}
