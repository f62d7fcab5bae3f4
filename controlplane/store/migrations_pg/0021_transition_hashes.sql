-- 0021: the hash chain of a run's transitions (docs/evidence-chain.md). prev_hash is the hash
-- of the run's previous transition (the genesis, "sha256:" and 64 zeros, for seq 1) and hash
-- the transition's own, both "sha256:" and 64 lowercase hex digits over the canonical
-- encoding. Both are NULL for a transition recorded without the chain (rows stored before
-- this migration, or sent by an older executor); a run whose first transition has a hash
-- keeps one on every later transition (the store refuses a transition that does not continue
-- the chain).
ALTER TABLE run_transitions ADD COLUMN prev_hash TEXT COLLATE "C"
    CHECK (prev_hash IS NULL OR (length(prev_hash) = 71 AND substr(prev_hash, 1, 7) = 'sha256:'));
ALTER TABLE run_transitions ADD COLUMN hash TEXT COLLATE "C"
    CHECK (hash IS NULL OR (length(hash) = 71 AND substr(hash, 1, 7) = 'sha256:'));
