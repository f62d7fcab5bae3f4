-- 0021: the hash chain of a run's transitions (docs/evidence-chain.md): each transition's
-- prev_hash and hash, "sha256:" + 64 lowercase hex; NULL for a transition recorded without them.
ALTER TABLE run_transitions ADD COLUMN prev_hash TEXT COLLATE "C";
ALTER TABLE run_transitions ADD COLUMN hash TEXT COLLATE "C";
