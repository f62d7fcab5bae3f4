// Package metrics is the control plane's Prometheus metrics (docs/metrics.md): one
// Registry of its own (never the global one) with the Go and process collectors, counters
// and histograms the server's hooks add to, and gauges read from the store when Prometheus
// scrapes. Label values come from small fixed sets; a value outside its set is counted
// as "other", so no run id, approval id or free text ever becomes a label.
//
// Every method works on a nil *Metrics and does nothing, so code paths stay the same with
// metrics turned off (rbook serve --metrics=false, the embedded control plane of rbook run).
package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/rbookhq/rbook-action/internal/buildinfo"
)

// Namespace prefixes every metric the control plane exports.
const Namespace = "rbook"

// Label values of the fixed label sets (docs/metrics.md lists them with their meaning).
// OtherLabel stands for any value outside a set.
const OtherLabel = "other"

// Channels are the values of rbook_gate_decisions_total's channel label: where the decision
// that closed a gate came from. cli is Approve or Reject over RPC outside the console (rbook
// approve, grpcurl, any API client); console is the approver's web console; terminal is the
// executor's own prompt; the others are the store's decided_by_source values
// (approval.proto, Approval.decided_by_source).
var Channels = []string{"cli", "console", "terminal", "slack", "github", "policy", "deadline",
	"cancel-run", "run-finished", "superseded", "interrupted", OtherLabel}

// Verdicts are the values of rbook_gate_decisions_total's verdict label: the gate's status
// once decided.
var Verdicts = []string{"approved", "rejected", "expired", "cancelled", OtherLabel}

// FinishedStatuses are the values of rbook_runs_finished_total's status label.
var FinishedStatuses = []string{"succeeded", "failed", "cancelled", OtherLabel}

// ProgressStatuses are the values of rbook_runs_in_progress's status label: a run's stored
// status before it finishes.
var ProgressStatuses = []string{"running", "paused"}

// WebhookEvents are the values of rbook_github_webhook_deliveries_total's event label: the
// X-GitHub-Event header of the two events the control plane acts on, else "other".
var WebhookEvents = []string{"deployment_protection_rule", "deployment_review", OtherLabel}

// WebhookOutcomes are the values of rbook_github_webhook_deliveries_total's outcome label
// (the webhook package's answers, docs/approvals.md, "GitHub App webhook").
var WebhookOutcomes = []string{"processed", "duplicate", "ignored", "held", "refused", "unauthorized", "error"}

// ProtectionVerdicts are the values of rbook_github_protection_verdicts_total's verdict label.
var ProtectionVerdicts = []string{"approved", "rejected", OtherLabel}

// DeliveryOutcomes are the values of the outcome label of protection-rule verdicts
// (delivered, failed) and notification deliveries (delivered, failed, given_up).
var DeliveryOutcomes = []string{"delivered", "failed", "given_up"}

// ChannelTypes are the values of rbook_notification_deliveries_total's channel_type label:
// the notification channel kinds (docs/notifications.md).
var ChannelTypes = []string{"webhook", "teams", "email", "slack", OtherLabel}

// StateTimeout bounds the store reads behind the scrape-time gauges (Snapshot); a scrape
// whose reads take longer reports rbook_database_up and leaves the store's gauges out.
const StateTimeout = 2 * time.Second

// Snapshot is what the scrape-time gauges show, read when Prometheus scrapes.
type Snapshot struct {
	// DatabaseUp is the server's database health (the gRPC health check's answer).
	DatabaseUp bool
	// Store is nil when the store could not be read in time; its gauges are then left out
	// of the scrape rather than reported as zero.
	Store *StoreState
}

// StoreState are the gauges read from the store.
type StoreState struct {
	// RunsInProgress counts unfinished runs by stored status ("running", "paused").
	RunsInProgress map[string]int
	// GatesWaiting is the number of pending gates; OldestGateWait is the age of the oldest
	// (0 when none waits).
	GatesWaiting   int
	OldestGateWait time.Duration
	// UndeliveredNotifications counts notification deliveries neither delivered nor given up.
	UndeliveredNotifications int
}

// SnapshotFunc reads a Snapshot; ctx carries StateTimeout.
type SnapshotFunc func(ctx context.Context) Snapshot

// Metrics holds the control plane's collectors. Create it with New; a nil *Metrics is
// metrics turned off.
type Metrics struct {
	reg *prometheus.Registry

	runsFinished     []prometheus.Counter   // by FinishedStatuses
	decisions        [][]prometheus.Counter // by Channels, Verdicts
	decisionToResume prometheus.Histogram
	transitions      prometheus.Counter
	storeCommit      prometheus.Histogram
	webhook          [][]prometheus.Counter // by WebhookEvents, WebhookOutcomes
	verdicts         [][]prometheus.Counter // by ProtectionVerdicts, DeliveryOutcomes[:2]
	notifications    [][]prometheus.Counter // by ChannelTypes, DeliveryOutcomes
	leaseTakeovers   prometheus.Counter
	runsPruned       prometheus.Counter
	refused          *refusals

	state *stateCollector
}

