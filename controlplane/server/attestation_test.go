package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// attestCP is an in-process control plane with votesAuth, votesPolicy and a signing key.
type attestCP struct {
	URL              string
	exec, alice, bob clients
	log              *syncBuffer
}

// newKey is a fresh Ed25519 signer and its PEM.
func newKey(t *testing.T) (attest.Signer, []byte) {
	t.Helper()
	s, p, err := attest.GenerateEd25519()
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

// serveAttesting serves a control plane signing with signer (and publishing previous) on
// the SQLite database db, which outlives it (a later control plane may open it again).
func serveAttesting(t *testing.T, db string, signer attest.Signer, previous ...attest.PublicKey) attestCP {
	t.Helper()
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	auth, err := server.ParseAuth(strings.NewReader(votesAuth), "auth")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := approval.ParseGatePolicy([]byte(votesPolicy), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	h, err := server.New(st, server.Options{Secret: []byte(testSecret), Auth: auth, GatePolicy: policy, Signer: signer, PreviousKeys: previous,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	url := serveHandler(t, h)
	who := func(name string) clients { return newClients(url, withBearer(name+"-token-0123456789")) }
	return attestCP{URL: url, exec: who("exec"), alice: who("alice"), bob: who("bob"), log: logs}
}

// keysOf reads the control plane's keys document.
func keysOf(t *testing.T, url string) ([]attest.PublicKey, string) {
	t.Helper()
	res, err := http.Get(url + attest.KeysPath)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s %s: %s", attest.KeysPath, res.Status, res.Header.Get("Content-Type"), body)
	}
	keys, err := attest.ParseKeysDocument(body)
	if err != nil {
		t.Fatal(err)
	}
	return keys, string(body)
}

// verified checks envelope with the control plane's published keys and returns its statement.
func verified(t *testing.T, url, envelope string) attest.Statement {
	t.Helper()
	keys, _ := keysOf(t, url)
	stJSON, _, err := attest.VerifyEnvelope([]byte(envelope), keys)
	if err != nil {
		t.Fatalf("envelope does not verify with the published keys: %v\n%s", err, envelope)
	}
	st, err := attest.ParseStatement(stJSON)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// openGate opens a gate on step (index i) of runID.
func openNamedGate(t *testing.T, c clients, runID, step string, i int32) *rbookv1.Approval {
	t.Helper()
	res, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, runID),
		RunId: runID, StepName: step, StepIndex: i, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		PlanDigest: digest("plan"), OnFail: "halt"})
	if err != nil {
		t.Fatalf("RequestApproval %s: %v", step, err)
	}
	return res.GetApproval()
}

// finishedRunWithGates runs R-att to SUCCEEDED: one step, gate "approve" approved by alice
// and bob (2 of sre), gate "approve2" left pending until the run's end closes it.
func finishedRunWithGates(t *testing.T, cp attestCP) (approved, closed *rbookv1.Approval) {
	t.Helper()
	startRun(t, cp.exec, "R-att")
	for seq := int64(1); seq <= 3; seq++ {
		record(t, cp.exec, transition("R-att", seq, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED))
	}
	a := openNamedGate(t, cp.exec, "R-att", "approve", 1)
	if _, err := approveByID(cp.alice, a.GetApprovalId(), "looks fine", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := approveByID(cp.bob, a.GetApprovalId(), "ship it", ""); err != nil {
		t.Fatal(err)
	}
	b := openNamedGate(t, cp.exec, "R-att", "approve2", 2)
	record(t, cp.exec, transition("R-att", 4, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))
	return getApproval(t, cp.alice, a.GetApprovalId()), getApproval(t, cp.alice, b.GetApprovalId())
}

func TestRunAttestationNamesEveryGateDecision(t *testing.T) {
	signer, _ := newKey(t)
	cp := serveAttesting(t, filepath.Join(t.TempDir(), "cp.db"), signer)
	approved, closed := finishedRunWithGates(t, cp)
	ctx := context.Background()
	res, err := cp.alice.runs.GetAttestation(ctx, &rbookv1.GetAttestationRequest{RunId: "R-att"})
	if err != nil {
		t.Fatal(err)
	}
	st := verified(t, cp.URL, res.GetEnvelopeJson())
	pack, err := cp.alice.runs.GetEvidencePack(ctx, &rbookv1.GetEvidencePackRequest{RunId: "R-att"})
	if err != nil {
		t.Fatal(err)
	}
	packSum := sha256.Sum256([]byte(pack.GetEvidencePackJson()))
	if res.GetKeyId() != signer.KeyID() || res.GetEvidencePackSha256() != hex.EncodeToString(packSum[:]) {
		t.Fatalf("key %s pack %s; want %s and %x", res.GetKeyId(), res.GetEvidencePackSha256(), signer.KeyID(), packSum)
	}
	wantSubjects := []attest.Subject{{Name: "demo", Digest: map[string]string{"sha256": digest("plan")}},
		{Name: "R-att.evidence.json", Digest: map[string]string{"sha256": hex.EncodeToString(packSum[:])}}}
	if got, _ := json.Marshal(st.Subject); string(got) != string(must(json.Marshal(wantSubjects))) || st.PredicateType != attest.RunPredicateType {
		t.Fatalf("subjects %s (%s)", got, st.PredicateType)
	}
	var p attest.RunPredicate
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		t.Fatal(err)
	}
	if p.RunID != "R-att" || p.Name != "demo" || p.ContentHash != digest("plan") || p.FinalStatus != "succeeded" || p.StartedBy == "" || p.StartedAt == "" || p.CompletedAt == "" || p.GitHub != nil {
		t.Fatalf("run predicate %+v", p)
	}
	if len(p.Gates) != 2 {
		t.Fatalf("gates %+v, want the approved gate and the closed one", p.Gates)
	}
	g := p.Gates[0]
	if g.ApprovalID != approved.GetApprovalId() || g.StepName != "approve" || g.StepIndex != 1 || g.Verdict != "approved" || g.DecidedAt == "" ||
		g.Policy.RequiredApprovals != 2 || !g.Policy.FourEyes || g.Policy.Rule == "" || len(g.Votes) != 2 || g.PlanDigest != digest("plan") {
		t.Fatalf("approved gate %+v", g)
	}
	for i, want := range []struct{ identity, reason string }{{"alice", "looks fine"}, {"bob", "ship it"}} {
		v := g.Votes[i]
		if v.Identity != want.identity || v.Reason != want.reason || v.Verdict != "approved" || v.Channel == "" || !v.Verified || v.At == "" {
			t.Fatalf("vote %d: %+v, want %s", i, v, want.identity)
		}
	}
	if c := p.Gates[1]; c.ApprovalID != closed.GetApprovalId() || c.Verdict != "cancelled" || c.StepName != "approve2" || len(c.Votes) != 0 {
		t.Fatalf("closed gate %+v", c)
	}
}

func TestGateDecisionIsSignedWhenMade(t *testing.T) {
	signer, _ := newKey(t)
	cp := serveAttesting(t, filepath.Join(t.TempDir(), "cp.db"), signer)
	startRun(t, cp.exec, "R-gate")
	a := openNamedGate(t, cp.exec, "R-gate", "approve", 1)
	if got := getApproval(t, cp.alice, a.GetApprovalId()).GetReviewAttestationJson(); got != "" {
		t.Fatalf("a pending gate has a review attestation: %s", got)
	}
	watch, _ := watchApproval(t, cp.alice, a.GetApprovalId())
	if _, err := approveByID(cp.alice, a.GetApprovalId(), "ok", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := approveByID(cp.bob, a.GetApprovalId(), "ok too", ""); err != nil {
		t.Fatal(err)
	}
	decided := lastApproval(t, watch)
	if decided.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || decided.GetReviewAttestationJson() == "" {
		t.Fatalf("the watch's decided approval: %s, review attestation %q", decided.GetStatus(), decided.GetReviewAttestationJson())
	}
	st := verified(t, cp.URL, decided.GetReviewAttestationJson())
	var p attest.GateReviewPredicate
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		t.Fatal(err)
	}
	if st.PredicateType != attest.GateReviewPredicateType || st.Subject[0].Digest["sha256"] != digest("plan") || p.RunID != "R-gate" ||
		p.Gate.Verdict != "approved" || len(p.Gate.Votes) != 2 || p.Gate.Policy.RequiredApprovals != 2 || p.Gate.ApprovalID != a.GetApprovalId() {
		t.Fatalf("review statement %s %+v", st.PredicateType, p)
	}
	if again := getApproval(t, cp.bob, a.GetApprovalId()).GetReviewAttestationJson(); again != decided.GetReviewAttestationJson() {
		t.Fatalf("GetApproval's review attestation differs from the one signed at the decision:\n%s\n%s", again, decided.GetReviewAttestationJson())
	}
}

func TestRotatedKeyStillVerifies(t *testing.T) {
	db := filepath.Join(t.TempDir(), "cp.db")
	old, oldPEM := newKey(t)
	cp := serveAttesting(t, db, old)
	finishedRunWithGates(t, cp)
	res, err := cp.alice.runs.GetAttestation(context.Background(), &rbookv1.GetAttestationRequest{RunId: "R-att"})
	if err != nil {
		t.Fatal(err)
	}
	// The control plane restarts with a new key and the old key's file as a previous key.
	prev, err := attest.ParseVerificationKeys(oldPEM)
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := newKey(t)
	rotated := serveAttesting(t, db, cur, prev...)
	keys, doc := keysOf(t, rotated.URL)
	if len(keys) != 2 || keys[0].KeyID != cur.KeyID() || keys[1].KeyID != old.KeyID() {
		t.Fatalf("keys after rotation: %s", doc)
	}
	if _, id, err := attest.VerifyEnvelope([]byte(res.GetEnvelopeJson()), keys); err != nil || id != old.KeyID() {
		t.Fatalf("the old attestation: key %s, %v; want it verified by the previous key %s", id, err, old.KeyID())
	}
	// The stored attestation is still served as signed (latest record, old key).
	again, err := rotated.alice.runs.GetAttestation(context.Background(), &rbookv1.GetAttestationRequest{RunId: "R-att"})
	if err != nil || again.GetEnvelopeJson() != res.GetEnvelopeJson() {
		t.Fatalf("after rotation GetAttestation = %v, %v; want the stored envelope", again, err)
	}
}

func TestKeysEndpointPublishesPublicKeysOnly(t *testing.T) {
	cur, curPEM := newKey(t)
	old, oldPEM := newKey(t)
	prev, err := attest.ParseVerificationKeys(oldPEM)
	if err != nil {
		t.Fatal(err)
	}
	cp := serveAttesting(t, filepath.Join(t.TempDir(), "cp.db"), cur, prev...)
	keys, doc := keysOf(t, cp.URL) // no bearer token: the keys are public
	var parsed attest.KeysDocument
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || parsed.Keys[0].Status != attest.KeyCurrent || parsed.Keys[0].KeyID != cur.KeyID() ||
		parsed.Keys[1].Status != attest.KeyPrevious || parsed.Keys[1].KeyID != old.KeyID() || parsed.Keys[0].Algorithm != attest.AlgEd25519 {
		t.Fatalf("keys document %s", doc)
	}
	for _, secret := range secretForms(t, curPEM, oldPEM) {
		if strings.Contains(doc, secret) {
			t.Fatalf("the keys document holds private key material: %s", doc)
		}
	}
	if strings.Contains(doc, "PRIVATE") {
		t.Fatalf("the keys document holds a private key block: %s", doc)
	}
	// Without a signing key the document is an empty list.
	bare := serveWith(t, server.Options{})
	res, err := http.Get(bare + attest.KeysPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || strings.Join(strings.Fields(string(body)), "") != `{"keys":[]}` {
		t.Fatalf("keys without a signing key: %s %s", res.Status, body)
	}
	_, err = newClients(bare).runs.GetAttestation(context.Background(), &rbookv1.GetAttestationRequest{RunId: "R-none"})
	wantCode(t, err, connect.CodeNotFound, "E_RUN_NOT_FOUND")
}

func TestAttestationIsUnavailableUntilTheRunEnds(t *testing.T) {
	signer, _ := newKey(t)
	cp := serveAttesting(t, filepath.Join(t.TempDir(), "cp.db"), signer)
	startRun(t, cp.exec, "R-open")
	_, err := cp.alice.runs.GetAttestation(context.Background(), &rbookv1.GetAttestationRequest{RunId: "R-open"})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_ATTESTATION_UNAVAILABLE")
	bare := newClients(serveWith(t, server.Options{}))
	startRun(t, bare, "R-nokey")
	record(t, bare, transition("R-nokey", 1, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))
	_, err = bare.runs.GetAttestation(context.Background(), &rbookv1.GetAttestationRequest{RunId: "R-nokey"})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_ATTESTATION_UNAVAILABLE")
}

func TestSigningKeyNeverReachesLogsOrResponses(t *testing.T) {
	signer, keyPEM := newKey(t)
	cp := serveAttesting(t, filepath.Join(t.TempDir(), "cp.db"), signer)
	approved, _ := finishedRunWithGates(t, cp)
	ctx := context.Background()
	att, err := cp.alice.runs.GetAttestation(ctx, &rbookv1.GetAttestationRequest{RunId: "R-att"})
	if err != nil {
		t.Fatal(err)
	}
	_, doc := keysOf(t, cp.URL)
	seen := []string{cp.log.String(), doc, att.GetEnvelopeJson(), getApproval(t, cp.alice, approved.GetApprovalId()).GetReviewAttestationJson()}
	for _, env := range seen[2:] {
		var e attest.Envelope
		if err := json.Unmarshal([]byte(env), &e); err != nil {
			t.Fatal(err)
		}
		payload, _ := base64.StdEncoding.DecodeString(e.Payload)
		seen = append(seen, string(payload))
	}
	for i, text := range seen {
		for _, secret := range secretForms(t, keyPEM) {
			if strings.Contains(text, secret) {
				t.Fatalf("output %d holds the signing key:\n%s", i, text)
			}
		}
	}
}

// secretForms are the ways a private key could leak: its PEM body, its DER in hex and base64.
func secretForms(t *testing.T, pems ...[]byte) []string {
	t.Helper()
	var out []string
	for _, p := range pems {
		block, _ := pem.Decode(p)
		if block == nil {
			t.Fatal("not PEM")
		}
		seed := block.Bytes[len(block.Bytes)-32:] // an Ed25519 PKCS#8 key ends with its 32-byte seed
		out = append(out, strings.TrimSpace(string(p)), hex.EncodeToString(seed), base64.StdEncoding.EncodeToString(seed),
			base64.StdEncoding.EncodeToString(block.Bytes))
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A gate whose deadline passes is decided by the clock, rejected as timed out
// (docs/approvals.md): that decision is signed too, with no vote.
func TestTimedOutGateHasAReviewAttestation(t *testing.T) {
	signer, _ := newKey(t)
	cp := serveAttesting(t, filepath.Join(t.TempDir(), "cp.db"), signer)
	startRun(t, cp.exec, "R-exp")
	res, err := cp.exec.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, cp.exec, "R-exp"),
		RunId: "R-exp", StepName: "approve", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(1500 * time.Millisecond)),
		PlanDigest: digest("plan"), OnFail: "halt"})
	if err != nil {
		t.Fatal(err)
	}
	watch, _ := watchApproval(t, cp.alice, res.GetApproval().GetApprovalId())
	expired := lastApproval(t, watch)
	if expired.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED || !strings.HasPrefix(expired.GetReason(), "timed out") {
		t.Fatalf("status %s (%s), want REJECTED as timed out", expired.GetStatus(), expired.GetReason())
	}
	var p attest.GateReviewPredicate
	if err := json.Unmarshal(verified(t, cp.URL, expired.GetReviewAttestationJson()).Predicate, &p); err != nil {
		t.Fatal(err)
	}
	if p.Gate.Verdict != "rejected" || !strings.HasPrefix(p.Gate.Reason, "timed out") || len(p.Gate.Votes) != 0 || p.Gate.DecidedAt == "" {
		t.Fatalf("expired gate %+v", p.Gate)
	}
}

