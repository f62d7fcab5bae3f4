package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestNewestAttestationWinsWhicheverReplicaWritesLast(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R-att"))
	key := strings.Repeat("a", 64)
	put := func(seq int64, env string) {
		t.Helper()
		if err := s.PutAttestation(ctx, Attestation{RunID: "R-att", KeyID: key, ChainHead: "sha256:x", LastSeq: seq, Envelope: []byte(env)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GetAttestation(ctx, "R-att", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before signing: %v, want ErrNotFound", err)
	}
	put(5, `{"first":1}`)
	put(9, `{"refinalised":1}`)
	put(5, `{"late":1}`) // a replica that signed the older record writes last
	got, err := s.GetAttestation(ctx, "R-att", "")
	if err != nil || string(got.Envelope) != `{"refinalised":1}` || got.LastSeq != 9 || got.KeyID != key {
		t.Fatalf("GetAttestation = %+v, %v; want the envelope signed at seq 9", got, err)
	}
	if err := s.PutAttestation(ctx, Attestation{RunID: "R-att", ApprovalID: "A-1", KeyID: key, Envelope: []byte(`{"gate":1}`)}); err != nil {
		t.Fatal(err)
	}
	if g, err := s.GetAttestation(ctx, "R-att", "A-1"); err != nil || string(g.Envelope) != `{"gate":1}` {
		t.Fatalf("gate attestation = %+v, %v", g, err)
	}
	if err := s.PutAttestation(ctx, Attestation{RunID: "R-none", KeyID: key, Envelope: []byte(`{}`)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("attestation of no run: %v, want ErrNotFound", err)
	}
	if err := s.PutAttestation(ctx, Attestation{RunID: "R-att", KeyID: "short", Envelope: []byte(`{}`)}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad key id: %v, want ErrInvalidArgument", err)
	}
}