// New builds the metrics with version as rbook_build_info's labels, on a Registry of their
// own that also holds the Go runtime and process collectors.
func New(version buildinfo.Version) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; the labels say which rbook build serves: version, VCS revision and Go toolchain.",
		ConstLabels: prometheus.Labels{"version": version.Version, "revision": version.Revision, "goversion": version.Go}})
	buildInfo.Set(1)

	runsFinished := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "runs_finished_total",
		Help: "Runs that reached a final status on this replica, by that status."}, []string{"status"})
	m.runsFinished = children1(runsFinished, FinishedStatuses)

	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "gate_decisions_total",
		Help: "Gates closed on this replica, by the channel of the closing decision and the gate's resulting status."},
		[]string{"channel", "verdict"})
	m.decisions = children2(decisions, Channels, Verdicts)

	m.decisionToResume = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "gate_decision_to_resume_seconds",
		Help:    "Time from a gate's approval being committed to the next transition its run's executor recorded.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}) // 10 ms .. 82 s

	m.transitions = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "transitions_recorded_total",
		Help: "Transitions stored by RecordTransition and RecordTransitions calls on this replica (duplicates not counted)."})

	m.storeCommit = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "store_commit_seconds",
		Help:    "Time a RecordTransition(s) call waited for the store: queueing on the single writer and the durable commit.",
		Buckets: prometheus.ExponentialBuckets(0.00025, 2, 15)}) // 0.25 ms .. 4 s

	webhook := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "github_webhook_deliveries_total",
		Help: "GitHub App webhook deliveries received, by event and what the control plane did with them."}, []string{"event", "outcome"})
	m.webhook = children2(webhook, WebhookEvents, WebhookOutcomes)

	verdicts := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "github_protection_verdicts_total",
		Help: "Deployment protection rule verdicts posted to GitHub, by verdict and whether GitHub took it."}, []string{"verdict", "outcome"})
	m.verdicts = children2(verdicts, ProtectionVerdicts, DeliveryOutcomes[:2])

	notifications := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "notification_deliveries_total",
		Help: "Notification delivery attempts, by channel type and outcome (given_up: the last failed attempt)."},
		[]string{"channel_type", "outcome"})
	m.notifications = children2(notifications, ChannelTypes, DeliveryOutcomes)

	m.leaseTakeovers = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "lease_takeovers_total",
		Help: "Runs whose lease another executor took over (StartRun with take_over after the lease expired)."})
	m.runsPruned = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "runs_pruned_total",
		Help: "Finished runs deleted by retention."})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "http_requests_refused_total",
		Help: "Requests refused before they were handled (rate limits, size limits), by endpoint and reason."}, []string{"endpoint", "reason"})
	m.refused = newRefusals(refused)
	for _, e := range RefusalEndpoints {
		for _, r := range RefusalReasons {
			m.refused.counter(e, r) // exported at 0 from the start, as the fixed sets are
		}
	}

	m.state = newStateCollector()
	m.reg.MustRegister(buildInfo, runsFinished, decisions, m.decisionToResume, m.transitions, m.storeCommit, webhook,
		verdicts, notifications, m.leaseTakeovers, m.runsPruned, refused, m.state)
	return m
}

// Registry is the registry every metric is on (for promhttp.HandlerFor and tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetSnapshot sets the function the scrape-time gauges read; until it is set (and on a nil
// Metrics) they are left out.
func (m *Metrics) SetSnapshot(f SnapshotFunc) {
	if m == nil {
		return
	}
	m.state.mu.Lock()
	m.state.read = f
	m.state.mu.Unlock()
}

// RunFinished counts a run that reached final status on this replica.
func (m *Metrics) RunFinished(status string) {
	if m == nil {
		return
	}
	m.runsFinished[index(FinishedStatuses, status)].Inc()
}

// GateDecided counts a gate closed by a decision from channel (one of Channels, else
// "other") with the gate's resulting status verdict (one of Verdicts, else "other").
func (m *Metrics) GateDecided(channel, verdict string) {
	if m == nil {
		return
	}
	m.decisions[index(Channels, channel)][index(Verdicts, verdict)].Inc()
}

// DecisionToResume observes d, the time from a gate's approval to its run's next recorded
// transition.
func (m *Metrics) DecisionToResume(d time.Duration) {
	if m == nil {
		return
	}
	m.decisionToResume.Observe(d.Seconds())
}

// TransitionsRecorded counts n stored transitions.
func (m *Metrics) TransitionsRecorded(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.transitions.Add(float64(n))
}

// StoreCommit observes d, how long one RecordTransition(s) call waited for the store.
func (m *Metrics) StoreCommit(d time.Duration) {
	if m == nil {
		return
	}
	m.storeCommit.Observe(d.Seconds())
}

