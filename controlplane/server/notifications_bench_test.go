package server_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/server"
)

// BenchmarkGateOpenedToNotification measures, on loopback, the time from an executor's
// RequestApproval call to the webhook receiver accepting the gate.opened event (committed
// with the gate, then routed, claimed, signed and posted by the delivery loop), as p50 and
// p99 over b.N gates (docs/notifications.md, "Delivery guarantees": target p99 ≤ 1 s).
//
//	go test -run='^$' -bench=GateOpenedToNotification -benchtime=200x ./controlplane/server/
func BenchmarkGateOpenedToNotification(b *testing.B) {
	rcv := newHookReceiver(b)
	st := openStore(b, filepath.Join(b.TempDir(), "cp.db"))
	c := serveNotifying(b, st, rcv.srv.URL, server.NotifyOptions{}, nil)
	runs := make([]string, b.N)
	for i := range runs {
		runs[i] = fmt.Sprintf("R%d", i)
		startRun(b, c, runs[i])
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for _, run := range runs {
		start := time.Now()
		a, _ := gate(b, c, run, time.Hour)
		want := "gate.opened:" + a.GetApprovalId()
	wait:
		for {
			select {
			case id := <-rcv.arrived:
				if id == want {
					break wait
				}
			case <-time.After(30 * time.Second):
				b.Fatalf("the receiver never got %s", want)
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
}
