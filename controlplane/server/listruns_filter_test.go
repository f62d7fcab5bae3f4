package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// ListRuns filters by repository, starter and start time over the wire, with the status
// filter (PAUSED = waiting at a gate) alongside, and refuses a bad range naming the field.
func TestListRunsFiltersByRepositoryStarterAndTimeOverTheWire(t *testing.T) {
	c := newClients(serveWith(t, server.Options{}))
	ctx := context.Background()
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	at := func(h int) *timestamppb.Timestamp { return timestamppb.New(base.Add(time.Duration(h) * time.Hour)) }
	for _, r := range []struct {
		id, by, repo string
		hour         int
	}{{"r1", "alice", "acme/web", 1}, {"r2", "bob", "acme/web", 2}, {"r3", "alice", "acme/api", 3}, {"r4", "alice", "", 4}} {
		req := &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: r.id, Name: "demo", ContentHash: digest("plan"), SchemaHash8: "0123abcd",
			TotalSteps: 5, StartedBy: r.by, StartedAt: at(r.hour)}
		if r.repo != "" {
			req.ReportedWorkflowRun = &rbookv1.GitHubWorkflowRun{Repository: r.repo, RunId: "7"}
		}
		if _, err := c.runs.StartRun(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	record(t, c, transition("r3", 1, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED))
	record(t, c, &rbookv1.Transition{RunId: "r3", Seq: 2, Kind: rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED, Time: at(3),
		StepIndex: 1, StepName: "approve", StepType: "confirm", RunStatus: rbookv1.RunStatus_RUN_STATUS_PAUSED}) // r3 waits at a gate
	for _, tc := range []struct {
		name string
		req  *rbookv1.ListRunsRequest
		want []string
	}{
		{"repository", &rbookv1.ListRunsRequest{Repository: "ACME/WEB"}, []string{"r2", "r1"}},
		{"started by", &rbookv1.ListRunsRequest{StartedBy: "alice"}, []string{"r4", "r3", "r1"}},
		{"started after", &rbookv1.ListRunsRequest{StartedAfter: at(3)}, []string{"r4", "r3"}},
		{"started before", &rbookv1.ListRunsRequest{StartedBefore: at(2)}, []string{"r1"}},
		{"waiting at a gate, by alice", &rbookv1.ListRunsRequest{Status: rbookv1.RunStatus_RUN_STATUS_PAUSED, StartedBy: "alice"}, []string{"r3"}},
		{"together", &rbookv1.ListRunsRequest{Repository: "acme/web", StartedBy: "alice", StartedAfter: at(0), StartedBefore: at(9)}, []string{"r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.runs.ListRuns(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range res.GetRuns() {
				got = append(got, r.GetRunId())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ListRuns = %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, want string
		req        *rbookv1.ListRunsRequest
	}{
		{"empty range", "started_after", &rbookv1.ListRunsRequest{StartedAfter: at(3), StartedBefore: at(3)}},
		{"invalid timestamp", "started_before", &rbookv1.ListRunsRequest{StartedBefore: &timestamppb.Timestamp{Nanos: -1}}},
		{"repository too long", "repository", &rbookv1.ListRunsRequest{Repository: strings.Repeat("a", 513)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.runs.ListRuns(ctx, tc.req)
			wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
		})
	}
}
