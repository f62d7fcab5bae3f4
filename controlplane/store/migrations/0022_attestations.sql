-- 0022: signed attestations (docs/attestations.md). One row per run (approval_id '') for the
-- run's attestation, and one per decided gate (its approval_id) for the gate's review
-- attestation. envelope is the DSSE envelope's JSON exactly as served; key_id the signing key's
-- id; chain_head and evidence_pack_sha256 what the run's statement names ('' for a gate);
-- last_seq the run's last transition when it was signed, so a run re-finalised is re-signed
-- and a late writer never replaces a newer attestation with an older one.
CREATE TABLE attestations (
    run_id               TEXT NOT NULL REFERENCES playbook_runs (run_id),
    approval_id          TEXT NOT NULL DEFAULT '',
    key_id               TEXT NOT NULL CHECK (length(key_id) = 64),
    chain_head           TEXT NOT NULL DEFAULT '',
    evidence_pack_sha256 TEXT NOT NULL DEFAULT '',
    last_seq             INTEGER NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    envelope             TEXT NOT NULL CHECK (envelope <> ''),
    created_at           TEXT NOT NULL,
    PRIMARY KEY (run_id, approval_id)
) STRICT;
