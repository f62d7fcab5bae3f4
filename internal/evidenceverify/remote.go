package evidenceverify

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/attest"
	"github.com/rbookhq/rbook-action/internal/cpview"
)

// controlPlane is a Remote over a control plane's URL: the keys over plain HTTPS GET, the
// attestation and the transitions over its RunService, with the client TLS of every command
// (cpclient.TLSConfigFromEnv) and $RBOOK_TOKEN as the bearer token.
type controlPlane struct {
	url  string
	c    *cpclient.Client
	http *http.Client
}

// NewRemote is the Remote of the control plane at url (http:// or https://). Errors: the TLS
// environment cannot be read (cpclient.TLSConfigFromEnv's errors), as *InputError.
func NewRemote(url string) (Remote, error) {
	if err := cpclient.CheckTLS(url); err != nil {
		return nil, inputErr("--control-plane %s: %v", url, err)
	}
	tc, err := cpclient.TLSConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, inputErr("%v", err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tc
	c := cpclient.New(url, os.Getenv("RBOOK_TOKEN"))
	c.Deadline = 10 * time.Second
	return &controlPlane{url: strings.TrimRight(url, "/"), c: c, http: &http.Client{Transport: t, Timeout: 10 * time.Second}}, nil
}

func (r *controlPlane) Where() string { return "the control plane " + r.url }

// PublicKeys reads the keys document at attest.KeysPath.
func (r *controlPlane) PublicKeys(ctx context.Context) ([]attest.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+attest.KeysPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s (a control plane without a signing key publishes none)", attest.KeysPath, resp.Status)
	}
	return attest.ParseKeysDocument(body)
}

// Attestation is the run's envelope from GetAttestation, nil when the control plane has none.
func (r *controlPlane) Attestation(ctx context.Context, runID string) ([]byte, error) {
	resp, err := r.c.Attestation(ctx, runID)
	if err != nil || resp == nil {
		return nil, err
	}
	return []byte(resp.GetEnvelopeJson()), nil
}

// RecordHead is the control plane's current record of the run (GetRun): its last seq and
// chain head.
func (r *controlPlane) RecordHead(ctx context.Context, runID string) (int64, string, error) {
	resp, err := r.c.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: runID, PageSize: 1})
	if err != nil {
		return 0, "", err
	}
	return resp.GetRun().GetLastSeq(), resp.GetRun().GetChainHead(), nil
}

// Transitions is every transition of the run from GetRun, in the engine's form.
func (r *controlPlane) Transitions(ctx context.Context, runID string) ([]engine.Transition, error) {
	resp, err := cpview.GetRunAll(ctx, r.c, runID)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Transition, 0, len(resp.GetTransitions()))
	for _, p := range resp.GetTransitions() {
		t, err := cpclient.FromProto(p)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
