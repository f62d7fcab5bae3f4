package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// MaxEnvelopeBytes caps a stored attestation envelope: a run's predicate names every gate
// decision with its votes, reasons and inputs, all bounded by the wire contract's limits.
const MaxEnvelopeBytes = 4 << 20

// Attestation is one row of attestations (migration 0022; docs/attestations.md): a run's
// signed attestation (ApprovalID "") or one gate decision's review attestation.
type Attestation struct {
	RunID string
	// ApprovalID is "" for the run's attestation, else the decided gate's approval id.
	ApprovalID string
	// KeyID is the signing key's id (64 lowercase hex).
	KeyID string
	// ChainHead and EvidencePackSHA256 are what the run's statement names ("" for a gate).
	ChainHead          string
	EvidencePackSHA256 string
	// LastSeq is the run's last transition when the attestation was signed.
	LastSeq int64
	// Envelope is the DSSE envelope's JSON, served byte for byte.
	Envelope  []byte
	CreatedAt time.Time
}

// PutAttestation stores a, replacing the row of the same run and approval id unless that row
// was signed at a later LastSeq (so the newest record of a re-finalised run wins, whichever
// replica writes last). Errors: ErrInvalidArgument, ErrNotFound (no such run), ErrReadOnly,
// ErrClosed, storage errors.
func (s *Store) PutAttestation(ctx context.Context, a Attestation) error {
	switch {
	case len(a.KeyID) != 64:
		return fmt.Errorf("%w: attestation key id is 64 hex characters", ErrInvalidArgument)
	case len(a.Envelope) == 0 || len(a.Envelope) > MaxEnvelopeBytes:
		return fmt.Errorf("%w: attestation envelope is %d bytes; 1 to %d", ErrInvalidArgument, len(a.Envelope), MaxEnvelopeBytes)
	case a.LastSeq < 0:
		return fmt.Errorf("%w: attestation last_seq %d is negative", ErrInvalidArgument, a.LastSeq)
	}
	if err := checkText("run_id", a.RunID, true, MaxIDBytes); err != nil {
		return err
	}
	if err := checkText("approval_id", a.ApprovalID, false, MaxIDBytes); err != nil {
		return err
	}
	return s.write(ctx, func(w *writeTx) error {
		var one int
		if err := w.readRow(`SELECT 1 FROM playbook_runs WHERE run_id = ?`, a.RunID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: run %q", ErrNotFound, a.RunID)
		} else if err != nil {
			return fmt.Errorf("store: store the attestation: %w", err)
		}
		if _, err := w.execSQL(`INSERT INTO attestations (run_id, approval_id, key_id, chain_head, evidence_pack_sha256, last_seq, envelope, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id, approval_id) DO UPDATE SET key_id = excluded.key_id, chain_head = excluded.chain_head,
				evidence_pack_sha256 = excluded.evidence_pack_sha256, last_seq = excluded.last_seq, envelope = excluded.envelope,
				created_at = excluded.created_at
			WHERE excluded.last_seq >= attestations.last_seq`,
			a.RunID, a.ApprovalID, a.KeyID, a.ChainHead, a.EvidencePackSHA256, a.LastSeq, string(a.Envelope), formatTime(s.now())); err != nil {
			return fmt.Errorf("store: store the attestation: %w", err)
		}
		return nil
	})
}

// GetAttestation returns the attestation of runID (approvalID "") or of one of its gates.
// Errors: ErrNotFound when none is stored, storage errors.
func (s *Store) GetAttestation(ctx context.Context, runID, approvalID string) (Attestation, error) {
	a := Attestation{RunID: runID, ApprovalID: approvalID}
	var env string
	var created sql.NullString
	err := s.reader.QueryRowContext(ctx, `SELECT key_id, chain_head, evidence_pack_sha256, last_seq, envelope, created_at
		FROM attestations WHERE run_id = ? AND approval_id = ?`, runID, approvalID).
		Scan(&a.KeyID, &a.ChainHead, &a.EvidencePackSHA256, &a.LastSeq, &env, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Attestation{}, fmt.Errorf("%w: no attestation of run %q approval %q", ErrNotFound, runID, approvalID)
	}
	if err != nil {
		return Attestation{}, fmt.Errorf("store: read the attestation: %w", err)
	}
	a.Envelope = []byte(env)
	if a.CreatedAt, err = parseTime("created_at", created); err != nil {
		return Attestation{}, err
	}
	return a, nil
}
