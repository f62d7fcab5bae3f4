package evidenceverify

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// recordingRemote is a fake control plane that also tells its current record of the run.
type recordingRemote struct {
	fakeRemote
	lastSeq int64
	head    string
}

func (r *recordingRemote) RecordHead(context.Context, string) (int64, string, error) {
	return r.lastSeq, r.head, nil
}

func TestTheJournalIsComparedWithTheControlPlanesCurrentRecord(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	ts := f.transitions
	last := ts[len(ts)-1]
	cases := []struct {
		name    string
		lastSeq int64
		head    string
		code    int
		seq     int64
		why     string
	}{
		{"the record ends where the journal does", last.Seq, last.Hash, ExitVerified, 0, ""},
		{"the record has not been sent the last transitions yet", ts[len(ts)-3].Seq, ts[len(ts)-3].Hash, ExitVerified, 0, ""},
		{"the record goes on past the journal", last.Seq + 4, "sha256:" + strings.Repeat("7", 64), ExitFailed, last.Seq + 1,
			"the control plane's record goes on to seq " + strconv.FormatInt(last.Seq+4, 10) + " (head sha256:777"},
		{"the record ends at the same seq with another head", last.Seq, "sha256:" + strings.Repeat("7", 64), ExitFailed, last.Seq,
			"the journal is not the record the control plane kept"},
		{"the record stops earlier at a head the chain does not pass", ts[4].Seq, "sha256:" + strings.Repeat("7", 64), ExitFailed, ts[4].Seq,
			"the journal is not the record the control plane kept"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			remote := &recordingRemote{fakeRemote: fakeRemote{keys: []attest.PublicKey{attest.PublicOf(f.signer)}}, lastSeq: c.lastSeq, head: c.head}
			in, err := Load(context.Background(), Options{Pack: f.pack}, remote)
			if err != nil {
				t.Fatal(err)
			}
			step := ""
			for _, tr := range ts {
				if tr.Seq == c.seq {
					step = tr.StepName
				}
			}
			assertReport(t, Verify(in), c.code, CheckRecord, c.seq, step, c.why)
		})
	}
}

// stalledRemote is a control plane that answers nothing until the caller gives up.
type stalledRemote struct{ fakeRemote }

func (*stalledRemote) Transitions(ctx context.Context, _ string) ([]engine.Transition, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestAControlPlaneThatDoesNotAnswerInTimeIsAnInputError(t *testing.T) {
	f := newFixture(t, runA, "github:alice")
	if err := os.Remove(f.journal); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	_, err := Load(ctx, Options{Pack: f.pack}, &stalledRemote{})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "the control plane fake did not answer within 2m0s") {
		t.Fatalf("err %v, want an *InputError saying the control plane did not answer", err)
	}
}
