package store

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Inputs one dialect takes and the other refuses, checked on both dialects in one run: SQLite
// always, PostgreSQL when RBOOK_TEST_POSTGRES_URL is set (newPGDatabase skips otherwise).

// forBothDialects runs fn on a fresh SQLite file and on a fresh PostgreSQL database.
func forBothDialects(t *testing.T, fn func(t *testing.T, s *Store)) {
	t.Helper()
	for _, d := range []string{"sqlite", "postgres"} {
		t.Run(d, func(t *testing.T) {
			dsn := t.TempDir() + "/rbook.db"
			if d == "postgres" {
				dsn = newPGDatabase(t)
			}
			clock := &testClock{}
			s, err := Open(context.Background(), dsn, WithClock(clock.now))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			fn(t, s)
		})
	}
}

// TestNULBytesRefusedAlikeOnBothDialects: PostgreSQL's TEXT cannot hold U+0000,
// so a NUL byte in any text field used to be a storage error there (SQLSTATE 22021) and was
// stored on SQLite. Now both refuse it with ErrInvalidArgument naming the field, and store
// nothing; evidence source_input is checked like the other evidence texts (UTF-8, NUL, size).
func TestNULBytesRefusedAlikeOnBothDialects(t *testing.T) {
	forBothDialects(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		mustStart(t, s, newRun("r1"))
		ev := func(mod func(e *Evidence)) func(x *Transition) {
			return func(x *Transition) {
				e := &Evidence{StepName: "s", Type: "check", Status: StepPass, At: t0}
				mod(e)
				x.Evidence = e
			}
		}
		for _, c := range []struct {
			field string
			mod   func(x *Transition)
		}{
			{"message holds a NUL byte (U+0000) at byte 1", func(x *Transition) { x.Message = "a\x00b" }},
			{"step_name holds a NUL byte", func(x *Transition) { x.StepName = "\x00" }},
			{"evidence output holds a NUL byte", ev(func(e *Evidence) { e.Output = "out\x00" })},
			{"evidence input holds a NUL byte", ev(func(e *Evidence) { e.Input = strp("q\x00") })},
			{"evidence source_input holds a NUL byte", ev(func(e *Evidence) { e.SourceInput = strp("q\x00") })},
			{"evidence source_input is not valid UTF-8", ev(func(e *Evidence) { e.SourceInput = strp("q\xff") })},
			{"evidence source_input is 1048577 bytes, over the limit of 1048576", ev(func(e *Evidence) { e.SourceInput = strp(strings.Repeat("q", MaxTextBytes+1)) })},
		} {
			x := tr("r1", 1)
			c.mod(&x)
			_, err := s.RecordTransition(ctx, x, fence1)
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("RecordTransition with %q: err = %v, want ErrInvalidArgument naming %q", c.field, err, c.field)
			}
			_, err = s.RecordTransitions(ctx, []Transition{x}, fence1)
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("RecordTransitions with %q: err = %v, want ErrInvalidArgument", c.field, err)
			}
		}
		if _, ts, err := s.GetRun(ctx, "r1"); err != nil || len(ts) != 0 {
			t.Fatalf("GetRun after refusals: %d transitions, %v; want none stored", len(ts), err)
		}
		// A valid transition still goes in at seq 1 (nothing half-written before it).
		mustRecord(t, s, tr("r1", 1))

		nr := newRun("r\x002")
		if _, _, err := s.StartRun(ctx, nr); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "run_id holds a NUL byte") {
			t.Errorf("StartRun with a NUL in run_id: %v", err)
		}
		mustCreateApproval(t, s, newApproval("ap1", "r1", "g"))
		at := t0.Add(2 * time.Minute)
		if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "ap1", Verdict: ApprovalApproved, Approver: "bob", Reason: "ok\x00", Source: "rpc", At: at}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "reason holds a NUL byte") {
			t.Errorf("DecideApproval with a NUL in reason: %v", err)
		}
		if a, err := s.GetApproval(ctx, "ap1"); err != nil || a.Status != ApprovalPending {
			t.Errorf("approval after a refused decision: %+v, %v; want still pending", a.Status, err)
		}
		if _, err := s.CancelRun(ctx, "r1", "ops", "why\x00", at); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "reason holds a NUL byte") {
			t.Errorf("CancelRun with a NUL in reason: %v", err)
		}
	})
}

