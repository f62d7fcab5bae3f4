package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/controlplane/metrics"
	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/buildinfo"
	"github.com/rbookhq/rbook-action/internal/gatechannel"
)

// serveWithMetrics serves an in-process control plane with metrics on and returns its URL
// and the metrics.
func serveWithMetrics(t *testing.T) (string, *metrics.Metrics) {
	t.Helper()
	m := metrics.New(buildinfo.Version{Version: "test"})
	return serveWith(t, server.Options{Metrics: m}), m
}

// metricValue is the value of series name{labels} (a histogram's sample count) in m's
// registry; a series that is absent fails the test.
func metricValue(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if !labelsAre(s.GetLabel(), labels) {
				continue
			}
			switch {
			case s.GetCounter() != nil:
				return s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				return s.GetGauge().GetValue()
			case s.GetHistogram() != nil:
				return float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func labelsAre(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

// wantMetrics checks each series' value.
func wantMetrics(t *testing.T, m *metrics.Metrics, when string, want map[string]float64, labels map[string]map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := metricValue(t, m, name, labels[name]); got != v {
			t.Errorf("%s: %s%v = %v, want %v", when, name, labels[name], got, v)
		}
	}
}

func TestMetricsFollowARunThroughItsGate(t *testing.T) {
	url, m := serveWithMetrics(t)
	c := newClients(url)
	startRun(t, c, "R1")
	for seq := int64(1); seq <= 3; seq++ {
		record(t, c, transition("R1", seq, 0))
	}
	a, token := gate(t, c, "R1", time.Hour)
	running := map[string]map[string]string{"rbook_runs_in_progress": {"status": "running"},
		"rbook_gate_decisions_total": {"channel": "cli", "verdict": "approved"}, "rbook_runs_finished_total": {"status": "succeeded"}}
	wantMetrics(t, m, "at the gate", map[string]float64{
		"rbook_runs_in_progress": 1, "rbook_gates_waiting": 1, "rbook_gate_decisions_total": 0, "rbook_runs_finished_total": 0,
		"rbook_transitions_recorded_total": 3, "rbook_store_commit_seconds": 3, "rbook_database_up": 1,
	}, running)
	if age := metricValue(t, m, "rbook_gate_oldest_wait_seconds", nil); age < 0 || age > 3600 {
		t.Errorf("rbook_gate_oldest_wait_seconds = %v for a gate opened just now", age)
	}

	if _, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: token, Reason: "ok"}); err != nil {
		t.Fatalf("Approve %s: %v", a.GetApprovalId(), err)
	}
	wantMetrics(t, m, "after the approval", map[string]float64{
		"rbook_gates_waiting": 0, "rbook_gate_oldest_wait_seconds": 0, "rbook_gate_decisions_total": 1, "rbook_gate_decision_to_resume_seconds": 0,
	}, running)
	record(t, c, transition("R1", 4, 0)) // the executor resumes
	record(t, c, transition("R1", 5, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))
	wantMetrics(t, m, "after the run", map[string]float64{
		"rbook_gate_decision_to_resume_seconds": 1, "rbook_runs_finished_total": 1, "rbook_runs_in_progress": 0,
		"rbook_transitions_recorded_total": 5, "rbook_store_commit_seconds": 5,
	}, running)
}

// fetchMetadata makes a client send the Fetch metadata a browser adds to the console's calls.
type fetchMetadata struct{}

func (fetchMetadata) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Sec-Fetch-Mode", "cors")
		req.Header().Set("Sec-Fetch-Site", "same-origin")
		return next(ctx, req)
	}
}

func (fetchMetadata) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (fetchMetadata) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func TestGateDecisionsAreCountedByChannel(t *testing.T) {
	cases := []struct {
		name             string
		decide           func(t *testing.T, url string, c clients, token string)
		channel, verdict string
	}{
		{"rbook approve", func(t *testing.T, _ string, c clients, token string) {
			if _, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: token}); err != nil {
				t.Fatal(err)
			}
		}, "cli", "approved"},
		{"the console", func(t *testing.T, url string, _ clients, token string) {
			browser := newClients(url, connect.WithInterceptors(fetchMetadata{}))
			if _, err := browser.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: token, Reason: "not now"}); err != nil {
				t.Fatal(err)
			}
		}, "console", "rejected"},
		{"the executor's terminal", func(t *testing.T, _ string, c clients, token string) {
			if _, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: token, Approver: "ann",
				Reason: gatechannel.TerminalReason("yes")}); err != nil {
				t.Fatal(err)
			}
		}, "terminal", "approved"},
		{"CancelRun", func(t *testing.T, _ string, c clients, _ string) {
			if _, err := c.runs.CancelRun(context.Background(), &rbookv1.CancelRunRequest{RunId: "R1", Reason: "wrong window"}); err != nil {
				t.Fatal(err)
			}
		}, "cancel-run", "cancelled"},
		{"the run finishing", func(t *testing.T, _ string, c clients, _ string) {
			record(t, c, transition("R1", 2, rbookv1.RunStatus_RUN_STATUS_FAILED))
		}, "run-finished", "cancelled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, m := serveWithMetrics(t)
			c := newClients(url)
			startRun(t, c, "R1")
			record(t, c, transition("R1", 1, 0))
			_, token := gate(t, c, "R1", time.Hour)
			tc.decide(t, url, c, token)
			for _, ch := range metrics.Channels {
				for _, v := range metrics.Verdicts {
					want := 0.0
					if ch == tc.channel && v == tc.verdict {
						want = 1
					}
					if got := metricValue(t, m, "rbook_gate_decisions_total", map[string]string{"channel": ch, "verdict": v}); got != want {
						t.Errorf("rbook_gate_decisions_total{channel=%q,verdict=%q} = %v, want %v", ch, v, got, want)
					}
				}
			}
			if got := metricValue(t, m, "rbook_gates_waiting", nil); got != 0 {
				t.Errorf("rbook_gates_waiting = %v after the decision", got)
			}
		})
	}
}