// What was signed stays served by a control plane that cannot sign (a replica or a restart
// without --signing-key): the attestation row is the source.
func TestStoredAttestationIsServedWithoutAKey(t *testing.T) {
	db := filepath.Join(t.TempDir(), "cp.db")
	signer, _ := newKey(t)
	cp := serveAttesting(t, db, signer)
	approved, _ := finishedRunWithGates(t, cp)
	ctx := context.Background()
	signed, err := cp.alice.runs.GetAttestation(ctx, &rbookv1.GetAttestationRequest{RunId: "R-att"})
	if err != nil {
		t.Fatal(err)
	}
	review := getApproval(t, cp.alice, approved.GetApprovalId()).GetReviewAttestationJson()
	keyless := serveAttesting(t, db, nil)
	got, err := keyless.alice.runs.GetAttestation(ctx, &rbookv1.GetAttestationRequest{RunId: "R-att"})
	if err != nil || got.GetEnvelopeJson() != signed.GetEnvelopeJson() || got.GetKeyId() != signer.KeyID() {
		t.Fatalf("GetAttestation without a key = %v, %v; want the stored envelope", got, err)
	}
	if again := getApproval(t, keyless.alice, approved.GetApprovalId()).GetReviewAttestationJson(); review == "" || again != review {
		t.Fatalf("review attestation without a key: %q, want the stored %q", again, review)
	}
}