// TestJSONEscapesPostgresRefusesAreInvalidArgument: bindings with a \u0000
// escape or a lone surrogate escape are valid JSON to Go but refused by PostgreSQL's jsonb
// CHECK (a storage error there, stored on SQLite). Both now refuse them alike; an escaped
// backslash before u0000 and a proper surrogate pair are fine.
func TestJSONEscapesPostgresRefusesAreInvalidArgument(t *testing.T) {
	forBothDialects(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for i, c := range []struct {
			bindings, want string
		}{
			{`{"a":"\u0000"}`, `a \u0000 escape (NUL)`},
			{`{"a":"x\ud800"}`, `a \ud800 escape not followed by a low surrogate`},
			{`{"a":"\ud800\u0041"}`, `a \ud800 escape not followed by a low surrogate`},
			{`{"a":"\udc00"}`, `a \udc00 escape (a low surrogate without a high one)`},
			{`{"\u0000":1}`, `a \u0000 escape (NUL)`},
			{`{"a":"\\u0000","b":"\ud83d\ude00","c":"\"\u00e9"}`, ""},
		} {
			nr := newRun("j" + string(rune('a'+i)))
			nr.Bindings = json.RawMessage(c.bindings)
			_, _, err := s.StartRun(ctx, nr)
			if c.want == "" {
				if err != nil {
					t.Errorf("StartRun with bindings %s: %v, want stored", c.bindings, err)
					continue
				}
				run, err := s.Run(ctx, nr.RunID)
				if err != nil {
					t.Fatal(err)
				}
				var got map[string]string
				if err := json.Unmarshal(run.Bindings, &got); err != nil || got["a"] != `\u0000` || got["b"] != "😀" || got["c"] != `"é` {
					t.Errorf("bindings read back = %s (%v)", run.Bindings, err)
				}
				continue
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "bindings holds "+c.want) {
				t.Errorf("StartRun with bindings %s: err = %v, want ErrInvalidArgument with %q", c.bindings, err, c.want)
			}
		}
	})
}

// TestDeliveryErrorsWithNULAreRecorded: the text of a failed GitHub delivery
// (an HTTP error body) may hold NUL or invalid UTF-8; on PostgreSQL that made the UPDATE
// fail, so the attempt count and back-off were not recorded and the loop retried at once,
// forever. It is now stored with U+FFFD in their place, on both dialects.
func TestDeliveryErrorsWithNULAreRecorded(t *testing.T) {
	forBothDialects(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		r, err := s.RequestProtectionRule(ctx, ProtectionRule{CallbackURL: "https://api.github.invalid/cb", DeploymentID: 7,
			InstallationID: 9, Repository: "o/r", RunID: "42", Environment: "prod", RequestedAt: t0})
		if err != nil {
			t.Fatalf("RequestProtectionRule: %v", err)
		}
		next := t0.Add(time.Minute)
		if err := s.ProtectionRuleAttemptFailed(ctx, r.ID, "HTTP 502: \x00bad\xffbody", next); err != nil {
			t.Fatalf("ProtectionRuleAttemptFailed: %v", err)
		}
		got, err := s.GetProtectionRule(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Attempts != 1 || got.LastError != "HTTP 502: \uFFFDbad\uFFFDbody" || !got.NextAttemptAt.Equal(next) {
			t.Errorf("after a failed attempt: attempts %d, last_error %q, next %s", got.Attempts, got.LastError, got.NextAttemptAt)
		}
		if err := s.GiveUpProtectionRule(ctx, r.ID, "gone\x00", next); err != nil {
			t.Fatalf("GiveUpProtectionRule: %v", err)
		}
		if got, _ := s.GetProtectionRule(ctx, r.ID); got.GivenUpReason != "gone\uFFFD" || got.GivenUpAt.IsZero() {
			t.Errorf("given up: reason %q at %s", got.GivenUpReason, got.GivenUpAt)
		}
	})
}

