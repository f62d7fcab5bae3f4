package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// attestTimeLayout is how the predicates write a time (docs/attestations.md, "Formats").
const attestTimeLayout = "2006-01-02T15:04:05.000000000Z"

// mountKeys serves the public keys document at attest.KeysPath to anyone: it holds public
// keys only (docs/attestations.md, "Keys"). A control plane without keys serves an empty list.
func (s *Server) mountKeys() error {
	var current *attest.PublicKey
	if s.opts.Signer != nil {
		k := attest.PublicOf(s.opts.Signer)
		current = &k
	}
	doc, err := attest.NewKeysDocument(current, s.opts.PreviousKeys)
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	body = append(body, '\n')
	s.mux.HandleFunc("GET "+attest.KeysPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(body)
	})
	return nil
}

// GetAttestation returns a run's signed attestation (docs/attestations.md): the stored one
// when it was signed at the run's last transition, else one signed now (a signing that
// failed when the run ended, or a run re-finalised since). Errors: E_INVALID_ARGUMENT,
// E_RUN_NOT_FOUND, E_ATTESTATION_UNAVAILABLE (the run is not final, or it needs signing and
// this control plane has no key), storage errors.
func (h runService) GetAttestation(ctx context.Context, req *rbookv1.GetAttestationRequest) (*rbookv1.GetAttestationResponse, error) {
	id := req.GetRunId()
	if id == "" {
		return nil, invalidArg("run_id is required")
	}
	run, err := h.s.st.Run(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(id, 140))
	case err != nil:
		return nil, h.s.storeError(ctx, "GetAttestation", err)
	case !run.Status.Final():
		return nil, rpcError(connect.CodeFailedPrecondition, CodeAttestationUnavailable,
			"run %q is %s: its attestation is signed when it ends; ask again after it finishes", id, run.Status)
	}
	// A stored attestation of the run's last transition is served even without a key (a
	// read-only view of the database, a replica started without --signing-key).
	a, err := h.s.st.GetAttestation(ctx, id, "")
	if err != nil || a.LastSeq != run.LastSeq {
		if h.s.opts.Signer == nil {
			return nil, rpcError(connect.CodeFailedPrecondition, CodeAttestationUnavailable,
				"run %q has no attestation: this control plane has no signing key; start it with --signing-key (docs/attestations.md)", id)
		}
		// Signed now; a database that cannot be written (read-only) still gets the envelope served.
		if a, err = h.s.signRun(ctx, run); err != nil && (a.Envelope == nil || !errors.Is(err, store.ErrReadOnly)) {
			return nil, h.s.storeError(ctx, "GetAttestation", err)
		}
	}
	return &rbookv1.GetAttestationResponse{EnvelopeJson: string(a.Envelope), KeyId: a.KeyID, ChainHead: a.ChainHead,
		EvidencePackSha256: a.EvidencePackSHA256}, nil
}

// attestFinalRun signs runID's attestation once its recorded transitions made it final. A
// failure is logged and loses nothing: GetAttestation signs at read when no attestation of
// the run's last transition is stored.
func (s *Server) attestFinalRun(ctx context.Context, runID string) {
	if s.opts.Signer == nil {
		return
	}
	run, err := s.st.Run(ctx, runID)
	if err != nil || !run.Status.Final() {
		return
	}
	if a, err := s.st.GetAttestation(ctx, runID, ""); err == nil && a.LastSeq == run.LastSeq {
		return // a resent final transition: signed already
	}
	_, err = s.signRun(ctx, run)
	if err != nil {
		s.log.WarnContext(ctx, "run attestation not signed; GetAttestation signs it when asked", "run_id", runID, "error", err.Error())
	}
}

