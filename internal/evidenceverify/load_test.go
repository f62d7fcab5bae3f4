package evidenceverify

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// fakeRemote is a control plane that holds one run's record and attestation.
type fakeRemote struct {
	keys []attest.PublicKey
	env  []byte
	ts   []engine.Transition
}

func (r *fakeRemote) Where() string { return "the control plane fake" }
func (r *fakeRemote) PublicKeys(context.Context) ([]attest.PublicKey, error) {
	return r.keys, nil
}
func (r *fakeRemote) Attestation(context.Context, string) ([]byte, error) { return r.env, nil }
func (r *fakeRemote) Transitions(context.Context, string) ([]engine.Transition, error) {
	return r.ts, nil
}

func TestControlPlaneGivesTheKeysAttestationAndChainNoFileGives(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	remote := &fakeRemote{keys: []attest.PublicKey{attest.PublicOf(f.signer)}, env: readFile(t, f.att), ts: f.transitions}
	for _, p := range []string{f.att, f.journal} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	in, err := Load(context.Background(), Options{Pack: f.pack}, remote)
	if err != nil {
		t.Fatal(err)
	}
	rep := Verify(in)
	if rep.Code() != ExitVerified || rep.KeyID != f.signer.KeyID() {
		var b strings.Builder
		rep.WriteText(&b, false)
		t.Fatalf("exit %d, key %q:\n%s", rep.Code(), rep.KeyID, b.String())
	}
	if in.JournalFrom != "the control plane's record" || in.EnvelopeFrom != "the control plane's attestation" {
		t.Errorf("read from %q and %q", in.JournalFrom, in.EnvelopeFrom)
	}
}

func TestUnreadableInputIsAnInputErrorNamingWhatToGive(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	cases := []struct {
		name string
		prep func(t *testing.T) Options
		want string
	}{
		{"no journal beside the pack", func(t *testing.T) Options {
			os.Remove(f.journal)
			return Options{Pack: f.pack}
		}, "Give it with --journal FILE, or read the chain from the control plane with --control-plane URL"},
		{"a pack under another name", func(t *testing.T) Options {
			p := f.dir + "/pack.json"
			writeFile(t, p, readFile(t, f.pack))
			return Options{Pack: p}
		}, "an evidence pack's file is named <run_id>.evidence.json"},
		{"a journal of another run", func(t *testing.T) Options {
			other := newFixture(t, runB, "github:alice")
			return Options{Pack: f.pack, Journal: other.journal}
		}, ":1: run_id: the journal is of run " + runB},
		{"a head that is not a hash", func(t *testing.T) Options {
			return Options{Pack: f.pack, Head: "9c1e"}
		}, `--head "9c1e": a chain head is "sha256:"`},
		{"a key file without a key", func(t *testing.T) Options {
			p := f.dir + "/empty.pem"
			writeFile(t, p, []byte("not a key\n"))
			return Options{Pack: f.pack, Journal: other(t, f), KeyFile: p}
		}, "give the control plane's public key as PEM"},
		{"an attestation named but missing", func(t *testing.T) Options {
			return Options{Pack: f.pack, Journal: other(t, f), Attestation: f.dir + "/none.json"}
		}, "the attestation cannot be read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(context.Background(), c.prep(t), nil)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want an *InputError containing %q", err, c.want)
			}
		})
	}
}

// other writes a copy of the fixture's journal (an earlier case may have removed it) and
// returns its path.
func other(t *testing.T, f *fixture) string {
	t.Helper()
	f.writeJournal(t, f.transitions)
	return f.journal
}

func TestPublishedKeysAreReadFromTheWellKnownPath(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	pub := attest.PublicOf(f.signer)
	doc, err := attest.NewKeysDocument(&pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != attest.KeysPath {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(doc)
	}))
	defer srv.Close()
	remote, err := NewRemote(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := remote.PublicKeys(context.Background())
	if err != nil || len(keys) != 1 || keys[0].KeyID != f.signer.KeyID() {
		t.Fatalf("keys %+v, err %v", keys, err)
	}
}

func TestJournalStartingAfterSeqOneGivesWayToTheControlPlanesRecord(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	f.writeJournal(t, f.transitions[3:]) // as a folder a resumed run moved to holds it
	in, err := Load(context.Background(), Options{Pack: f.pack, KeyFile: f.key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep := Verify(in); rep.Code() != ExitFailed || rep.First.Check != CheckChain || !strings.Contains(rep.First.Why, "not 1") {
		t.Fatalf("without a control plane: exit %d, first %+v; want the chain to fail from seq 4", rep.Code(), rep.First)
	}
	remote := &fakeRemote{env: readFile(t, f.att), ts: f.transitions}
	in, err = Load(context.Background(), Options{Pack: f.pack, KeyFile: f.key}, remote)
	if err != nil {
		t.Fatal(err)
	}
	if rep := Verify(in); rep.Code() != ExitVerified || in.JournalFrom != "the control plane's record" {
		t.Fatalf("with a control plane: exit %d from %q", rep.Code(), in.JournalFrom)
	}
}

func TestSigningKeyFileGivenAsKeyVerifiesWithItsPublicHalf(t *testing.T) {
	signer, private, err := attest.GenerateEd25519()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureSigned(t, runA, "github:alice", signer)
	keyFile := f.dir + "/signing-key.pem"
	writeFile(t, keyFile, private)
	if rep := f.verify(t, Options{KeyFile: keyFile}); rep.Code() != ExitVerified || rep.KeyID != signer.KeyID() {
		t.Fatalf("exit %d, key %q, first %+v", rep.Code(), rep.KeyID, rep.First)
	}
}

func TestControlPlaneWithoutKeysRunsTheChecksAndEndsUnsigned(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	in, err := Load(context.Background(), Options{Pack: f.pack}, &fakeRemote{})
	if err != nil {
		t.Fatal(err)
	}
	rep := Verify(in)
	var text strings.Builder
	rep.WriteText(&text, false)
	if rep.Code() != ExitUnsigned || rep.Checks[0].Result != ResultOK || rep.Checks[1].Result != ResultOK {
		t.Fatalf("exit %d, checks %+v, want the chain and pack checked and the outcome unsigned", rep.Code(), rep.Checks)
	}
	if !strings.Contains(text.String(), "Missing: the control plane fake publishes no public key: it has no signing key") {
		t.Fatalf("the summary does not say the control plane has no key:\n%s", text.String())
	}
	if _, err := attest.ParseKeysDocument([]byte(`{"keys":[]}`)); !errors.Is(err, attest.ErrNoKeys) {
		t.Fatalf("an empty keys document: %v, want ErrNoKeys", err)
	}
}

func TestUnsignedSummaryNamesWhatIsMissing(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	rep := f.verify(t, Options{KeyFile: "-"})
	var text strings.Builder
	rep.WriteText(&text, false)
	if rep.Code() != ExitUnsigned || !strings.Contains(text.String(), "Missing: no public key: give") || strings.Contains(text.String(), "--attestation FILE") {
		t.Fatalf("exit %d; the summary should ask for the key only:\n%s", rep.Code(), text.String())
	}
}

func TestChangedPackSaysThePackChangedNotThatTheAttestationIsAnotherRuns(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	writeFile(t, f.pack, append(readFile(t, f.pack), ' '))
	rep := f.verify(t, Options{})
	var text strings.Builder
	rep.WriteText(&text, false)
	if strings.Contains(text.String(), "not this run's") || !strings.Contains(text.String(), "not checked: the pack's SHA-256") {
		t.Fatalf("the gates line does not say the pack changed:\n%s", text.String())
	}
}
