package server

import (
	"net/netip"
	"testing"
	"time"
)

// Memory stays bounded under many addresses: after 100,000 distinct clients an endpoint
// remembers DefaultMaxClients, the most recent ones, and a client that was forgotten starts
// again with a full bucket.
func TestClientMemoryIsBoundedUnderManyAddresses(t *testing.T) {
	l := newLimiters(Limits{Webhook: Rate{N: 1, Per: time.Hour}}).by[endpointWebhook]
	now := time.Now()
	const clients = 100_000
	ip := func(i int) netip.Prefix {
		return keyOf(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	for i := range clients {
		if ok, _, _ := l.allow(ip(i), now); !ok {
			t.Fatalf("client %d refused on its first request", i)
		}
	}
	if n := l.size(); n != DefaultMaxClients {
		t.Fatalf("after %d clients the webhook remembers %d, want the bound %d", clients, n, DefaultMaxClients)
	}
	if ok, _, _ := l.allow(ip(clients-1), now); ok {
		t.Error("the most recent client was forgotten: its second request passed")
	}
	if ok, _, _ := l.allow(ip(0), now); !ok {
		t.Error("the first client, forgotten, was refused")
	}
	if n := l.size(); n != DefaultMaxClients {
		t.Errorf("remembers %d after the bound was reached, want %d", n, DefaultMaxClients)
	}
}
