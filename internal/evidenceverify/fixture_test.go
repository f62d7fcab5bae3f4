package evidenceverify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// fixture is one run's evidence as the executor and the control plane leave it: the pack,
// the journal and the signed attestation in dir, the public key's PEM in key, and what
// built them, so a test can change one thing and sign again.
type fixture struct {
	dir, runID              string
	pack, journal, att, key string
	transitions             []engine.Transition
	predicate               attest.RunPredicate
	signer                  attest.Signer
}

// journalRecorder keeps a run's transitions in order, as the journal does.
type journalRecorder struct{ ts []engine.Transition }

func (r *journalRecorder) Record(_ context.Context, t engine.Transition) error {
	r.ts = append(r.ts, t)
	return nil
}

// gateBy decides every gate as approved by who, through the control plane.
type gateBy string

func (g gateBy) Await(context.Context, engine.GateRequest) (engine.Decision, error) {
	return engine.Decision{Verdict: engine.Approved, By: string(g), Source: "control-plane", Reason: "ship it"}, nil
}

// gateTimesOut is a gate whose deadline passes before anyone decides.
type gateTimesOut struct{}

func (gateTimesOut) Await(context.Context, engine.GateRequest) (engine.Decision, error) {
	return engine.Decision{}, context.DeadlineExceeded
}

// runOnEngine runs a runbook of four steps — a check, a confirm gate, a deploy and its
// rollback step (skipped) — on the engine, its gate approved by approver, and returns its
// transitions, sealed by the engine.
func runOnEngine(t *testing.T, runID, approver string) []engine.Transition {
	t.Helper()
	ts, status := runWithGate(t, runID, gateBy(approver))
	if status != engine.RunCompleted {
		t.Fatalf("fixture run: %v", status)
	}
	return ts
}

// runWithGate runs the fixture runbook with gate deciding its confirm step and returns its
// transitions and final status.
func runWithGate(t *testing.T, runID string, gate engine.Gate) ([]engine.Transition, engine.RunStatus) {
	t.Helper()
	in := func(s string) *string { return &s }
	steps := []runbook.Step{
		{Name: "check-inventory", Type: runbook.TypeCheck, Input: in("Resources | count"), OnFail: runbook.OnFailHalt},
		{Name: "approve-rollout", Type: runbook.TypeConfirm, OnFail: runbook.OnFailHalt},
		{Name: "deploy-config", Type: runbook.TypeDeploy, Input: in("remediation/config.json"), OnFail: runbook.OnFailRollback},
		{Name: "rollback-config", Type: runbook.TypeRollback, Input: in("remediation/previous.json"), OnFail: runbook.OnFailHalt},
	}
	for i := range steps {
		steps[i].Index, steps[i].TimeoutSeconds = i, 5
	}
	plan := &runbook.Plan{Name: "fixture", Path: "runbooks/fixture.yaml", Steps: steps, ContentHash: strings.Repeat("ab", 32)}
	exec := engine.ExecutorFunc(func(_ context.Context, s runbook.Step, _ engine.RunContext) engine.Outcome {
		o := engine.Outcome{Status: engine.StatusPass, Output: `{"rows":3}`}
		if s.Type == runbook.TypeDeploy {
			o.Output, o.DeployName = "deployed config v2", "dep-"+s.Name
		}
		return o
	})
	rec := &journalRecorder{}
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	e := &engine.Engine{Plan: plan, Gate: gate, Recorders: []engine.Recorder{rec},
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: exec, runbook.TypeDeploy: exec, runbook.TypeRollback: exec},
		Now:       func() time.Time { clock = clock.Add(1500 * time.Microsecond); return clock }}
	res, err := e.Run(context.Background(), engine.Start{RunID: runID, Fresh: true})
	if err != nil {
		t.Fatalf("fixture run: %v %v", res.Status, err)
	}
	return rec.ts, res.Status
}