func TestACancelledRunIsCountedOnceWhenItsExecutorReportsTheCancel(t *testing.T) {
	url, m := serveWithMetrics(t)
	c := newClients(url)
	startRun(t, c, "R1")
	record(t, c, transition("R1", 1, 0))
	if _, err := c.runs.CancelRun(context.Background(), &rbookv1.CancelRunRequest{RunId: "R1"}); err != nil {
		t.Fatal(err)
	}
	// The executor winds down and records the cancel for the record.
	record(t, c, transition("R1", 2, rbookv1.RunStatus_RUN_STATUS_CANCELLED))
	wantMetrics(t, m, "after the cancel", map[string]float64{"rbook_runs_finished_total": 1, "rbook_runs_in_progress": 0},
		map[string]map[string]string{"rbook_runs_finished_total": {"status": "cancelled"}, "rbook_runs_in_progress": {"status": "running"}})
}

func TestMetricsPathIsServedOnlyWhenMetricsAreOn(t *testing.T) {
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url + metrics.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	on, _ := serveWithMetrics(t)
	if code, body := get(on); code != http.StatusOK || !strings.Contains(body, `rbook_build_info{goversion=`) || !strings.Contains(body, "rbook_gates_waiting 0") {
		t.Errorf("metrics on: %d\n%s", code, body)
	}
	off := serveWith(t, server.Options{})
	if code, body := get(off); code != http.StatusNotFound || strings.Contains(body, "rbook_") {
		t.Errorf("metrics off: %d\n%s", code, body)
	}
	withToken := serveWith(t, server.Options{Metrics: metrics.New(buildinfo.Version{}), MetricsToken: []byte("metrics-token-0123456789")})
	if code, _ := get(withToken); code != http.StatusUnauthorized {
		t.Errorf("metrics with a token, scraped without it: %d, want 401", code)
	}
}

func TestALeaseTakeOverIsCountedOnceAndRefusedOnesNot(t *testing.T) {
	url, m := serveWithMetrics(t)
	ctx := context.Background()
	c := newClients(url)
	if _, err := c.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "R-z", Name: "demo", ContentHash: digest("plan"),
		SchemaHash8: "0123abcd", TotalSteps: 5, LeaseSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	takeOver := &rbookv1.StartRunRequest{OwnerId: "other-owner-0123456789", RunId: "R-z", Name: "demo", ContentHash: digest("plan"),
		SchemaHash8: "0123abcd", TotalSteps: 5, TakeOver: true}
	// The 5 s lease must lapse on the server's clock: poll the take-over, as the executor would.
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; {
		if _, err = c.runs.StartRun(ctx, takeOver); err == nil || time.Now().After(deadline) {
			break
		}
		wantCode(t, err, connect.CodeFailedPrecondition, "E_LEASE_HELD")
		if got := metricValue(t, m, "rbook_lease_takeovers_total", nil); got != 0 {
			t.Fatalf("rbook_lease_takeovers_total = %v while the lease is held", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("take-over after the lease lapsed: %v", err)
	}
	if got := metricValue(t, m, "rbook_lease_takeovers_total", nil); got != 1 {
		t.Errorf("rbook_lease_takeovers_total = %v, want 1", got)
	}
}

// answerAtTerminal is a terminal prompt at which the person typed "yes" at once.
type answerAtTerminal struct{}

func (answerAtTerminal) Await(context.Context, engine.GateRequest) (engine.Decision, error) {
	return engine.Decision{Verdict: engine.Approved, Input: "yes", Source: "terminal"}, nil
}

// The executor's own gate, answered at its terminal prompt, reaches the control plane as an
// ordinary Approve; the reason it builds (internal/gatechannel) is what the server counts
// under the channel "terminal".
func TestADecisionAnsweredAtTheExecutorsTerminalIsCountedAsTerminal(t *testing.T) {
	url, m := serveWithMetrics(t)
	c := cpclient.New(url, "")
	const runID = "RBOOK-20261202-terminal-0123abcd"
	if _, err := c.StartRun(t.Context(), cpclient.RunInfo{RunID: runID, RunbookName: "demo", PlanDigest: digest("plan"), SchemaHash8: "0123abcd",
		TotalSteps: 3, OwnerID: testOwner, Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	g := &cpclient.Gate{C: c, Local: answerAtTerminal{}, Who: "ann", Announce: func(*rbookv1.Approval, string) {}}
	d, err := g.Await(t.Context(), engine.GateRequest{RunID: runID, StepIndex: 1, StepName: "confirm", StepCount: 3,
		Prompt: "Roll out?", Deadline: time.Now().Add(time.Hour), PlanDigest: digest("plan"), OnFail: "halt"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != engine.Approved || d.Reason != gatechannel.TerminalReason("yes") {
		t.Fatalf("decision %+v, want approved with the terminal's reason", d)
	}
	for _, ch := range metrics.Channels {
		want := 0.0
		if ch == "terminal" {
			want = 1
		}
		if got := metricValue(t, m, "rbook_gate_decisions_total", map[string]string{"channel": ch, "verdict": "approved"}); got != want {
			t.Errorf("rbook_gate_decisions_total{channel=%q,verdict=\"approved\"} = %v, want %v", ch, got, want)
		}
	}
}