// signRun builds, signs and stores run's attestation (docs/attestations.md, "The run
// predicate"): subjects the plan's content hash under the run's name and the evidence pack's
// bytes under "<run_id>.evidence.json"; the predicate what this control plane recorded.
func (s *Server) signRun(ctx context.Context, run store.Run) (store.Attestation, error) {
	var pack []evidenceJSON
	var last store.Transition
	for from := int64(1); ; {
		batch, err := s.st.Transitions(ctx, run.RunID, from, maxItemsPage)
		if err != nil {
			return store.Attestation{}, err
		}
		for _, t := range batch {
			if t.Evidence != nil {
				pack = append(pack, evidenceEntry(t))
			}
			last, from = t, t.Seq+1
		}
		if len(batch) < maxItemsPage {
			break
		}
	}
	packJSON, err := encodeEvidencePack(pack)
	if err != nil {
		return store.Attestation{}, err
	}
	sum := sha256.Sum256(packJSON)
	approvals, err := s.runApprovals(ctx, run.RunID)
	if err != nil {
		return store.Attestation{}, err
	}
	p := attest.RunPredicate{RunID: run.RunID, Name: run.PlaybookName, Kind: string(run.Kind), ContentHash: run.PlaybookHash,
		ChainHead: transitionHash(last), FinalStatus: string(run.Status), StartedBy: run.StartedBy, GitHub: githubOf(run.GitHub),
		StartedAt: attestTime(run.StartedAt), CompletedAt: attestTime(run.CompletedAt), Gates: []attest.GateDecision{}}
	for _, a := range approvals {
		if a.Status != store.ApprovalPending {
			p.Gates = append(p.Gates, gateDecision(a))
		}
	}
	a := store.Attestation{RunID: run.RunID, ChainHead: p.ChainHead, EvidencePackSHA256: hex.EncodeToString(sum[:]), LastSeq: run.LastSeq}
	subjects := []attest.Subject{
		{Name: run.PlaybookName, Digest: map[string]string{"sha256": run.PlaybookHash}},
		{Name: run.RunID + ".evidence.json", Digest: map[string]string{"sha256": a.EvidencePackSHA256}},
	}
	if a.Envelope, a.KeyID, err = s.sign(ctx, subjects, attest.RunPredicateType, p); err != nil {
		return store.Attestation{}, err
	}
	return a, s.st.PutAttestation(ctx, a)
}

// reviewAttestation is decided gate a's review attestation (docs/attestations.md, "Gate
// decisions"): the stored one, else one signed and stored now. It is "" for a pending gate,
// for one nobody signed on a control plane without a signing key, and when signing fails
// (logged; the next read signs again).
func (s *Server) reviewAttestation(ctx context.Context, a store.Approval) string {
	if a.Status == store.ApprovalPending {
		return ""
	}
	if got, err := s.st.GetAttestation(ctx, a.RunID, a.ApprovalID); err == nil {
		return string(got.Envelope)
	}
	if s.opts.Signer == nil {
		return ""
	}
	env, err := s.signReview(ctx, a)
	if err != nil {
		s.log.WarnContext(ctx, "gate review attestation not signed; the next read of the gate signs it", "run_id", a.RunID,
			"approval_id", a.ApprovalID, "error", err.Error())
		return ""
	}
	return string(env)
}

// signReview builds, signs and stores decided gate a's review attestation: its subject is
// the plan the decision was bound to (the run's name, the plan digest).
func (s *Server) signReview(ctx context.Context, a store.Approval) ([]byte, error) {
	run, err := s.st.Run(ctx, a.RunID)
	if err != nil {
		return nil, err
	}
	p := attest.GateReviewPredicate{RunID: run.RunID, Name: run.PlaybookName, ContentHash: run.PlaybookHash,
		StartedBy: run.StartedBy, GitHub: githubOf(run.GitHub), Gate: gateDecision(a)}
	digest := cmp.Or(a.PlanDigest, run.PlaybookHash)
	env, keyID, err := s.sign(ctx, []attest.Subject{{Name: run.PlaybookName, Digest: map[string]string{"sha256": digest}}},
		attest.GateReviewPredicateType, p)
	if err != nil {
		return nil, err
	}
	return env, s.st.PutAttestation(ctx, store.Attestation{RunID: a.RunID, ApprovalID: a.ApprovalID, KeyID: keyID, Envelope: env})
}

// sign makes a Statement of subjects and predicate and signs it with Options.Signer.
func (s *Server) sign(ctx context.Context, subjects []attest.Subject, predicateType string, predicate any) ([]byte, string, error) {
	st, err := attest.NewStatement(subjects, predicateType, predicate)
	if err != nil {
		return nil, "", err
	}
	env, err := attest.SignStatement(ctx, s.opts.Signer, st)
	return env, s.opts.Signer.KeyID(), err
}

