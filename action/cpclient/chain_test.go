package cpclient

import (
	"reflect"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// A sealed transition crosses the wire and back with its hashes, its entry's transition
// hash, and a content that still hashes to them: what `rbook resume` rebuilds from the
// control plane's record continues the same chain (docs/evidence-chain.md).
func TestWireTransitionKeepsItsChain(t *testing.T) {
	in := "Heartbeat | take 1"
	tr := engine.Transition{RunID: "R", Seq: 3, Kind: engine.TransitionStepFinished, Time: time.Date(2026, 12, 2, 11, 0, 0, 123456789, time.UTC),
		StepIndex: 1, StepName: "c", StepType: "check", RunStatus: engine.RunInProgress, LastDeployName: "web",
		Evidence: &engine.Evidence{StepName: "c", Type: "check", Input: &in, Output: "{}", Status: engine.StatusPass, TimestampUTC: "2026-12-02T11:00:00.123456789Z"}}
	tr.Seal("sha256:" + "ab12cd34ab12cd34ab12cd34ab12cd34ab12cd34ab12cd34ab12cd34ab12cd34")
	back, err := FromProto(ToProto(tr))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, tr) {
		t.Fatalf("after the wire:\n%+v\n%+v\nwant\n%+v\n%+v", back, back.Evidence, tr, tr.Evidence)
	}
	if got := evidencechain.HashOf(back.Link()); got != tr.Hash || back.Evidence.TransitionHash != tr.Hash {
		t.Fatalf("hash after the wire %s, entry names %s; want %s", got, back.Evidence.TransitionHash, tr.Hash)
	}
}
