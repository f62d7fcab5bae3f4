package store

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A Slack interaction request is acted on once: the same hash again within the kept time is
// a replay; once swept (older than keep) the hash is forgotten.
func TestSlackInteractionIsRecordedOnceAndSweptAfterKeep(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 12, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		hash  string
		at    time.Time
		first bool
	}{
		{"h1", t0, true},
		{"h1", t0.Add(time.Minute), false},
		{"h2", t0.Add(2 * time.Minute), true},
		{"h1", t0.Add(11 * time.Minute), true}, // h1 was swept at this write
		{"h2", t0.Add(11 * time.Minute), false},
		{"h2", t0.Add(13 * time.Minute), true},
	} {
		first, err := s.RecordSlackInteraction(ctx, tc.hash, tc.at, 10*time.Minute)
		if err != nil || first != tc.first {
			t.Fatalf("%s at %s: first = %v, %v; want %v", tc.hash, tc.at.Format(time.TimeOnly), first, err, tc.first)
		}
	}
}

// A gate's Slack message is kept once per channel (the first kept wins) and listed with
// its run's.
func TestSlackMessageIsKeptOncePerGateAndChannel(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	if _, ok, err := s.SlackMessage(ctx, "a-1", "ops"); ok || err != nil {
		t.Fatalf("before: %v, %v", ok, err)
	}
	first := SlackMessageRef{SlackChannel: "C1", TS: "1.000001"}
	for _, m := range []SlackMessageRef{first, {SlackChannel: "C1", TS: "2.000002"}} {
		kept, err := s.SaveSlackMessage(ctx, "a-1", "ops", "R1", m)
		if err != nil || kept != first {
			t.Fatalf("SaveSlackMessage(%v) = %v, %v; want the first kept", m, kept, err)
		}
	}
	if _, err := s.SaveSlackMessage(ctx, "a-2", "ops", "R1", SlackMessageRef{SlackChannel: "C1", TS: "3.000003"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SlackMessagesOfRun(ctx, "R1", "ops")
	if err != nil || !slices.Equal(got, []SlackMessageRef{first, {SlackChannel: "C1", TS: "3.000003"}}) {
		t.Fatalf("SlackMessagesOfRun = %v, %v", got, err)
	}
	if other, _ := s.SlackMessagesOfRun(ctx, "R1", "other"); len(other) != 0 {
		t.Fatalf("another channel's messages = %v", other)
	}
}
