package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// startInProcess runs the control plane in this process (server.Start on a loopback port),
// for tests that need the watch hook.
func startInProcess(t *testing.T) clients {
	t.Helper()
	r, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: filepath.Join(t.TempDir(), "cp.db"),
		Options: server.Options{Secret: []byte(testSecret), Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h2cTransport.CloseIdleConnections()
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return newClients(r.URL())
}

// A transition committed between WatchRun's subscription and its snapshot is in both; the
// watcher still sees every seq exactly once, in order, then live ones, and the stream ends
// after the final transition.
func TestWatchRunReplayLiveOverlap(t *testing.T) {
	c := startInProcess(t)
	const id = "R-overlap"
	startRun(t, c, id)
	for seq := int64(1); seq <= 3; seq++ {
		record(t, c, transition(id, seq, 0))
	}
	defer server.SetWatchRunHook(func(string) { record(t, c, transition(id, 4, 0)) })()
	s, err := c.runs.WatchRun(context.Background(), &rbookv1.WatchRunRequest{RunId: id, FromSeq: 2})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for s.Receive() {
		tr := s.Msg().GetTransition()
		if tr == nil {
			if len(seqs) > 0 {
				t.Fatalf("a run-only message after transitions: %v", s.Msg())
			}
			continue
		}
		seqs = append(seqs, tr.GetSeq())
		if tr.GetRecordedAt() == nil { // replayed and live alike
			t.Fatalf("transition %d has no recorded_at", tr.GetSeq())
		}
		if s.Msg().GetRun().GetLastSeq() < tr.GetSeq() {
			t.Fatalf("message for seq %d carries a run at last_seq %d", tr.GetSeq(), s.Msg().GetRun().GetLastSeq())
		}
		switch tr.GetSeq() {
		case 4:
			record(t, c, transition(id, 5, 0))
		case 5:
			record(t, c, transition(id, 6, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))
		}
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if want := []int64{2, 3, 4, 5, 6}; len(seqs) != len(want) || seqs[0] != 2 || seqs[1] != 3 || seqs[2] != 4 || seqs[3] != 5 || seqs[4] != 6 {
		t.Fatalf("watched seqs %v, want %v", seqs, want)
	}
}

// A watcher that does not keep up never blocks the writer: while the watcher is held, more
// gate changes than its buffer holds are written (concurrently, so they group-commit), the
// writes complete, and the stream then ends with ABORTED (E_RETRY) naming the from_seq to
// reconnect with.
func TestWatchRunSlowConsumer(t *testing.T) {
	c := startInProcess(t)
	const id, buffer, gates, workers = "R-slow", 8, 40, 8
	defer server.SetWatchBuffer(buffer)()
	startRun(t, c, id)
	record(t, c, transition(id, 1, 0))
	defer server.SetWatchRunHook(func(string) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < gates; i += workers {
					_, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: id,
						StepName: fmt.Sprintf("gate-%d", i), PlanDigest: digest("plan"), Deadline: timestamppb.New(time.Now().Add(time.Hour))})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.runs.WatchRun(ctx, &rbookv1.WatchRunRequest{RunId: id})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*rbookv1.WatchRunResponse
	for s.Receive() {
		msgs = append(msgs, s.Msg())
	}
	wantCode(t, s.Err(), connect.CodeAborted, "E_RETRY")
	if !strings.Contains(s.Err().Error(), "from_seq = 2") {
		t.Fatalf("the error does not say where to resume: %v", s.Err())
	}
	if len(msgs) != 2 || msgs[1].GetTransition().GetSeq() != 1 {
		t.Fatalf("before ending, the lagging watcher got %v, want the run and transition 1", msgs)
	}
	page, err := c.apps.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: id, PageSize: 500})
	if err != nil || len(page.GetApprovals()) != gates {
		t.Fatalf("gates written while the watcher lagged: %d, %v", len(page.GetApprovals()), err)
	}
}

// A resume with an edited runbook is news to a run's watchers: they get the run with its new
// plan digest and step count, and the transitions that follow.
func TestWatchRunSeesPlanAdoption(t *testing.T) {
	c := startInProcess(t)
	const id = "R-adopt"
	startRunDigest(t, c, id, digest("v1"))
	record(t, c, transition(id, 1, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.runs.WatchRun(ctx, &rbookv1.WatchRunRequest{RunId: id})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the run, then transition 1
		if !s.Receive() {
			t.Fatalf("WatchRun ended early: %v", s.Err())
		}
	}
	if got := s.Msg().GetRun().GetContentHash(); got != digest("v1") {
		t.Fatalf("before the resume the watcher sees digest %s", got)
	}
	res, err := c.runs.StartRun(context.Background(), &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: id, Name: "demo",
		ContentHash: digest("v2"), SchemaHash8: "0123abcd", TotalSteps: 7})
	if err != nil || res.GetRun().GetContentHash() != digest("v2") {
		t.Fatalf("resume: %v, %v", res.GetRun(), err)
	}
	if !s.Receive() {
		t.Fatalf("no message after the resume: %v", s.Err())
	}
	if m := s.Msg(); m.GetTransition() != nil || m.GetRun().GetContentHash() != digest("v2") || m.GetRun().GetTotalSteps() != 7 ||
		m.GetRun().GetLastSeq() != 1 {
		t.Fatalf("message after the resume: %v, want the run at digest v2, 7 steps, last_seq 1", m)
	}
	record(t, c, transition(id, 2, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))
	if !s.Receive() || s.Msg().GetTransition().GetSeq() != 2 || s.Msg().GetRun().GetContentHash() != digest("v2") {
		t.Fatalf("after the resume: %v, %v", s.Msg(), s.Err())
	}
}
