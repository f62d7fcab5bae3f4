package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/rbookhq/rbook-action/controlplane/metrics"
	"github.com/rbookhq/rbook-action/internal/buildinfo"
)

func newMetrics() *metrics.Metrics {
	return metrics.New(buildinfo.Version{Version: "v1.2.3", Revision: "abc123", Go: "go1.26.0"})
}

// value is the value of the counter or gauge name with exactly labels, and whether the
// registry has that series.
func value(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) (float64, bool) {
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
			if sameLabels(s.GetLabel(), labels) {
				switch {
				case s.GetCounter() != nil:
					return s.GetCounter().GetValue(), true
				case s.GetGauge() != nil:
					return s.GetGauge().GetValue(), true
				case s.GetHistogram() != nil:
					return float64(s.GetHistogram().GetSampleCount()), true
				}
			}
		}
	}
	return 0, false
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
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

// series counts the series of metric name.
func series(t *testing.T, m *metrics.Metrics, name string) int {
	t.Helper()
	n, err := testutil.GatherAndCount(m.Registry(), name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLabelValuesOutsideTheirSetAreCountedAsOther(t *testing.T) {
	cases := []struct {
		name   string
		count  func(m *metrics.Metrics)
		metric string
		labels map[string]string
	}{
		{"known channel", func(m *metrics.Metrics) { m.GateDecided("cli", "approved") },
			"rbook_gate_decisions_total", map[string]string{"channel": "cli", "verdict": "approved"}},
		{"unknown channel", func(m *metrics.Metrics) { m.GateDecided("carrier-pigeon", "approved") },
			"rbook_gate_decisions_total", map[string]string{"channel": "other", "verdict": "approved"}},
		{"unknown verdict", func(m *metrics.Metrics) { m.GateDecided("slack", "maybe") },
			"rbook_gate_decisions_total", map[string]string{"channel": "slack", "verdict": "other"}},
		{"run id as a channel", func(m *metrics.Metrics) { m.GateDecided("RBOOK-20260101-demo-0123abcd", "rejected") },
			"rbook_gate_decisions_total", map[string]string{"channel": "other", "verdict": "rejected"}},
		{"unknown webhook event", func(m *metrics.Metrics) { m.WebhookDelivery("push", "ignored") },
			"rbook_github_webhook_deliveries_total", map[string]string{"event": "other", "outcome": "ignored"}},
		{"unknown webhook outcome", func(m *metrics.Metrics) { m.WebhookDelivery("deployment_review", "exploded") },
			"rbook_github_webhook_deliveries_total", map[string]string{"event": "deployment_review", "outcome": "error"}},
		{"unknown channel type", func(m *metrics.Metrics) { m.NotificationDelivery("pager", "delivered") },
			"rbook_notification_deliveries_total", map[string]string{"channel_type": "other", "outcome": "delivered"}},
		{"unknown notification outcome", func(m *metrics.Metrics) { m.NotificationDelivery("email", "lost") },
			"rbook_notification_deliveries_total", map[string]string{"channel_type": "email", "outcome": "failed"}},
		{"unknown protection verdict", func(m *metrics.Metrics) { m.ProtectionVerdict("", "delivered") },
			"rbook_github_protection_verdicts_total", map[string]string{"verdict": "other", "outcome": "delivered"}},
		{"unknown run status", func(m *metrics.Metrics) { m.RunFinished("exploded") },
			"rbook_runs_finished_total", map[string]string{"status": "other"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetrics()
			before := series(t, m, tc.metric)
			tc.count(m)
			tc.count(m)
			if v, ok := value(t, m, tc.metric, tc.labels); !ok || v != 2 {
				t.Errorf("%s%v = %v (present %v), want 2", tc.metric, tc.labels, v, ok)
			}
			if after := series(t, m, tc.metric); after != before {
				t.Errorf("%s has %d series after counting, %d before: a new label value appeared", tc.metric, after, before)
			}
		})
	}
}

func TestEveryFixedSeriesExistsAtZeroBeforeAnythingHappens(t *testing.T) {
	m := newMetrics()
	want := map[string]int{
		"rbook_gate_decisions_total":             len(metrics.Channels) * len(metrics.Verdicts),
		"rbook_runs_finished_total":              len(metrics.FinishedStatuses),
		"rbook_github_webhook_deliveries_total":  len(metrics.WebhookEvents) * len(metrics.WebhookOutcomes),
		"rbook_notification_deliveries_total":    len(metrics.ChannelTypes) * len(metrics.DeliveryOutcomes),
		"rbook_github_protection_verdicts_total": len(metrics.ProtectionVerdicts) * 2,
		"rbook_http_requests_refused_total":      len(metrics.RefusalEndpoints) * len(metrics.RefusalReasons),
	}
	for name, n := range want {
		if got := series(t, m, name); got != n {
			t.Errorf("%s has %d series, want %d", name, got, n)
		}
	}
	if v, ok := value(t, m, "rbook_gate_decisions_total", map[string]string{"channel": "console", "verdict": "rejected"}); !ok || v != 0 {
		t.Errorf("console/rejected = %v (present %v), want 0", v, ok)
	}
}

func TestRefusalLabelsStayBoundedWhateverCallersPass(t *testing.T) {
	m := newMetrics()
	m.RequestRefused("github_webhook", "rate_limited")
	m.RequestRefused("github_webhook", "rate_limited")
	m.RequestRefused("/github/webhook?x=1", "Rate Limited")
	m.RequestRefused(strings.Repeat("a", 33), "body_too_large")
	if v, _ := value(t, m, "rbook_http_requests_refused_total", map[string]string{"endpoint": "github_webhook", "reason": "rate_limited"}); v != 2 {
		t.Errorf("github_webhook/rate_limited = %v, want 2", v)
	}
	if v, _ := value(t, m, "rbook_http_requests_refused_total", map[string]string{"endpoint": "other", "reason": "other"}); v != 1 {
		t.Errorf("other/other = %v, want 1 (a path and free text are not label values)", v)
	}
	if v, _ := value(t, m, "rbook_http_requests_refused_total", map[string]string{"endpoint": "other", "reason": "body_too_large"}); v != 1 {
		t.Errorf("other/body_too_large = %v, want 1 (a 33-character endpoint is too long)", v)
	}
	for i := range 3 * metrics.MaxRefusalSeries {
		m.RequestRefused(fmt.Sprintf("endpoint_%d", i), "rate_limited")
	}
	if n := series(t, m, "rbook_http_requests_refused_total"); n > metrics.MaxRefusalSeries {
		t.Errorf("%d refusal series, want at most %d", n, metrics.MaxRefusalSeries)
	}
}

func TestRunsPrunedAndLeaseTakeoversAddUp(t *testing.T) {
	m := newMetrics()
	m.RunsPruned(100)
	m.RunsPruned(0)
	m.RunsPruned(-3)
	m.RunsPruned(7)
	m.LeaseTakeover()
	m.TransitionsRecorded(10)
	m.TransitionsRecorded(0)
	for name, want := range map[string]float64{"rbook_runs_pruned_total": 107, "rbook_lease_takeovers_total": 1, "rbook_transitions_recorded_total": 10} {
		if v, _ := value(t, m, name, nil); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

func TestHistogramsObserveSeconds(t *testing.T) {
	m := newMetrics()
	m.StoreCommit(3 * time.Millisecond)
	m.StoreCommit(5 * time.Millisecond)
	m.DecisionToResume(1500 * time.Millisecond)
	want := `
# HELP rbook_gate_decision_to_resume_seconds Time from a gate's approval being committed to the next transition its run's executor recorded.
# TYPE rbook_gate_decision_to_resume_seconds histogram
rbook_gate_decision_to_resume_seconds_bucket{le="0.01"} 0
rbook_gate_decision_to_resume_seconds_bucket{le="0.02"} 0
rbook_gate_decision_to_resume_seconds_bucket{le="0.04"} 0
rbook_gate_decision_to_resume_seconds_bucket{le="0.08"} 0
rbook_gate_decision_to_resume_seconds_bucket{le="0.16"} 0
rbook_gate_decision_to_resume_seconds_bucket{le="0.32"} 0
rbook_gate_decision_to_resume_seconds_bucket{le="0.64"} 0
rbook_gate_decision_to_resume_seconds_bucket{le="1.28"} 0
rbook_gate_decision_to_resume_seconds_bucket{le="2.56"} 1
rbook_gate_decision_to_resume_seconds_bucket{le="5.12"} 1
rbook_gate_decision_to_resume_seconds_bucket{le="10.24"} 1
rbook_gate_decision_to_resume_seconds_bucket{le="20.48"} 1
rbook_gate_decision_to_resume_seconds_bucket{le="40.96"} 1
rbook_gate_decision_to_resume_seconds_bucket{le="81.92"} 1
rbook_gate_decision_to_resume_seconds_bucket{le="+Inf"} 1
rbook_gate_decision_to_resume_seconds_sum 1.5
rbook_gate_decision_to_resume_seconds_count 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "rbook_gate_decision_to_resume_seconds"); err != nil {
		t.Error(err)
	}
	if v, _ := value(t, m, "rbook_store_commit_seconds", nil); v != 2 {
		t.Errorf("rbook_store_commit_seconds count = %v, want 2", v)
	}
}

func TestBuildInfoCarriesTheBinarysVersion(t *testing.T) {
	m := newMetrics()
	if v, ok := value(t, m, "rbook_build_info", map[string]string{"version": "v1.2.3", "revision": "abc123", "goversion": "go1.26.0"}); !ok || v != 1 {
		t.Errorf("rbook_build_info = %v (present %v), want 1 with the version's labels", v, ok)
	}
}

func TestGoAndProcessCollectorsAreOnTheRegistry(t *testing.T) {
	m := newMetrics()
	names := []string{"go_goroutines", "go_info"}
	if runtime.GOOS == "linux" {
		names = append(names, "process_start_time_seconds", "process_resident_memory_bytes")
	}
	for _, name := range names {
		if n := series(t, m, name); n != 1 {
			t.Errorf("%s: %d series, want 1", name, n)
		}
	}
}

func TestScrapeReadsTheSnapshot(t *testing.T) {
	m := newMetrics()
	if series(t, m, "rbook_database_up") != 0 {
		t.Fatal("rbook_database_up before a snapshot function was set")
	}
	reads := 0
	m.SetSnapshot(func(ctx context.Context) metrics.Snapshot {
		reads++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the snapshot's context has no deadline")
		}
		return metrics.Snapshot{DatabaseUp: true, Store: &metrics.StoreState{
			RunsInProgress: map[string]int{"running": 3, "paused": 1}, GatesWaiting: 2,
			OldestGateWait: 90 * time.Second, UndeliveredNotifications: 4}}
	})
	for name, tc := range map[string]struct {
		labels map[string]string
		want   float64
	}{
		"rbook_database_up":                     {nil, 1},
		"rbook_runs_in_progress":                {map[string]string{"status": "running"}, 3},
		"rbook_gates_waiting":                   {nil, 2},
		"rbook_gate_oldest_wait_seconds":        {nil, 90},
		"rbook_notification_outbox_undelivered": {nil, 4},
	} {
		if v, ok := value(t, m, name, tc.labels); !ok || v != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", name, tc.labels, v, ok, tc.want)
		}
	}
	if v, _ := value(t, m, "rbook_runs_in_progress", map[string]string{"status": "paused"}); v != 1 {
		t.Errorf("paused runs = %v, want 1", v)
	}
	if reads == 0 {
		t.Error("the snapshot function was never called")
	}
}

func TestAnUnreadableStoreLeavesItsGaugesOutButReportsTheDatabase(t *testing.T) {
	m := newMetrics()
	m.SetSnapshot(func(context.Context) metrics.Snapshot { return metrics.Snapshot{DatabaseUp: false} })
	if v, ok := value(t, m, "rbook_database_up", nil); !ok || v != 0 {
		t.Errorf("rbook_database_up = %v (present %v), want 0", v, ok)
	}
	for _, name := range []string{"rbook_gates_waiting", "rbook_runs_in_progress", "rbook_gate_oldest_wait_seconds"} {
		if n := series(t, m, name); n != 0 {
			t.Errorf("%s has %d series while the store is unreadable, want none (not a misleading 0)", name, n)
		}
	}
}

func TestNilMetricsDoNothing(t *testing.T) {
	var m *metrics.Metrics
	m.GateDecided("cli", "approved")
	m.RunFinished("succeeded")
	m.DecisionToResume(time.Second)
	m.TransitionsRecorded(3)
	m.StoreCommit(time.Millisecond)
	m.WebhookDelivery("deployment_review", "processed")
	m.ProtectionVerdict("approved", "delivered")
	m.NotificationDelivery("email", "delivered")
	m.LeaseTakeover()
	m.RequestRefused("signin", "rate_limited")
	m.RunsPruned(4)
	m.SetSnapshot(nil)
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, metrics.Path, nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil Metrics' handler answered %d, want 404", rec.Code)
	}
}

func TestMetricsEndpointRequiresTheBearerTokenWhenOneIsSet(t *testing.T) {
	const token = "s3cret-metrics-token-0123456789"
	m := newMetrics()
	cases := []struct {
		name   string
		header []string
		want   int
	}{
		{"no header", nil, http.StatusUnauthorized},
		{"right token", []string{"Bearer " + token}, http.StatusOK},
		{"scheme in lower case", []string{"bearer " + token}, http.StatusOK},
		{"wrong token", []string{"Bearer " + token + "x"}, http.StatusUnauthorized},
		{"prefix of the token", []string{"Bearer " + token[:10]}, http.StatusUnauthorized},
		{"basic auth", []string{"Basic " + token}, http.StatusUnauthorized},
		{"token without scheme", []string{token}, http.StatusUnauthorized},
		{"two headers", []string{"Bearer " + token, "Bearer " + token}, http.StatusUnauthorized},
	}
	h := m.Handler([]byte(token))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, metrics.Path, nil)
			for _, v := range tc.header {
				req.Header.Add("Authorization", v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d; body %q", rec.Code, tc.want, rec.Body.String())
			}
			body := rec.Body.String()
			if tc.want == http.StatusUnauthorized {
				if strings.Contains(body, token) || strings.Contains(body, "rbook_") {
					t.Errorf("a refused scrape got %q", body)
				}
				if rec.Header().Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
				return
			}
			if !strings.Contains(body, "rbook_build_info{") {
				t.Errorf("the scrape has no rbook_build_info:\n%s", body)
			}
		})
	}
}

func TestMetricsEndpointWithoutTokenServesEveryone(t *testing.T) {
	m := newMetrics()
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, metrics.Path, nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "rbook_gates_waiting") && !strings.Contains(rec.Body.String(), "rbook_build_info") {
		t.Fatalf("status %d\n%s", rec.Code, rec.Body.String())
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "  abcdefghijklmnopqrstuvwxyz012345\n")
	tok, err := metrics.ReadTokenFile(good)
	if err != nil || string(tok) != "abcdefghijklmnopqrstuvwxyz012345" {
		t.Fatalf("ReadTokenFile(good) = %q, %v", tok, err)
	}
	for _, tc := range []struct{ name, content, want string }{
		{"short", "tooshort\n", "need at least 16"},
		{"empty", "\n\n", "need at least 16"},
		{"two words", "abcdefghijklmnop qrstuvwxyz\n", "visible ASCII"},
		{"huge", strings.Repeat("a", 5000), "over 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := strings.TrimSpace(tc.content)
			_, err := metrics.ReadTokenFile(write(tc.name, tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--metrics-token-file") {
				t.Fatalf("err = %v, want one naming the flag and %q", err, tc.want)
			}
			if len(secret) >= 8 && strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the file's content: %v", err)
			}
		})
	}
	if _, err := metrics.ReadTokenFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
}
