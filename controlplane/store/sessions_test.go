package store

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testSession(hashByte string) Session {
	return Session{IDHash: strings.Repeat(hashByte, 64), Identity: "github:octocat", DisplayName: "The Octocat",
		Role: "approver", Groups: []string{"sre", "dba"}, GitHubLogin: "octocat", Method: "github", Provider: "github",
		CreatedAt: t0, ExpiresAt: t0.Add(12 * time.Hour)}
}

func TestSessionIsStoredAndReadBack(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	want := testSession("a")
	if err := s.CreateSession(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSession(ctx, want.IDHash)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetSession = %+v, want %+v", got, want)
	}
	if !got.Active(t0.Add(time.Hour)) || got.Active(t0.Add(12*time.Hour)) {
		t.Fatalf("Active: want true an hour in, false at expiry")
	}
	if _, err := s.GetSession(ctx, strings.Repeat("b", 64)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session: err = %v, want ErrNotFound", err)
	}
}

func TestRevokedSessionIsInactiveAndSwept(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	live, gone := testSession("a"), testSession("c")
	gone.ExpiresAt = t0.Add(time.Minute)
	revoked := testSession("d")
	for _, x := range []Session{live, gone, revoked} {
		if err := s.CreateSession(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RevokeSession(ctx, revoked.IDHash); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSession(ctx, revoked.IDHash)
	if err != nil || got.RevokedAt.IsZero() || got.Active(t0) {
		t.Fatalf("revoked session: %+v, %v; want RevokedAt set and inactive", got, err)
	}
	n, err := s.SweepSessions(ctx, t0.Add(time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("SweepSessions = %d, %v; want 2 (the expired and the revoked one)", n, err)
	}
	if _, err := s.GetSession(ctx, live.IDHash); err != nil {
		t.Fatalf("the live session was swept: %v", err)
	}
}

func TestSessionWithBadFieldsIsRefused(t *testing.T) {
	s, _ := openTest(t)
	for name, mut := range map[string]func(*Session){
		"executor role":  func(x *Session) { x.Role = "executor" },
		"short hash":     func(x *Session) { x.IDHash = "abc" },
		"no identity":    func(x *Session) { x.Identity = "" },
		"no expiry":      func(x *Session) { x.ExpiresAt = time.Time{} },
		"NUL in display": func(x *Session) { x.DisplayName = "a\x00b" },
	} {
		x := testSession("e")
		mut(&x)
		if err := s.CreateSession(context.Background(), x); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
}
