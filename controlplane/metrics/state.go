package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// stateCollector exports the gauges read when Prometheus scrapes (Snapshot): the database's
// health and the store's counts of runs in progress, open gates and undelivered
// notifications.
type stateCollector struct {
	mu   sync.Mutex
	read SnapshotFunc

	databaseUp, runsInProgress, gatesWaiting, oldestGate, undelivered *prometheus.Desc
}

func newStateCollector() *stateCollector {
	return &stateCollector{
		databaseUp: prometheus.NewDesc(Namespace+"_database_up",
			"1 while the control plane reaches its database (the health check's answer), else 0.", nil, nil),
		runsInProgress: prometheus.NewDesc(Namespace+"_runs_in_progress",
			"Runs not finished yet, by stored status (paused: its executor recorded an open gate; running: any other), read from the database at scrape time.", []string{"status"}, nil),
		gatesWaiting: prometheus.NewDesc(Namespace+"_gates_waiting",
			"Gates waiting for a decision (pending approvals), read from the database at scrape time.", nil, nil),
		oldestGate: prometheus.NewDesc(Namespace+"_gate_oldest_wait_seconds",
			"How long the oldest pending gate has waited; 0 when none waits.", nil, nil),
		undelivered: prometheus.NewDesc(Namespace+"_notification_outbox_undelivered",
			"Notification deliveries neither delivered nor given up yet (the outbox's backlog).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.databaseUp
	ch <- c.runsInProgress
	ch <- c.gatesWaiting
	ch <- c.oldestGate
	ch <- c.undelivered
}

// Collect implements prometheus.Collector: one Snapshot read, bounded by StateTimeout.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	read := c.read
	c.mu.Unlock()
	if read == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), StateTimeout)
	defer cancel()
	s := read(ctx)
	up := 0.0
	if s.DatabaseUp {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.databaseUp, prometheus.GaugeValue, up)
	st := s.Store
	if st == nil {
		return
	}
	for _, status := range ProgressStatuses {
		ch <- prometheus.MustNewConstMetric(c.runsInProgress, prometheus.GaugeValue, float64(st.RunsInProgress[status]), status)
	}
	ch <- prometheus.MustNewConstMetric(c.gatesWaiting, prometheus.GaugeValue, float64(st.GatesWaiting))
	ch <- prometheus.MustNewConstMetric(c.oldestGate, prometheus.GaugeValue, max(st.OldestGateWait.Seconds(), 0))
	ch <- prometheus.MustNewConstMetric(c.undelivered, prometheus.GaugeValue, float64(st.UndeliveredNotifications))
}