// TestDeferredProgressDoesNotOverwriteALaterStatusChange: on PostgreSQL a
// batch's common transitions queue their run-row update (pgdefer.go) and a transition that
// changes the run's status writes the row at once; the queued update of an EARLIER seq was
// then flushed after it, setting last_seq back (run row at 9, transition 10 stored), so the
// executor's next batch got E_SEQ_GAP "expects seq 10, got 11" (found with `rbook run demo`
// against `rbook serve --db postgres://…`: step_started then gate_opened in one batch).
func TestDeferredProgressDoesNotOverwriteALaterStatusChange(t *testing.T) {
	forBothDialects(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		mustStart(t, s, newRun("r1"))
		opened := tr("r1", 2)
		opened.Kind, opened.StepIndex, opened.StepName = KindGateOpened, 0, "step-1"
		res, err := s.RecordTransitions(ctx, []Transition{tr("r1", 1), opened}, fence1)
		if err != nil || res.AckedSeq != 2 || res.Stored != 2 {
			t.Fatalf("RecordTransitions(step_started, gate_opened) = %+v, %v; want acked 2, stored 2", res, err)
		}
		run, err := s.Run(ctx, "r1")
		if err != nil || run.LastSeq != 2 || run.Status != RunPaused {
			t.Fatalf("run after the batch: last_seq %d, status %s (%v); want 2, paused", run.LastSeq, run.Status, err)
		}
		next := tr("r1", 3)
		next.Kind, next.StepIndex = KindGateDecided, 0
		if _, err := s.RecordTransitions(ctx, []Transition{next}, fence1); err != nil {
			t.Fatalf("the next transition after the batch: %v", err)
		}
	})
}

// TestBadDSNSaysWhatToFix: a PostgreSQL DSN pgx cannot parse used to give only
// "does not parse"; the error now says what is wrong (the setting, the port, a bad
// %-escape) and still never prints the password, not even a part of it.
func TestBadDSNSaysWhatToFix(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:S3cretPW@127.0.0.1:5432/db?sslmode=bogus":          "failed to configure TLS (sslmode is invalid)",
		"postgres://u:S3cretPW@127.0.0.1:5432/db?connect_timeout=x":      "invalid connect_timeout",
		"postgres://u:S3cretPW@127.0.0.1:notaport/db":                    "invalid port",
		"postgres://u:S3c%reT@127.0.0.1:5432/db":                         "failed to parse as URL (invalid percent-encoded token in password)",
		"postgres://u@127.0.0.1:5432/db?password=S3cretPW&sslmode=nope":  "failed to configure TLS (sslmode is invalid)",
		"postgres://u:S3cretPW@127.0.0.1:5432/db?target_session_attrs=x": "unknown target_session_attrs value: x",
	} {
		_, err := Open(context.Background(), dsn)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "does not parse: "+want) {
			t.Errorf("Open(%s) = %v; want ErrInvalidArgument with %q", RedactDSN(dsn), err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "S3c") || strings.Contains(err.Error(), "%re")) {
			t.Errorf("Open(%s): the error prints (part of) the password: %v", RedactDSN(dsn), err)
		}
	}
}

// TestSilentPostgreSQLServerTimesOutOpen: a "PostgreSQL" that accepts TCP and never answers
// made Open hang for as long as its context allowed (`rbook serve` has none: forever). Open
// now fails after DefaultPGConnectTimeout per attempt, or the DSN's connect_timeout, with a
// connection error naming the DSN without its password.
func TestSilentPostgreSQLServerTimesOutOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	if DefaultPGConnectTimeout <= 0 || DefaultPGConnectTimeout > 30*time.Second {
		t.Fatalf("DefaultPGConnectTimeout = %s, want a bound of at most 30s", DefaultPGConnectTimeout)
	}
	for _, c := range []struct {
		query string
		bound time.Duration
	}{{"sslmode=disable&connect_timeout=1", time.Second}, {"sslmode=disable", DefaultPGConnectTimeout}} {
		dsn := "postgres://rbook:S3cretPW@" + ln.Addr().String() + "/db?" + c.query
		began := time.Now()
		_, err := Open(context.Background(), dsn) // no deadline, as rbook serve
		took := time.Since(began)
		if err == nil || !strings.Contains(err.Error(), "cannot connect to PostgreSQL: "+ln.Addr().String()) || strings.Contains(err.Error(), "S3cretPW") {
			t.Fatalf("Open on a silent server = %v; want a connection error with the DSN redacted", err)
		}
		if took < c.bound || took > c.bound+5*time.Second {
			t.Fatalf("Open on a silent server (%s) gave up after %s, want about %s", c.query, took, c.bound)
		}
	}
}

