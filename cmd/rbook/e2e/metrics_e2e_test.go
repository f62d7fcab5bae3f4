package e2e

// End-to-end tests of `rbook serve`'s Prometheus metrics (docs/metrics.md): scraped during
// a real run at its gate and after it, parsed as Prometheus parses them.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs url's /metrics with the bearer token (none when ""), and returns the status
// and, for a 200, the parsed metric families.
func scrape(t *testing.T, url, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return resp.StatusCode, families
}

// sample is the value of series name{labels} in families (a histogram's sample count); a
// missing series fails the test.
func sample(t *testing.T, families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := families[name]
	if !ok {
		t.Fatalf("the scrape has no %s", name)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("the scrape has no %s%v", name, want)
	return 0
}

func TestMetricsShowTheRunItsGateAndTheDecision(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	const token = "metrics-scraper-token-0123456789"
	tokenFile := filepath.Join(t.TempDir(), "metrics-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := serveCP(t, dir, "--metrics-token-file", tokenFile)
	if code, _ := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Fatalf("a scrape without the token: %d, want 401", code)
	}

	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "run", "demo", "--control-plane", url)
	tok := tokenFrom(t, p) // the gate is open
	_, at := scrape(t, url, token)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"rbook_gates_waiting", nil, 1},
		{"rbook_runs_finished_total", []string{"status", "succeeded"}, 0},
		{"rbook_gate_decisions_total", []string{"channel", "cli", "verdict", "approved"}, 0},
		{"rbook_database_up", nil, 1},
	} {
		if got := sample(t, at, c.name, c.labels...); got != c.want {
			t.Errorf("at the gate: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Paused once its executor's gate_opened transition is stored (the recorder sends it
	// asynchronously, so it may still be running at this scrape); in progress either way.
	if r, pa := sample(t, at, "rbook_runs_in_progress", "status", "running"), sample(t, at, "rbook_runs_in_progress", "status", "paused"); r+pa != 1 {
		t.Errorf("at the gate: rbook_runs_in_progress running %v + paused %v, want the one run", r, pa)
	}
	if got := sample(t, at, "rbook_transitions_recorded_total"); got < 1 {
		t.Errorf("at the gate: rbook_transitions_recorded_total = %v, want the run's first transitions", got)
	}
	if got := sample(t, at, "rbook_gate_oldest_wait_seconds"); got < 0 {
		t.Errorf("at the gate: rbook_gate_oldest_wait_seconds = %v", got)
	}

	out, code := run(t, dir, "", "approve", tok, "--control-plane", url, "--reason", "looks good")
	if code != 0 {
		t.Fatalf("rbook approve: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
	_, after := scrape(t, url, token)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"rbook_gates_waiting", nil, 0},
		{"rbook_gate_oldest_wait_seconds", nil, 0},
		{"rbook_runs_in_progress", []string{"status", "running"}, 0},
		{"rbook_runs_in_progress", []string{"status", "paused"}, 0},
		{"rbook_runs_finished_total", []string{"status", "succeeded"}, 1},
		{"rbook_gate_decisions_total", []string{"channel", "cli", "verdict", "approved"}, 1},
		{"rbook_gate_decisions_total", []string{"channel", "console", "verdict", "approved"}, 0},
		{"rbook_gate_decision_to_resume_seconds", nil, 1},
		{"rbook_lease_takeovers_total", nil, 0},
	} {
		if got := sample(t, after, c.name, c.labels...); got != c.want {
			t.Errorf("after the run: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	resp := getRun(t, url, readState(t, dir).RunID)
	if got, want := sample(t, after, "rbook_transitions_recorded_total"), float64(len(resp.GetTransitions())); got != want {
		t.Errorf("rbook_transitions_recorded_total = %v, want the run's %v transitions", got, want)
	}
	if build := after["rbook_build_info"]; build == nil || len(build.GetMetric()) != 1 {
		t.Errorf("rbook_build_info: %v", build)
	}
}

func TestMetricsCanBeTurnedOff(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir, "--metrics=false")
	if code, _ := scrape(t, url, ""); code != http.StatusNotFound {
		t.Errorf("/metrics with --metrics=false: %d, want 404", code)
	}
	t.Setenv("RBOOK_APPROVAL_SECRET", testSecret)
	out, code := run(t, dir, "", "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "other.db"),
		"--metrics=false", "--metrics-token-file", filepath.Join(dir, "token"))
	if code != 2 || !strings.Contains(out, "--metrics-token-file") || !strings.Contains(out, "--metrics=false") {
		t.Errorf("--metrics=false with a token file: exit %d\n%s", code, out)
	}
}
