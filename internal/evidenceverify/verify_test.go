package evidenceverify

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/attest"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

const (
	runA = "RBOOK-20261202-fixture-0a1b2c3d"
	runB = "RBOOK-20261202-fixture-0a1b2c3d.2"
)

// packOf reads the fixture's pack entries.
func packOf(t *testing.T, f *fixture) []engine.Evidence {
	t.Helper()
	_, ev, _, err := readPack(f.pack)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// rewritePack writes entries as the fixture's pack.
func rewritePack(t *testing.T, f *fixture, ev []engine.Evidence) {
	t.Helper()
	var ts []engine.Transition
	for i := range ev {
		ts = append(ts, engine.Transition{Evidence: &ev[i]})
	}
	f.writePack(t, ts)
}

// reseal seals ts again from the genesis, as someone who rewrote the record would.
func reseal(ts []engine.Transition) []engine.Transition {
	prev := evidencechain.Genesis
	for i := range ts {
		ts[i].Seal(prev)
		prev = ts[i].Hash
	}
	return ts
}

// dropLast writes the fixture's journal and pack without the transitions of the last n seqs.
func dropLast(t *testing.T, f *fixture, n int) {
	t.Helper()
	ts := f.transitions[:len(f.transitions)-n]
	f.writeJournal(t, ts)
	f.writePack(t, ts)
}

func TestTamperedEvidenceIsCaughtWithTheFirstFailingEntryNamed(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, f *fixture) Options
		code   int
		check  string // the check that names the first failure
		step   string // its step
		why    string // a phrase of its reason
	}{
		{"an untouched run verifies", func(*testing.T, *fixture) Options { return Options{} }, ExitVerified, "", "", ""},
		{"the head kept elsewhere matches", func(_ *testing.T, f *fixture) Options {
			return Options{Head: f.transitions[len(f.transitions)-1].Hash}
		}, ExitVerified, "", "", ""},
		{"an entry deleted from the pack", func(t *testing.T, f *fixture) Options {
			ev := packOf(t, f)
			rewritePack(t, f, slices.Delete(ev, 1, 2))
			return Options{}
		}, ExitFailed, CheckPack, "approve-rollout", "out of place: entries were deleted or reordered"},
		{"a transition deleted from the journal", func(t *testing.T, f *fixture) Options {
			f.writeJournal(t, slices.Delete(slices.Clone(f.transitions), 3, 4))
			return Options{}
		}, ExitFailed, CheckChain, "approve-rollout", "a transition was removed"},
		{"two pack entries swapped", func(t *testing.T, f *fixture) Options {
			ev := packOf(t, f)
			ev[0], ev[2] = ev[2], ev[0]
			rewritePack(t, f, ev)
			return Options{}
		}, ExitFailed, CheckPack, "check-inventory", "is the chain's entry 3"},
		{"two journal lines swapped", func(t *testing.T, f *fixture) Options {
			ts := slices.Clone(f.transitions)
			ts[2], ts[3] = ts[3], ts[2]
			f.writeJournal(t, ts)
			return Options{}
		}, ExitFailed, CheckChain, "approve-rollout", "removed, duplicated or reordered"},
		{"an output edited in the pack", func(t *testing.T, f *fixture) Options {
			ev := packOf(t, f)
			ev[2].Output = "deployed config v3"
			rewritePack(t, f, ev)
			return Options{}
		}, ExitFailed, CheckPack, "deploy-config", `output differs from what the chain's seq`},
		{"an output edited in the journal and the pack", func(t *testing.T, f *fixture) Options {
			ts := cloneTransitions(f.transitions)
			for i := range ts {
				if e := ts[i].Evidence; e != nil && e.StepName == "deploy-config" {
					e.Output = "deployed config v3"
				}
			}
			f.writeJournal(t, ts)
			f.writePack(t, ts)
			return Options{}
		}, ExitFailed, CheckChain, "deploy-config", "the transition was edited"},
		{"the approver changed in the attestation", func(t *testing.T, f *fixture) Options {
			var env attest.Envelope
			if err := json.Unmarshal(readFile(t, f.att), &env); err != nil {
				t.Fatal(err)
			}
			payload, _ := base64.StdEncoding.DecodeString(env.Payload)
			payload = bytes.ReplaceAll(payload, []byte("github:alice"), []byte("github:mallory"))
			env.Payload = base64.StdEncoding.EncodeToString(payload)
			data, _ := json.Marshal(env)
			writeFile(t, f.att, data)
			return Options{}
		}, ExitFailed, CheckSignature, "", "the payload or the signature was changed"},
		{"the approver changed in the pack", func(t *testing.T, f *fixture) Options {
			f.writePack(t, renameApprover(cloneTransitions(f.transitions), "github:alice", "github:mallory"))
			return Options{}
		}, ExitFailed, CheckPack, "approve-rollout", "differs from what the chain's seq"},
		{"the approver changed in the journal and the pack, the chain sealed again", func(t *testing.T, f *fixture) Options {
			ts := reseal(renameApprover(cloneTransitions(f.transitions), "github:alice", "github:mallory"))
			f.writeJournal(t, ts)
			f.writePack(t, ts)
			return Options{}
		}, ExitFailed, CheckSubjects, "", "the chain was changed and sealed again"},
		{"seq 3 edited and the whole chain sealed again", func(t *testing.T, f *fixture) Options {
			ts := cloneTransitions(f.transitions)
			ts[2].Message = "edited"
			f.writeJournal(t, reseal(ts))
			f.writePack(t, ts)
			return Options{}
		}, ExitFailed, CheckSubjects, "", "The first entry that differs cannot be named from the head alone"},
		{"the last entries dropped and nothing kept elsewhere", func(t *testing.T, f *fixture) Options {
			dropLast(t, f, 3)
			if err := os.Remove(f.att); err != nil {
				t.Fatal(err)
			}
			return Options{}
		}, ExitUnsigned, "", "", ""},
		{"the last entries dropped, caught by --head", func(t *testing.T, f *fixture) Options {
			dropLast(t, f, 3)
			return Options{Head: f.transitions[len(f.transitions)-1].Hash}
		}, ExitFailed, CheckHead, "", "transitions after seq 8 were deleted"},
		{"the last entries dropped, caught by the attestation's head", func(t *testing.T, f *fixture) Options {
			dropLast(t, f, 3)
			return Options{}
		}, ExitFailed, CheckSubjects, "", "cannot be named from the head alone"},
		{"another run's attestation replayed", func(t *testing.T, f *fixture) Options {
			other := newFixtureSigned(t, runB, "github:alice", f.signer)
			return Options{Attestation: other.att}
		}, ExitFailed, CheckSubjects, "", "it is another run's attestation"},
		{"signed by a key that was not given", func(t *testing.T, f *fixture) Options {
			other := newFixture(t, runA, "github:alice")
			return Options{KeyFile: other.key}
		}, ExitFailed, CheckSignature, "", "is signed by the .rbook/signing-key.pem of the folder it ran in: give --key that file"},
		{"the pack re-encoded", func(t *testing.T, f *fixture) Options {
			var compact bytes.Buffer
			if err := json.Compact(&compact, readFile(t, f.pack)); err != nil {
				t.Fatal(err)
			}
			writeFile(t, f.pack, compact.Bytes())
			return Options{}
		}, ExitFailed, CheckPack, "", "not the JSON rbook writes"},
		{"a gate decision missing from the attestation", func(t *testing.T, f *fixture) Options {
			f.predicate.Gates = nil
			f.sign(t)
			return Options{}
		}, ExitFailed, CheckGates, "approve-rollout", "the attestation has no such decision"},
		{"the run's starter approved a four-eyes gate", func(t *testing.T, f *fixture) Options {
			f.predicate.Gates[0].Votes[0].Identity = f.predicate.StartedBy
			f.sign(t)
			return Options{}
		}, ExitFailed, CheckPolicy, "approve-rollout", "requires four eyes"},
		{"fewer people approved than the policy requires", func(t *testing.T, f *fixture) Options {
			f.predicate.Gates[0].Policy.RequiredApprovals = 2
			f.predicate.Gates[0].Votes = append(f.predicate.Gates[0].Votes, attest.Vote{Identity: "github:alice", Verdict: "approved"})
			f.sign(t)
			return Options{}
		}, ExitFailed, CheckPolicy, "approve-rollout", "approved by 1 distinct people, but its policy"},
		{"no public key given", func(*testing.T, *fixture) Options { return Options{KeyFile: "-"} }, ExitUnsigned, "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, runA, "github:alice")
			rep := f.verify(t, c.tamper(t, f))
			var text bytes.Buffer
			rep.WriteText(&text, false)
			if got := rep.Code(); got != c.code {
				t.Fatalf("exit code %d, want %d:\n%s", got, c.code, text.String())
			}
			if c.check == "" {
				if rep.First != nil {
					t.Fatalf("a failure: %+v\n%s", rep.First, text.String())
				}
				return
			}
			f1 := rep.First
			if f1 == nil || f1.Check != c.check || f1.Step != c.step || !strings.Contains(f1.Why, c.why) {
				t.Fatalf("first failure %+v, want check %s, step %q, why containing %q:\n%s", f1, c.check, c.step, c.why, text.String())
			}
			if !strings.Contains(text.String(), "First failing entry: ") || !strings.Contains(text.String(), "✗ "+c.check) {
				t.Errorf("the text does not name the failing check and entry:\n%s", text.String())
			}
		})
	}
}

// cloneTransitions copies ts deeply enough to change their evidence.
func cloneTransitions(ts []engine.Transition) []engine.Transition {
	out := slices.Clone(ts)
	for i := range out {
		if e := out[i].Evidence; e != nil {
			c := *e
			out[i].Evidence = &c
		}
	}
	return out
}

// renameApprover replaces who approved in the gate's transitions and entries.
func renameApprover(ts []engine.Transition, from, to string) []engine.Transition {
	for i := range ts {
		ts[i].Message = strings.ReplaceAll(ts[i].Message, from, to)
		if e := ts[i].Evidence; e != nil {
			e.Output = strings.ReplaceAll(e.Output, from, to)
		}
	}
	return ts
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
