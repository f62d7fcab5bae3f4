package evidencechain

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json from the current encoding")

func ptr(s string) *string { return &s }

// sample is a step_finished link with every field set.
func sample() Link {
	return Link{
		RunID: "run-1", Seq: 3, Kind: "step_finished",
		Time:      time.Date(2026, 12, 2, 11, 15, 41, 123456789, time.UTC),
		StepIndex: 1, StepName: "deploy", StepType: "deploy", RunStatus: "IN_PROGRESS",
		LastDeployName: "web", RollbackFor: "check", Message: "approved",
		Evidence: &Entry{StepName: "deploy", Type: "deploy", Input: ptr("web"), Output: "ok", Status: "SUCCESS",
			TimestampUTC: "2026-12-02T11:15:41.123456789Z", SourceInput: ptr("{{web}}")},
		PrevHash: Genesis,
	}
}

func TestHashDependsOnlyOnTheFields(t *testing.T) {
	base := sample()
	want := HashOf(base)
	tests := []struct {
		name   string
		change func(*Link)
	}{
		{"its own hash field", func(l *Link) { l.Hash = "sha256:" + strings.Repeat("f", 64) }},
		{"the time's zone", func(l *Link) { l.Time = l.Time.In(time.FixedZone("X", 5*3600)) }},
		{"a monotonic clock reading", func(l *Link) { l.Time = l.Time.Add(0).Round(0) }},
		{"a copied evidence entry", func(l *Link) { e := *l.Evidence; l.Evidence = &e }},
		{"a copied input pointer", func(l *Link) { e := *l.Evidence; e.Input = ptr("web"); l.Evidence = &e }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := sample()
			tt.change(&l)
			if got := HashOf(l); got != want {
				t.Fatalf("HashOf = %s, want %s", got, want)
			}
		})
	}
	if !WellFormed(want) {
		t.Fatalf("HashOf = %q, not sha256:<64 lowercase hex>", want)
	}
}

func TestEveryFieldChangesTheHash(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Link)
	}{
		{"run_id", func(l *Link) { l.RunID = "run-2" }},
		{"seq", func(l *Link) { l.Seq = 4 }},
		{"kind", func(l *Link) { l.Kind = "step_started" }},
		{"time by a nanosecond", func(l *Link) { l.Time = l.Time.Add(time.Nanosecond) }},
		{"step_index", func(l *Link) { l.StepIndex = -1 }},
		{"step_name", func(l *Link) { l.StepName = "deploy2" }},
		{"step_type", func(l *Link) { l.StepType = "rollback" }},
		{"run_status", func(l *Link) { l.RunStatus = "SUCCESS" }},
		{"last_deploy_name", func(l *Link) { l.LastDeployName = "api" }},
		{"rollback_for", func(l *Link) { l.RollbackFor = "" }},
		{"message", func(l *Link) { l.Message = "approved." }},
		{"prev_hash", func(l *Link) { l.PrevHash = "sha256:" + strings.Repeat("1", 64) }},
		{"evidence removed", func(l *Link) { l.Evidence = nil }},
		{"evidence step_name", func(l *Link) { l.Evidence.StepName = "x" }},
		{"evidence type", func(l *Link) { l.Evidence.Type = "check" }},
		{"evidence input", func(l *Link) { l.Evidence.Input = ptr("api") }},
		{"evidence input absent", func(l *Link) { l.Evidence.Input = nil }},
		{"evidence output", func(l *Link) { l.Evidence.Output = "ok " }},
		{"evidence status", func(l *Link) { l.Evidence.Status = "FAILED" }},
		{"evidence timestamp_utc", func(l *Link) { l.Evidence.TimestampUTC = "2026-12-02T11:15:41.123456780Z" }},
		{"evidence source_input", func(l *Link) { l.Evidence.SourceInput = ptr("{{api}}") }},
		{"evidence source_input absent", func(l *Link) { l.Evidence.SourceInput = nil }},
		{"bytes moved between fields", func(l *Link) { l.StepName, l.StepType = "deploydep", "loy" }},
	}
	want := HashOf(sample())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := sample()
			tt.change(&l)
			if got := HashOf(l); got == want {
				t.Fatalf("changing %s left the hash at %s", tt.name, got)
			}
		})
	}
}

func TestAbsentAndEmptyInputDiffer(t *testing.T) {
	absent, empty := sample(), sample()
	absent.Evidence.Input, empty.Evidence.Input = nil, ptr("")
	if HashOf(absent) == HashOf(empty) {
		t.Fatal("an absent input and an empty one hash alike")
	}
	absent.Evidence.SourceInput, empty.Evidence.SourceInput = nil, ptr("")
	if HashOf(absent) == HashOf(empty) {
		t.Fatal("an absent source_input and an empty one hash alike")
	}
}

// vector is one known answer in testdata/vectors.json: a link written as JSON for readers of
// docs/evidence-chain.md, its canonical encoding in hex, and its hash.
type vector struct {
	Name     string `json:"name"`
	Link     Link   `json:"link"`
	Encoding string `json:"encoding_hex"`
	Hash     string `json:"hash"`
}

