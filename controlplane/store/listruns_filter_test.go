package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// ListRuns filters by repository (the verified job's, else the reported one, any case), by
// starter and by start time, alone and together, and pages within the filter.
func TestListRunsFiltersByRepositoryStarterAndTime(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	for _, r := range []struct {
		id, by, verified, reported string
		hour                       int
	}{
		{"r1", "alice", "", "acme/web", 1},
		{"r2", "bob", "", "Acme/Web", 2},
		{"r3", "alice", "acme/api", "acme/web", 3}, // the verified job's repository wins
		{"r4", "carol", "", "", 4},
		{"r5", "alice", "acme/web", "", 5},
	} {
		nr := newRun(r.id)
		nr.StartedBy, nr.StartedAt = r.by, at(r.hour)
		if r.reported != "" {
			nr.Reported = &WorkflowRun{Repository: r.reported, RunID: "1"}
		}
		if r.verified != "" {
			nr.GitHub = &GitHubJob{Actor: "octo", Repository: r.verified, RunID: "1"}
		}
		mustStart(t, s, nr)
	}
	for _, c := range []struct {
		name string
		f    RunFilter
		want []string
	}{
		{"no filter", RunFilter{}, []string{"r5", "r4", "r3", "r2", "r1"}},
		{"repository any case", RunFilter{Repository: "ACME/web"}, []string{"r5", "r2", "r1"}},
		{"verified repository", RunFilter{Repository: "acme/api"}, []string{"r3"}},
		{"starter", RunFilter{StartedBy: "alice"}, []string{"r5", "r3", "r1"}},
		{"starter is exact", RunFilter{StartedBy: "Alice"}, []string{}},
		{"started at or after", RunFilter{StartedAfter: at(3)}, []string{"r5", "r4", "r3"}},
		{"started before", RunFilter{StartedBefore: at(3)}, []string{"r2", "r1"}},
		{"time window", RunFilter{StartedAfter: at(2), StartedBefore: at(5)}, []string{"r4", "r3", "r2"}},
		{"all together", RunFilter{Repository: "acme/web", StartedBy: "alice", StartedAfter: at(1), StartedBefore: at(6)}, []string{"r5", "r1"}},
		{"with status", RunFilter{Status: RunRunning, StartedBy: "bob"}, []string{"r2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := listAll(t, s, c.f, 100); !slices.Equal(got, c.want) {
				t.Fatalf("ListRuns(%+v) = %v, want %v", c.f, got, c.want)
			}
			if len(c.want) > 1 {
				if got := listAll(t, s, c.f, 1); !slices.Equal(got, c.want) {
					t.Fatalf("ListRuns(%+v) one per page = %v, want %v", c.f, got, c.want)
				}
			}
		})
	}
	// A page token is bound to its filters.
	page, err := s.ListRuns(ctx, RunFilter{StartedBy: "alice", PageSize: 1})
	if err != nil || page.NextPageToken == "" {
		t.Fatalf("first page: %v, %v", page, err)
	}
	if _, err := s.ListRuns(ctx, RunFilter{StartedBy: "bob", PageSize: 1, PageToken: page.NextPageToken}); err == nil {
		t.Fatal("a page token of the starter alice listing was accepted for the starter bob listing")
	}
}

// listAll follows ListRuns' pages of size n and returns the run ids in order.
func listAll(t *testing.T, s *Store, f RunFilter, n int) []string {
	t.Helper()
	ids := []string{}
	f.PageSize = n
	for {
		page, err := s.ListRuns(context.Background(), f)
		if err != nil {
			t.Fatalf("ListRuns(%+v): %v", f, err)
		}
		for _, r := range page.Runs {
			ids = append(ids, r.RunID)
		}
		if page.NextPageToken == "" {
			return ids
		}
		f.PageToken = page.NextPageToken
	}
}

// The repository and starter filters read an index in listing order (migration 0012), so a
// page of 100k runs is found without a scan or a sort. SQLite's plan is checked; PostgreSQL
// has the same indexes.
func TestListRunsFiltersUseAnIndexInListingOrder(t *testing.T) {
	s, _ := openTest(t)
	if s.dialect != dialectSQLite {
		t.Skip("the query plan checked is SQLite's")
	}
	for _, c := range []struct {
		f     RunFilter
		index string
	}{
		{RunFilter{Repository: "acme/web"}, "playbook_runs_by_repository"},
		{RunFilter{StartedBy: "alice"}, "playbook_runs_by_starter"},
		{RunFilter{StartedAfter: t0, StartedBefore: t0.Add(time.Hour)}, "playbook_runs_by_start"},
	} {
		where, args, _ := runFilterWhere(c.f)
		rows, err := s.reader.QueryContext(context.Background(), "EXPLAIN QUERY PLAN SELECT run_id FROM playbook_runs WHERE "+
			strings.Join(where, " AND ")+" ORDER BY started_at DESC, run_id DESC LIMIT 51", args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "; ")
		if !strings.Contains(text, c.index) || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("filter %+v: query plan %q, want index %s and no sort", c.f, text, c.index)
		}
	}
}
