package metrics_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/rbookhq/rbook-action/controlplane/metrics"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// dashboardFile is the Grafana dashboard shipped for these metrics (docs/metrics.md, "Dashboard").
var dashboardFile = filepath.Join("..", "..", "deploy", "grafana", "rbook-dashboard.json")

type dashboard struct {
	Templating struct {
		List []struct {
			Name, Type string
			Query      json.RawMessage // a string, or an object for query variables
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource *struct {
		Type, UID string
	} `json:"datasource"`
	Targets []struct {
		Expr       string `json:"expr"`
		Datasource *struct{ Type, UID string }
	} `json:"targets"`
}

// Parts of a PromQL expression that are not metric names: label matchers and range
// selectors, grouping clauses, and the identifiers left over that are keywords.
var (
	promBraces   = lazyregexp.New(`\{[^}]*\}|\[[^\]]*\]`)
	promGrouping = lazyregexp.New(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = lazyregexp.New(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
)

// metricNames are the metric names expr selects.
func metricNames(expr string) []string {
	e := promGrouping.ReplaceAllString(promBraces.ReplaceAllString(expr, ""), "")
	var out []string
	for _, m := range promIdent.Regexp().FindAllString(e, -1) {
		if strings.HasSuffix(m, "(") || promKeywords[strings.ToLower(m)] {
			continue // a function or aggregation, or a keyword
		}
		out = append(out, m)
	}
	return out
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// exported are the series names the registry exports (a histogram as its _bucket, _sum and
// _count), with every scrape-time gauge present, and the families by name.
func exported(t *testing.T) (map[string]bool, map[string]*dto.MetricFamily) {
	t.Helper()
	m := newMetrics()
	m.SetSnapshot(func(context.Context) metrics.Snapshot {
		return metrics.Snapshot{DatabaseUp: true, Store: &metrics.StoreState{}}
	})
	m.RequestRefused("github_webhook", "rate_limited") // a vector without fixed children shows once used
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names, byName := map[string]bool{}, map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
			continue
		}
		names[f.GetName()] = true
	}
	return names, byName
}

func TestDashboardQueriesOnlyMetricsTheRegistryExports(t *testing.T) {
	d := readDashboard(t)
	names, _ := exported(t)
	queries := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			queries++
			used := metricNames(tg.Expr)
			if len(used) == 0 {
				t.Errorf("panel %q: %q selects no metric", p.Title, tg.Expr)
			}
			for _, n := range used {
				if !names[n] {
					t.Errorf("panel %q queries %s, which the control plane does not export (expr %q)", p.Title, n, tg.Expr)
				}
			}
		}
	}
	if queries < 10 {
		t.Fatalf("only %d queries found in %s", queries, dashboardFile)
	}
}

func TestDashboardHasAPanelForEveryRbookMetric(t *testing.T) {
	d := readDashboard(t)
	_, families := exported(t)
	queried := map[string]bool{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, n := range metricNames(tg.Expr) {
				queried[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] = true
			}
		}
	}
	var missing []string
	for name := range families {
		if strings.HasPrefix(name, metrics.Namespace+"_") && !queried[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s has no panel for %s", dashboardFile, strings.Join(missing, ", "))
	}
}

func TestDashboardPanelsUseTheDatasourceVariable(t *testing.T) {
	d := readDashboard(t)
	found := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"` {
			found = true
		}
	}
	if !found {
		t.Fatal("the dashboard has no Prometheus datasource variable named datasource")
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want uid ${datasource}", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a query's datasource is %+v, want uid ${datasource}", p.Title, tg.Datasource)
			}
		}
	}
}

func TestMetricNamesOfPromQL(t *testing.T) {
	cases := map[string][]string{
		`max(rbook_gates_waiting{job=~"$job"})`: {"rbook_gates_waiting"},
		`histogram_quantile(0.99, sum by (le) (rate(rbook_store_commit_seconds_bucket{job=~"$job"}[$__rate_interval])))`: {"rbook_store_commit_seconds_bucket"},
		`sum(rate(a_sum[5m])) / sum(rate(a_count[5m])) > bool 0`:                                                         {"a_sum", "a_count"},
		`sum without (instance) (up) or on (job) vector(1)`:                                                              {"up"},
	}
	for expr, want := range cases {
		if got := metricNames(expr); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}