func vectors() []vector {
	first := Link{RunID: "run-1", Seq: 1, Kind: "run_started", Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		StepIndex: -1, RunStatus: "IN_PROGRESS"}
	Seal(Genesis, &first)
	second := Link{RunID: "run-1", Seq: 2, Kind: "step_finished", Time: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC),
		StepIndex: 0, StepName: "check", StepType: "check", RunStatus: "IN_PROGRESS",
		Evidence: &Entry{StepName: "check", Type: "check", Input: ptr("Heartbeat | take 1"), Output: `{"rows":[]}`,
			Status: "SUCCESS", TimestampUTC: "2026-01-02T03:04:06.000000000Z"}}
	Seal(first.Hash, &second)
	third := Link{RunID: "run-1", Seq: 3, Kind: "run_finished", Time: time.Date(2026, 1, 2, 3, 4, 7, 500, time.UTC),
		StepIndex: -1, RunStatus: "CANCELLED", Message: "cancelled at a gate",
		Evidence: &Entry{StepName: "CANCEL", Type: "cancel", Input: nil, Output: "", Status: "CANCELLED",
			TimestampUTC: "2026-01-02T03:04:07.000000500Z"}}
	Seal(second.Hash, &third)
	var out []vector
	for _, l := range []struct {
		name string
		l    Link
	}{{"run_started, seq 1 after the genesis", first}, {"step_finished with an evidence entry", second}, {"run_finished with an absent input", third}} {
		out = append(out, vector{Name: l.name, Link: l.l, Encoding: hex.EncodeToString(Encode(l.l)), Hash: l.l.Hash})
	}
	return out
}

func TestKnownAnswerVectors(t *testing.T) {
	path := filepath.Join("testdata", "vectors.json")
	if *update {
		b, err := json.MarshalIndent(vectors(), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(vs) == 0 {
		t.Fatalf("%s holds no vectors", path)
	}
	var links []Link
	for _, v := range vs {
		if got := hex.EncodeToString(Encode(v.Link)); got != v.Encoding {
			t.Errorf("%s: encoding\n got %s\nwant %s", v.Name, got, v.Encoding)
		}
		if got := HashOf(v.Link); got != v.Hash || v.Link.Hash != v.Hash {
			t.Errorf("%s: HashOf = %s, link.hash %s, want %s", v.Name, got, v.Link.Hash, v.Hash)
		}
		links = append(links, v.Link)
	}
	head, err := Verify(links)
	if err != nil || head != vs[len(vs)-1].Hash {
		t.Fatalf("Verify(vectors) = %s, %v; want %s", head, err, vs[len(vs)-1].Hash)
	}
}

// chain returns a sealed run of n links.
func chain(n int) []Link {
	links := make([]Link, n)
	prev := Genesis
	for i := range links {
		l := sample()
		l.Seq = int64(i + 1)
		l.Time = l.Time.Add(time.Duration(i) * time.Second)
		Seal(prev, &l)
		links[i], prev = l, l.Hash
	}
	return links
}

func TestVerifyFindsTheFirstTamperedTransition(t *testing.T) {
	tests := []struct {
		name    string
		tamper  func([]Link) []Link
		seq     int64
		because string
	}{
		{"a deleted transition", func(ls []Link) []Link { return append(ls[:2:2], ls[3:]...) }, 4, "seq 4 follows seq 2"},
		{"two swapped transitions", func(ls []Link) []Link { ls[1], ls[2] = ls[2], ls[1]; return ls }, 3, "seq 3 follows seq 1"},
		{"an edited output", func(ls []Link) []Link { ls[2].Evidence.Output = "forged"; return ls }, 3, "does not match the transition's content"},
		{"an edited output, rehashed", func(ls []Link) []Link {
			ls[2].Evidence.Output = "forged"
			ls[2].Hash = HashOf(ls[2])
			return ls
		}, 4, "is not the previous transition's hash"},
		{"a missing first transition", func(ls []Link) []Link { return ls[1:] }, 2, "starts at seq 2"},
		{"a transition of another run", func(ls []Link) []Link {
			ls[3].RunID = "run-2"
			Seal(ls[2].Hash, &ls[3])
			return ls
		}, 4, "belongs to another run"},
		{"a transition without a hash", func(ls []Link) []Link { ls[1].Hash = ""; return ls }, 2, "has no hash"},
		{"a first transition not after the genesis", func(ls []Link) []Link {
			Seal("sha256:"+strings.Repeat("a", 64), &ls[0])
			return ls
		}, 1, "is not the previous transition's hash " + Genesis},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			links := tt.tamper(chain(5))
			head, err := Verify(links)
			var be *BreakError
			if !errors.As(err, &be) {
				t.Fatalf("Verify = %s, %v; want a *BreakError", head, err)
			}
			if be.Seq != tt.seq || !strings.Contains(be.Reason, tt.because) {
				t.Fatalf("Verify: seq %d, %q; want seq %d, reason containing %q", be.Seq, be.Reason, tt.seq, tt.because)
			}
		})
	}
}

func TestVerifyReturnsTheHead(t *testing.T) {
	links := chain(4)
	head, err := Verify(links)
	if err != nil || head != links[3].Hash {
		t.Fatalf("Verify = %s, %v; want %s", head, err, links[3].Hash)
	}
	if head, err := Verify(nil); err != nil || head != Genesis {
		t.Fatalf("Verify(nil) = %s, %v; want the genesis", head, err)
	}
	head, err = VerifyFrom(links[1].Hash, links[2:])
	if err != nil || head != links[3].Hash {
		t.Fatalf("VerifyFrom(seq 2's hash, seq 3..4) = %s, %v; want %s", head, err, links[3].Hash)
	}
	if _, err := VerifyFrom(links[0].Hash, links[2:]); err == nil {
		t.Fatal("VerifyFrom accepted a suffix that does not follow the head it was given")
	}
}