// runApprovals lists every approval of runID, oldest request first.
func (s *Server) runApprovals(ctx context.Context, runID string) ([]store.Approval, error) {
	var out []store.Approval
	for token := ""; ; {
		page, err := s.st.ListApprovals(ctx, store.ApprovalFilter{RunID: runID, PageSize: store.MaxPageSize, PageToken: token})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Approvals...)
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	slices.SortStableFunc(out, func(x, y store.Approval) int {
		return cmp.Or(x.RequestedAt.Compare(y.RequestedAt), cmp.Compare(x.ApprovalID, y.ApprovalID))
	})
	return out, nil
}

// gateDecision is decided gate a as the predicates record it: only what this control plane
// recorded and checked (docs/attestations.md, "The run predicate").
func gateDecision(a store.Approval) attest.GateDecision {
	g := attest.GateDecision{ApprovalID: a.ApprovalID, StepIndex: a.StepIndex, StepName: a.NodeID, Verdict: string(a.Status),
		RequestedAt: attestTime(a.RequestedAt), DecidedAt: attestTime(a.DecidedAt), DecidedBy: a.Approver, Channel: a.DecidedBySource,
		PlanDigest: a.PlanDigest, Reason: a.Reason, Inputs: a.InputValues, AutoPassed: a.AutoPassed, Iteration: a.Iteration,
		RedoFrom: a.RedoFrom, Votes: []attest.Vote{},
		Policy: attest.GatePolicy{Rule: a.PolicyRule, RequiredApprovals: max(a.ApprovalsRequired, 1), AllowedApprovers: a.AllowedApprovers}}
	// Four eyes is signed only where it was enforced: approval.IsRunStarter never takes an
	// unverified vote for the starter (docs/attestations.md, "The run predicate").
	g.Policy.IdentitiesVerified = !slices.ContainsFunc(a.Votes, func(v store.Vote) bool { return !v.Verified })
	g.Policy.FourEyes = !a.StarterMayApprove && g.Policy.IdentitiesVerified
	if a.Status == store.ApprovalApproved {
		g.People = a.ApprovedPeople()
	} else if a.Person != "" {
		g.People = []string{a.Person}
	}
	if p := a.Policy; p != nil {
		g.Policy.AutoPass = &attest.AutoPass{AutoPassed: p.AutoPassed, Rule: p.Rule, Action: p.Action, Reason: p.Reason, Shadow: p.Shadow}
	}
	for _, v := range a.Votes {
		g.Votes = append(g.Votes, attest.Vote{Person: v.Person, Identity: v.Approver, Channel: v.Source, Verdict: string(v.Verdict),
			At: attestTime(v.At), Reason: v.Reason, Inputs: v.InputValues, Verified: v.Verified})
	}
	return g
}

// githubOf is the run's GitHub job from its verified OIDC claims, nil without them.
func githubOf(j *store.GitHubJob) *attest.GitHubRun {
	if j == nil || j.Repository == "" {
		return nil
	}
	return &attest.GitHubRun{Repository: j.Repository, RunID: j.RunID, RunAttempt: j.RunAttempt, SHA: j.SHA, Ref: j.Ref,
		Workflow: j.WorkflowRef, Actor: j.Actor, Environment: j.Environment}
}

// attestTime is t in attestTimeLayout, "" for the zero time.
func attestTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(attestTimeLayout)
}

// evidenceEntry is transition t's evidence entry as the executor's pack file holds it.
func evidenceEntry(t store.Transition) evidenceJSON {
	e := evidenceToProto(*t.Evidence)
	return evidenceJSON{StepName: e.StepName, Type: e.Type, Input: e.Input, Output: e.Output, Status: string(t.Evidence.Status),
		TimestampUTC: e.TimestampUtc, SourceInput: e.SourceInput, TransitionHash: transitionHash(t)}
}

// transitionHash is t's hash in the run's chain (docs/evidence-chain.md), "" for a transition
// recorded without one.
func transitionHash(t store.Transition) string { return t.Hash }

// encodeEvidencePack is the evidence pack file's exact bytes: a JSON array indented by two
// spaces, HTML characters not escaped, ending in a newline, the encoding the executor writes
// its <run_id>.evidence.json with, so the attestation's digest names that file.
func encodeEvidencePack(pack []evidenceJSON) ([]byte, error) {
	if pack == nil {
		pack = []evidenceJSON{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(pack); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
