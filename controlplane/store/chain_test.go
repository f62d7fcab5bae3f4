package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// chainSchemaVersion is the migration that adds run_transitions.prev_hash and hash, which
// this store's prepared statements read and write: Open on an older schema migrates it and
// then fails to prepare them.
const chainSchemaVersion = 21

// migrateOnly leaves the database dsn at schema version n, as an older rbook's Open would.
// This rbook's Open applies the migrations up to n and may then refuse to start on a schema
// older than chainSchemaVersion; the version is checked, not the start.
func migrateOnly(t *testing.T, dsn string, n int) {
	t.Helper()
	if s, err := Open(context.Background(), dsn, WithMaxSchemaVersion(n)); err == nil {
		s.Close()
	} else if n >= chainSchemaVersion {
		t.Fatal(err)
	}
	if v, _, err := PendingMigrations(context.Background(), dsn); err != nil || v != n {
		t.Fatalf("after migrating to %d: schema version %d, %v", n, v, err)
	}
}

// link returns "sha256:" and a digest standing in for the hash of transition seq of run (the
// store checks how transitions link, not their content: the server checks that).
func link(run string, seq int64) string {
	if seq == 0 {
		return evidencechain.Genesis
	}
	return "sha256:" + hash(fmt.Sprintf("%s/%d", run, seq))
}

// chained is tr(run, seq) with its prev_hash and hash.
func chained(run string, seq int64) Transition {
	x := tr(run, seq)
	x.PrevHash, x.Hash = link(run, seq-1), link(run, seq)
	return x
}

func TestStoreKeepsTheChainAndItsHead(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustRecord(t, s, chained("R1", 1))
	if _, err := s.RecordTransitions(ctx, []Transition{chained("R1", 2), chained("R1", 3)}, fence1); err != nil {
		t.Fatalf("RecordTransitions(2, 3): %v", err)
	}
	mustRecord(t, s, chained("R1", 4))
	_, ts, err := s.GetRun(ctx, "R1")
	if err != nil || len(ts) != 4 {
		t.Fatalf("GetRun = %d transitions, %v", len(ts), err)
	}
	for _, x := range ts {
		if x.PrevHash != link("R1", x.Seq-1) || x.Hash != link("R1", x.Seq) {
			t.Errorf("transition %d: prev_hash %s, hash %s; want %s, %s", x.Seq, x.PrevHash, x.Hash, link("R1", x.Seq-1), link("R1", x.Seq))
		}
	}
	if head, err := s.ChainHead(ctx, "R1"); err != nil || head != link("R1", 4) {
		t.Fatalf("ChainHead = %s, %v; want %s", head, err, link("R1", 4))
	}
	// A re-send with the same hashes is a duplicate; with another hash, a conflict.
	if res := mustRecord(t, s, chained("R1", 4)); !res.Duplicate {
		t.Fatal("an identical re-send of seq 4 was not a duplicate")
	}
	other := chained("R1", 4)
	other.Hash = link("R1", 99)
	if _, err := s.RecordTransition(ctx, other, fence1); !errors.Is(err, ErrConflict) {
		t.Fatalf("seq 4 re-sent with another hash: %v, want ErrConflict", err)
	}
}

func TestStoreRefusesATransitionThatBreaksTheChain(t *testing.T) {
	tests := []struct {
		name    string
		first   Transition // seq 1
		next    func() Transition
		because string
	}{
		{"a wrong prev_hash", chained("R", 1), func() Transition {
			x := chained("R", 2)
			x.PrevHash = link("R", 7)
			return x
		}, "is not the hash " + link("R", 1) + " of transition 1"},
		{"no hash on a chained run", chained("R", 1), func() Transition { return tr("R", 2) }, "carries no hash"},
		{"a hash on a run without the chain", tr("R", 1), func() Transition { return chained("R", 2) }, "recorded without the hash chain"},
		{"a prev_hash without a hash", chained("R", 1), func() Transition {
			x := chained("R", 2)
			x.Hash = ""
			return x
		}, "one without the other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openTest(t)
			ctx := context.Background()
			mustStart(t, s, newRun("R"))
			mustRecord(t, s, tt.first)
			for _, record := range []func(Transition) error{
				func(x Transition) error { _, err := s.RecordTransition(ctx, x, fence1); return err },
				func(x Transition) error { _, err := s.RecordTransitions(ctx, []Transition{x}, fence1); return err },
			} {
				err := record(tt.next())
				if !errors.Is(err, ErrChainBroken) || !strings.Contains(err.Error(), "seq 2") || !strings.Contains(err.Error(), tt.because) {
					t.Fatalf("got %v; want ErrChainBroken at seq 2 saying %q", err, tt.because)
				}
			}
			if run, _, _ := s.GetRun(ctx, "R"); run.LastSeq != 1 {
				t.Fatalf("last_seq %d after the refusals, want 1", run.LastSeq)
			}
		})
	}
}

func TestStoreRefusesAChainThatDoesNotStartAtTheGenesis(t *testing.T) {
	s, _ := openTest(t)
	mustStart(t, s, newRun("R"))
	x := chained("R", 1)
	x.PrevHash = link("other", 3)
	if _, err := s.RecordTransition(context.Background(), x, fence1); !errors.Is(err, ErrChainBroken) || !strings.Contains(err.Error(), "not the genesis") {
		t.Fatalf("got %v; want ErrChainBroken naming the genesis", err)
	}
}

func TestStoreAcceptsARunWithoutTheChain(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R"))
	mustRecord(t, s, tr("R", 1))
	if _, err := s.RecordTransitions(ctx, []Transition{tr("R", 2), tr("R", 3)}, fence1); err != nil {
		t.Fatalf("RecordTransitions of unchained transitions: %v", err)
	}
	if head, err := s.ChainHead(ctx, "R"); err != nil || head != "" {
		t.Fatalf("ChainHead = %q, %v; want none", head, err)
	}
}

func TestStoreContinuesTheChainAfterARestart(t *testing.T) {
	s, dsn := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R"))
	mustRecord(t, s, chained("R", 1))
	s.Close()
	s2, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	mustRecord(t, s2, chained("R", 2)) // the head comes from transition 1's row
	bad := chained("R", 3)
	bad.PrevHash = link("R", 1)
	if _, err := s2.RecordTransition(ctx, bad, fence1); !errors.Is(err, ErrChainBroken) {
		t.Fatalf("seq 3 after seq 1's hash: %v, want ErrChainBroken", err)
	}
}