// A run pruned by retention leaves its attestations in its export: the run's envelope, and
// each gate's as its approval's review_attestation_json.
func TestRetentionExportKeepsTheRunsAttestations(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	finishedRun(t, st, "old-signed", store.ExecCompleted, time.Now().Add(-48*time.Hour), true)
	key := strings.Repeat("ab", 32)
	for _, a := range []store.Attestation{
		{RunID: "old-signed", KeyID: key, LastSeq: 2, Envelope: []byte(`{"payloadType":"application/vnd.in-toto+json","payload":"cnVu","signatures":[]}`)},
		{RunID: "old-signed", ApprovalID: "gate-old-signed", KeyID: key, Envelope: []byte(`{"payloadType":"application/vnd.in-toto+json","payload":"Z2F0ZQ==","signatures":[]}`)},
	} {
		if err := st.PutAttestation(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	passes := make(chan int, 1)
	defer server.SetPrunePassHook(func(n int) { passes <- n })()
	s, err := server.New(st, server.Options{Secret: []byte(testSecret), Retention: &server.RetentionOptions{Age: 24 * time.Hour, ExportDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := <-passes; n != 1 {
		t.Fatalf("pruned %d runs, want 1", n)
	}
	body, err := os.ReadFile(filepath.Join(dir, "old-signed.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Attestation attest.Envelope `json:"attestation"`
		Approvals   []struct {
			Review string `json:"review_attestation_json"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Attestation.Payload != "cnVu" || len(got.Approvals) != 1 || !strings.Contains(got.Approvals[0].Review, `"Z2F0ZQ=="`) {
		t.Fatalf("export without the attestations:\n%s", body)
	}
}
