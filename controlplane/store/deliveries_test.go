package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A delivery id is recorded once; a replay reports false and keeps the first row.
func TestGitHubDeliveryRecordedOnce(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	id := "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	if seen, err := s.GitHubDeliverySeen(ctx, id); err != nil || seen {
		t.Fatalf("before: seen=%v err=%v, want false, nil", seen, err)
	}
	if ins, err := s.RecordGitHubDelivery(ctx, GitHubDelivery{ID: id, Event: "deployment_review", Action: "approved"}); err != nil || !ins {
		t.Fatalf("first record: inserted=%v err=%v, want true, nil", ins, err)
	}
	if ins, err := s.RecordGitHubDelivery(ctx, GitHubDelivery{ID: id, Event: "other", Action: "x"}); err != nil || ins {
		t.Fatalf("replay: inserted=%v err=%v, want false, nil", ins, err)
	}
	if seen, err := s.GitHubDeliverySeen(ctx, id); err != nil || !seen {
		t.Fatalf("after: seen=%v err=%v, want true, nil", seen, err)
	}
	var event, action string
	if err := s.reader.QueryRowContext(ctx, `SELECT event, action FROM github_deliveries WHERE delivery_id = ?`, id).Scan(&event, &action); err != nil {
		t.Fatal(err)
	}
	if event != "deployment_review" || action != "approved" {
		t.Fatalf("row = %q/%q, want the first delivery's deployment_review/approved", event, action)
	}
	for _, bad := range []GitHubDelivery{{ID: "", Event: "e"}, {ID: strings.Repeat("x", MaxIDBytes+1), Event: "e"}, {ID: "a", Event: ""}} {
		if _, err := s.RecordGitHubDelivery(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("RecordGitHubDelivery(%.20q, %q) = %v, want ErrInvalidArgument", bad.ID, bad.Event, err)
		}
	}
}