// newFixture runs the fixture runbook as run runID, approved by approver, and writes its
// evidence into a new folder. The attestation is signed by a new Ed25519 key, with one gate
// decision under a four-eyes policy of one approval; the run was started by github:starter.
func newFixture(t *testing.T, runID, approver string) *fixture {
	t.Helper()
	signer, _, err := attest.GenerateEd25519()
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureSigned(t, runID, approver, signer)
}

func newFixtureSigned(t *testing.T, runID, approver string, signer attest.Signer) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, runID: runID, signer: signer,
		pack:    filepath.Join(dir, runID+packSuffix),
		journal: filepath.Join(dir, runID+state.JournalSuffix),
		att:     filepath.Join(dir, runID+attestationSuffix),
		key:     filepath.Join(dir, "rbook-signing.pub.pem")}
	f.transitions = runOnEngine(t, runID, approver)
	pub, err := attest.MarshalPublicKeyPEM(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.key, pub)
	f.writeJournal(t, f.transitions)
	f.writePack(t, f.transitions)
	var gates []attest.GateDecision
	for _, tr := range f.transitions {
		if tr.Kind == engine.TransitionGateDecided {
			gates = append(gates, attest.GateDecision{ApprovalID: "a-1", StepIndex: tr.StepIndex, StepName: tr.StepName, Verdict: "approved",
				DecidedBy: approver, Channel: "github", People: []string{approver},
				Policy: attest.GatePolicy{Rule: "default", RequiredApprovals: 1, FourEyes: true},
				Votes:  []attest.Vote{{Identity: approver, Channel: "github", Verdict: "approved", Verified: true}}})
		}
	}
	last := f.transitions[len(f.transitions)-1]
	f.predicate = attest.RunPredicate{RunID: runID, Name: "fixture", Kind: "runbook", ContentHash: strings.Repeat("ab", 32),
		ChainHead: last.Hash, FinalStatus: string(last.RunStatus), StartedBy: "github:starter", Gates: gates}
	f.sign(t)
	return f
}

// writeJournal writes ts as the journal of the fixture's run: the header, then one JSON line
// per transition.
func (f *fixture) writeJournal(t *testing.T, ts []engine.Transition) {
	t.Helper()
	var b bytes.Buffer
	h, _ := json.Marshal(state.JournalHeader{Journal: state.JournalFormat, RunID: f.runID, StateFile: "state.json"})
	b.Write(append(h, '\n'))
	for _, tr := range ts {
		line, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	writeFile(t, f.journal, b.Bytes())
}

// writePack writes the evidence pack of ts as the executor does (state.EvidencePackJSON).
func (f *fixture) writePack(t *testing.T, ts []engine.Transition) {
	t.Helper()
	var ev []engine.Evidence
	for _, tr := range ts {
		if tr.Evidence != nil {
			ev = append(ev, *tr.Evidence)
		}
	}
	data, err := state.EvidencePackJSON(ev)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.pack, data)
}

// sign writes the attestation of the fixture's predicate and current pack, signed by its key.
func (f *fixture) sign(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(f.pack)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	stmt, err := attest.NewStatement([]attest.Subject{
		{Name: "runbooks/fixture.yaml", Digest: map[string]string{"sha256": f.predicate.ContentHash}},
		{Name: f.runID + packSuffix, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}},
	}, attest.RunPredicateType, f.predicate)
	if err != nil {
		t.Fatal(err)
	}
	env, err := attest.SignStatement(context.Background(), f.signer, stmt)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.att, env)
}

// verify loads the fixture's files with o's other options and verifies them.
func (f *fixture) verify(t *testing.T, o Options) *Report {
	t.Helper()
	o.Pack = f.pack
	if o.KeyFile == "-" {
		o.KeyFile = ""
	} else if o.KeyFile == "" {
		o.KeyFile = f.key
	}
	in, err := Load(context.Background(), o, nil)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return Verify(in)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
