package run

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// attestingRuns is a control plane that answers GetAttestation with resp, or with
// E_ATTESTATION_UNAVAILABLE when resp is nil.
type attestingRuns struct {
	rbookv1connect.UnimplementedRunServiceHandler
	resp *rbookv1.GetAttestationResponse
}

func (r *attestingRuns) GetAttestation(context.Context, *rbookv1.GetAttestationRequest) (*rbookv1.GetAttestationResponse, error) {
	if r.resp == nil {
		ce := connect.NewError(connect.CodeFailedPrecondition, errors.New("this control plane has no signing key"))
		if d, err := connect.NewErrorDetail(&rbookv1.ErrorInfo{Code: "E_ATTESTATION_UNAVAILABLE"}); err == nil {
			ce.AddDetail(d)
		}
		return nil, ce
	}
	return r.resp, nil
}

func attestingServer(t *testing.T, r *attestingRuns) *cpclient.Client {
	t.Helper()
	path, h := rbookv1connect.NewRunServiceHandler(r)
	mux := http.NewServeMux()
	mux.Handle(path, h)
	return cpclient.New(serveRuns(t, mux), "")
}

// TestFinishedRunGetsItsAttestationBesideThePack: at a run's end the executor writes the
// envelope its control plane signed to <run_id>.attestation.json beside the state file, and
// the output learns the file and the key id; a pack whose SHA-256 differs from the attested
// one is said. A control plane without a signing key gives no file, one note and no failure.
func TestFinishedRunGetsItsAttestationBesideThePack(t *testing.T) {
	dir := t.TempDir()
	statePath := filepath.Join(dir, "demo.state.json")
	st := &state.State{RunID: "RBOOK-20261202-demo-0a1b2c3d", RunStatus: engine.RunCompleted}
	evPath := filepath.Join(dir, st.RunID+state.EvidenceSuffix)
	pack := []byte("[]\n")
	if err := os.WriteFile(evPath, pack, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pack)
	env := `{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"keyid":"k1","sig":"c2ln"}]}`
	cases := []struct {
		name       string
		resp       *rbookv1.GetAttestationResponse
		wantFile   bool
		wantStderr string
	}{
		{"signed", &rbookv1.GetAttestationResponse{EnvelopeJson: env, KeyId: "k1", ChainHead: "sha256:" + strings.Repeat("1", 64), EvidencePackSha256: hex.EncodeToString(sum[:])}, true, ""},
		{"signed, another pack", &rbookv1.GetAttestationResponse{EnvelopeJson: env, KeyId: "k1", EvidencePackSha256: strings.Repeat("0", 64)}, true, "is not the pack the control plane attested"},
		{"no signing key", nil, false, "signs no attestation of run " + st.RunID + ": it has no signing key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, st.RunID+AttestationSuffix)
			os.Remove(p)
			var errw bytes.Buffer
			got := writeAttestation(context.Background(), attestingServer(t, &attestingRuns{resp: c.resp}), statePath, st, evPath, &errw)
			data, err := os.ReadFile(p)
			if c.wantFile != (err == nil) || (c.wantFile && (string(data) != env || got.Path != p || got.KeyID != "k1")) {
				t.Errorf("file %q (%v), result %+v", data, err, got)
			}
			if !c.wantFile && got != (AttestationFile{}) {
				t.Errorf("result %+v, want none", got)
			}
			if c.wantStderr == "" && errw.Len() > 0 || !strings.Contains(errw.String(), c.wantStderr) {
				t.Errorf("stderr %q, want %q", errw.String(), c.wantStderr)
			}
		})
	}
}

// A cancel that reached the control plane ends the run there too: the cancel writes the
// attestation the control plane signed beside the state file, as a run's end does.
func TestCancelledRunGetsItsAttestationBesideThePack(t *testing.T) {
	dir := t.TempDir()
	statePath := filepath.Join(dir, "demo.state.json")
	st := &state.State{RunID: "RBOOK-20261202-demo-0a1b2c3d", RunStatus: engine.RunCancelled}
	evPath := filepath.Join(dir, st.RunID+state.EvidenceSuffix)
	if err := os.WriteFile(evPath, []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := `{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"keyid":"k1","sig":"c2ln"}]}`
	cl := attestingServer(t, &attestingRuns{resp: &rbookv1.GetAttestationResponse{EnvelopeJson: env, KeyId: "k1"}})
	var errw bytes.Buffer
	c := &Config{Auth: Auth{Mode: AuthNone}}
	c.attestCancel(context.Background(), cl.URL, st, statePath, evPath, &errw)
	p := filepath.Join(dir, st.RunID+AttestationSuffix)
	if data, err := os.ReadFile(p); err != nil || string(data) != env {
		t.Fatalf("attestation file %q (%v); stderr %q", data, err, errw.String())
	}
	if want := "Attestation: " + p + " (signed by key k1)"; !strings.Contains(errw.String(), want) {
		t.Fatalf("stderr %q, want %q", errw.String(), want)
	}
}