// TestBatchLimitsAlikeOnBothDialects: RecordTransitions at exactly
// MaxBatchTransitions and MaxBatchBytes is stored whole, one more transition or byte is
// ErrInvalidArgument with nothing stored, and fields at their byte limits round-trip
// byte for byte, on SQLite and PostgreSQL alike.
func TestBatchLimitsAlikeOnBothDialects(t *testing.T) {
	forBothDialects(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		mustStart(t, s, newRun("r1"))
		many := make([]Transition, MaxBatchTransitions+1)
		for i := range many {
			many[i] = tr("r1", int64(i+1))
		}
		if _, err := s.RecordTransitions(ctx, many, fence1); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "1001 transitions, at most 1000") {
			t.Fatalf("1001 transitions: %v", err)
		}
		if _, ts, _ := s.GetRun(ctx, "r1"); len(ts) != 0 {
			t.Fatalf("%d transitions stored after a refused batch", len(ts))
		}
		res, err := s.RecordTransitions(ctx, many[:MaxBatchTransitions], fence1)
		if err != nil || res.AckedSeq != MaxBatchTransitions || res.Stored != MaxBatchTransitions {
			t.Fatalf("1000 transitions = %+v, %v", res, err)
		}

		// Five transitions of exactly MaxBatchBytes together; then one byte more.
		mustStart(t, s, newRun("r2"))
		big := make([]Transition, 5)
		total := 0
		for i := range big {
			big[i] = tr("r2", int64(i+1))
			if i < 4 {
				big[i].Message = strings.Repeat("m", MaxTextBytes-4096)
			}
			total += TransitionBytes(big[i])
		}
		pad := MaxBatchBytes - total
		if pad < 0 || pad > MaxTextBytes {
			t.Fatalf("test setup: pad %d", pad)
		}
		big[4].Evidence = &Evidence{StepName: "s", Type: "check", Output: strings.Repeat("o", pad-len("s")-len("check")-len(StepPass)), Status: StepPass, At: t0}
		sum := 0
		for _, x := range big {
			sum += TransitionBytes(x)
		}
		if sum != MaxBatchBytes {
			t.Fatalf("test setup: batch is %d bytes, want %d", sum, MaxBatchBytes)
		}
		over := append([]Transition(nil), big...)
		ev := *big[4].Evidence
		ev.Output += "o"
		over[4].Evidence = &ev
		if _, err := s.RecordTransitions(ctx, over, fence1); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("a batch of MaxBatchBytes+1: %v, want ErrInvalidArgument", err)
		}
		if res, err := s.RecordTransitions(ctx, big, fence1); err != nil || res.Stored != 5 {
			t.Fatalf("a batch of exactly MaxBatchBytes = %+v, %v", res, err)
		}
		_, ts, err := s.GetRun(ctx, "r2")
		if err != nil || len(ts) != 5 || ts[4].Evidence == nil || ts[4].Evidence.Output != big[4].Evidence.Output || ts[0].Message != big[0].Message {
			t.Fatalf("the 4 MiB batch read back: %d transitions, %v", len(ts), err)
		}

		// Fields at their limits, with multi-byte UTF-8, round-trip exactly.
		id := strings.Repeat("é", MaxIDBytes/2)
		x := tr("r1", MaxBatchTransitions+1)
		x.StepName, x.Message = id, strings.Repeat("→", MaxTextBytes/3)
		if _, err := s.RecordTransition(ctx, x, fence1); err != nil {
			t.Fatalf("fields at their limits: %v", err)
		}
		x2 := tr("r1", MaxBatchTransitions+2)
		x2.StepName = id + "x"
		if _, err := s.RecordTransition(ctx, x2, fence1); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "step_name is") {
			t.Fatalf("step_name one byte over: %v", err)
		}
		got, err := s.Transitions(ctx, "r1", MaxBatchTransitions+1, 1)
		if err != nil || len(got) != 1 || got[0].StepName != id || got[0].Message != x.Message {
			t.Fatalf("fields at their limits read back: %v", err)
		}
	})
}
