package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// t0 is the tests' epoch.
var t0 = time.Date(2026, 5, 12, 10, 0, 0, 0, time.UTC)

// testClock returns t0, t0+1µs, t0+2µs, …: distinct, increasing, reproducible.
type testClock struct {
	mu sync.Mutex
	n  int
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return t0.Add(time.Duration(c.n) * time.Microsecond)
}

// openTest opens a Store on a fresh database of the suite's backend (testDSN: a SQLite
// file, or a PostgreSQL database with RBOOK_TEST_STORE=postgres) and returns it with the
// path or DSN it opened.
func openTest(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	path := testDSN(t, "rbook.db")
	clock := &testClock{}
	s, err := Open(context.Background(), path, append([]Option{WithClock(clock.now)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s, path
}

// ownerID is the tests' executor owner id; fence1 is its fence at epoch 1 (a created run).
const ownerID = "test-owner-0123456789"

var fence1 = Fence{OwnerIDHash: OwnerIDHash(ownerID), Epoch: 1}

func newRun(id string) NewRun {
	return NewRun{RunID: id, PlaybookName: "demo", PlaybookHash: hash("plan-" + id), SchemaHash8: "a1b2c3d4",
		TotalSteps: 4, StartedBy: "alice", StartedAt: t0, OwnerIDHash: OwnerIDHash(ownerID), Owner: "alice"}
}

func mustStart(t testing.TB, s *Store, nr NewRun) Run {
	t.Helper()
	run, outcome, err := s.StartRun(context.Background(), nr)
	if err != nil || outcome != Created {
		t.Fatalf("StartRun(%s) = outcome %v, %v", nr.RunID, outcome, err)
	}
	return run
}

// hash is a stand-in for approval.TokenHash / a plan digest.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func strp(s string) *string { return &s }

// tr builds transition seq of run with an IN_PROGRESS step_started at t0+seq seconds.
func tr(run string, seq int64) Transition {
	return Transition{RunID: run, Seq: seq, Kind: KindStepStarted, At: t0.Add(time.Duration(seq) * time.Second),
		StepIndex: int(seq - 1), StepName: fmt.Sprintf("step-%d", seq), StepType: "check", RunStatus: ExecInProgress}
}

// sent returns x as its sender sent it: without the RecordedAt the store assigns, and
// failing t when the store did not assign one.
func sent(t testing.TB, x Transition) Transition {
	t.Helper()
	if x.RecordedAt.IsZero() {
		t.Fatalf("%s #%d: recorded_at not set", x.RunID, x.Seq)
	}
	x.RecordedAt = time.Time{}
	return x
}

func mustRecord(t testing.TB, s *Store, x Transition) RecordResult {
	t.Helper()
	res, err := s.RecordTransition(context.Background(), x, fence1)
	if err != nil {
		t.Fatalf("RecordTransition(%s #%d): %v", x.RunID, x.Seq, err)
	}
	return res
}

func newApproval(id, run, node string) NewApproval {
	return NewApproval{ApprovalID: id, RunID: run, NodeID: node, StepIndex: 2, TokenHash: hash("token-" + id),
		RequestedAt: t0.Add(time.Minute), Deadline: t0.Add(time.Hour), PlanDigest: hash("plan-" + run),
		Prompt: "Deploy to prod?", OnFail: "rollback"}
}

func mustCreateApproval(t testing.TB, s *Store, na NewApproval) Approval {
	t.Helper()
	a, created, err := s.CreateApproval(context.Background(), na)
	if err != nil || !created {
		t.Fatalf("CreateApproval(%s) = created %v, %v", na.ApprovalID, created, err)
	}
	return a
}

// changes collects published changes. Subscribers run before a write returns, so a test
// can read them right after the call, with no waiting.
type changes struct {
	mu  sync.Mutex
	all []Change
}

func subscribe(s *Store) (*changes, func()) {
	c := &changes{}
	unsubscribe := s.Subscribe(func(ch Change) {
		c.mu.Lock()
		c.all = append(c.all, ch)
		c.mu.Unlock()
	})
	return c, unsubscribe
}

func (c *changes) snapshot() []Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Change(nil), c.all...)
}

// downgradeToSchema1 opens the database at dsn (a file path or a PostgreSQL DSN) with Open,
// which migrates it, then deletes every schema_migrations row after version 1 and closes
// it: a database as an older rbook left it, which OpenReadOnly must refuse.
func downgradeToSchema1(t testing.TB, ctx context.Context, dsn string) {
	t.Helper()
	ow, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ow.writer.ExecContext(ctx, "DELETE FROM schema_migrations WHERE version > 1"); err != nil {
		t.Fatal(err)
	}
	ow.Close()
}
