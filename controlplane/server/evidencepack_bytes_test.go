package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// The run attestation's evidence pack digest names the file the executor writes, so the
// control plane's rendering of a whole pack must be that file's bytes exactly. This test
// (and only a test) holds both halves: controlplane code never imports action/.
func TestEvidencePackJSONIsTheExecutorsFileByteForByte(t *testing.T) {
	signer, _ := newKey(t)
	cp := serveAttesting(t, filepath.Join(t.TempDir(), "cp.db"), signer)
	startRun(t, cp.exec, "R-bytes")
	query, written := `Deploys | where name == "web" && x < 3`, `Deploys | where name == "web"`
	entries := []engine.Evidence{
		{StepName: "check <prod>", Type: "check", Input: &query, SourceInput: &written, Output: `{"rows":[{"a":"<b>&amp;"}],"note":"é ✓"}`, Status: engine.StatusPass},
		{StepName: "deploy", Type: "deploy", Output: "deployed web v2\n\ttabbed \u2028 line", Status: engine.StatusFail},
		{StepName: "confirm", Type: "confirm", Output: "", Status: engine.StatusSkipped},
	}
	statusOf := map[engine.StepStatus]rbookv1.StepStatus{engine.StatusPass: rbookv1.StepStatus_STEP_STATUS_PASS,
		engine.StatusFail: rbookv1.StepStatus_STEP_STATUS_FAIL, engine.StatusSkipped: rbookv1.StepStatus_STEP_STATUS_SKIPPED}
	record(t, cp.exec, transition("R-bytes", 1, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED))
	for i := range entries {
		at := time.Date(2026, 12, 2, 10, 0, i, 123456789, time.UTC)
		entries[i].TimestampUTC = at.Format("2006-01-02T15:04:05.000000000Z")
		e := entries[i]
		record(t, cp.exec, &rbookv1.Transition{RunId: "R-bytes", Seq: int64(i + 2), Time: timestamppb.New(at),
			Kind: rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED, StepIndex: int32(i), StepName: e.StepName, StepType: e.Type,
			RunStatus: rbookv1.RunStatus_RUN_STATUS_RUNNING,
			Evidence: &rbookv1.Evidence{StepName: e.StepName, Type: e.Type, Input: e.Input, SourceInput: e.SourceInput, Output: e.Output,
				Status: statusOf[e.Status], TimestampUtc: e.TimestampUTC}})
	}
	record(t, cp.exec, transition("R-bytes", int64(len(entries)+2), rbookv1.RunStatus_RUN_STATUS_FAILED))
	want, err := state.EvidencePackJSON(entries)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cp.alice.runs.GetEvidencePack(context.Background(), &rbookv1.GetEvidencePackRequest{RunId: "R-bytes"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetEvidencePackJson(); got != string(want) {
		t.Fatalf("evidence_pack_json differs from the executor's file:\n got %q\nwant %q", got, want)
	}
	att, err := cp.alice.runs.GetAttestation(context.Background(), &rbookv1.GetAttestationRequest{RunId: "R-bytes"})
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(want); att.GetEvidencePackSha256() != hex.EncodeToString(sum[:]) {
		t.Fatalf("attested pack digest %s, the executor's file %x", att.GetEvidencePackSha256(), sum)
	}
}