// WebhookDelivery counts one GitHub webhook delivery of event (the X-GitHub-Event header;
// unknown events are "other") with outcome (one of WebhookOutcomes, else "error").
func (m *Metrics) WebhookDelivery(event, outcome string) {
	if m == nil {
		return
	}
	o := indexOr(WebhookOutcomes, outcome, len(WebhookOutcomes)-1)
	m.webhook[index(WebhookEvents, event)][o].Inc()
}

// ProtectionVerdict counts one attempt to post a protection-rule verdict ("approved" or
// "rejected") to GitHub, with outcome "delivered" or "failed" (anything else is "failed").
func (m *Metrics) ProtectionVerdict(verdict, outcome string) {
	if m == nil {
		return
	}
	o := indexOr(DeliveryOutcomes[:2], outcome, 1)
	m.verdicts[index(ProtectionVerdicts, verdict)][o].Inc()
}

// NotificationDelivery counts one notification delivery attempt through a channel of
// channelType (one of ChannelTypes, else "other") with outcome "delivered", "failed" or
// "given_up" (anything else is "failed").
func (m *Metrics) NotificationDelivery(channelType, outcome string) {
	if m == nil {
		return
	}
	o := indexOr(DeliveryOutcomes, outcome, 1)
	m.notifications[index(ChannelTypes, channelType)][o].Inc()
}

// LeaseTakeover counts one run taken over by another executor.
func (m *Metrics) LeaseTakeover() {
	if m == nil {
		return
	}
	m.leaseTakeovers.Inc()
}

// RunsPruned counts n runs deleted by retention.
func (m *Metrics) RunsPruned(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.runsPruned.Add(float64(n))
}

// RequestRefused counts one request to endpoint refused for reason, both short constants
// of the caller's code such as "github_webhook" and "rate_limited" (see
// docs/metrics.md). A value that is not 1-32 characters of [a-z0-9_] is "other", and past
// MaxRefusalSeries distinct pairs every new pair is counted as ("other", "other"), so the
// label set stays bounded whatever callers pass.
func (m *Metrics) RequestRefused(endpoint, reason string) {
	if m == nil {
		return
	}
	m.refused.counter(endpoint, reason).Inc()
}

// RefusalEndpoints and RefusalReasons are the endpoints and reasons the control plane's
// limits refuse requests for (docs/serve-config.md, "Limits"); their pairs of
// rbook_http_requests_refused_total exist at 0 from the start. Other short tokens a caller
// passes are counted too, up to MaxRefusalSeries pairs.
var (
	RefusalEndpoints = []string{"webhook", "slack", "signin", "console"}
	RefusalReasons   = []string{"rate", "too_large"}
)

// MaxRefusalSeries bounds the (endpoint, reason) pairs rbook_http_requests_refused_total
// keeps apart.
const MaxRefusalSeries = 64

// refusals is rbook_http_requests_refused_total with its children cached per pair.
type refusals struct {
	vec   *prometheus.CounterVec
	mu    sync.Mutex
	known map[[2]string]prometheus.Counter
}

func newRefusals(vec *prometheus.CounterVec) *refusals {
	return &refusals{vec: vec, known: map[[2]string]prometheus.Counter{}}
}

func (r *refusals) counter(endpoint, reason string) prometheus.Counter {
	key := [2]string{labelToken(endpoint), labelToken(reason)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.known[key]; ok {
		return c
	}
	if len(r.known) >= MaxRefusalSeries {
		key = [2]string{OtherLabel, OtherLabel}
		if c, ok := r.known[key]; ok {
			return c
		}
	}
	c := r.vec.WithLabelValues(key[0], key[1])
	r.known[key] = c
	return c
}

// labelToken is s when it is 1-32 characters of [a-z0-9_], else OtherLabel.
func labelToken(s string) string {
	if len(s) == 0 || len(s) > 32 {
		return OtherLabel
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return OtherLabel
		}
	}
	return s
}

// index is the position of v in set, else of the set's last value (OtherLabel).
func index(set []string, v string) int { return indexOr(set, v, len(set)-1) }

// indexOr is the position of v in set, else fallback.
func indexOr(set []string, v string, fallback int) int {
	for i, s := range set {
		if s == v {
			return i
		}
	}
	return fallback
}

// children1 resolves vec's child for every value of its one label, so each series exists
// (at 0) from the start and an observation looks nothing up.
func children1(vec *prometheus.CounterVec, values []string) []prometheus.Counter {
	out := make([]prometheus.Counter, len(values))
	for i, v := range values {
		out[i] = vec.WithLabelValues(v)
	}
	return out
}

// children2 is children1 for a vector of two labels: every pair of a and b.
func children2(vec *prometheus.CounterVec, a, b []string) [][]prometheus.Counter {
	out := make([][]prometheus.Counter, len(a))
	for i, x := range a {
		out[i] = make([]prometheus.Counter, len(b))
		for j, y := range b {
			out[i][j] = vec.WithLabelValues(x, y)
		}
	}
	return out
}
