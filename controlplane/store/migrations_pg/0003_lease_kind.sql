-- 0003: the executor lease with a fencing epoch and the run's owner identity
-- (docs/decisions/leases-and-fencing.md), the run's kind (runbook or playbook;
-- docs/decisions/playbooks-on-one-engine.md), and a check's source text next to the query
-- that ran, so the evidence shows both what the runbook wrote and what was executed.
-- owner_id_hash: lowercase hex SHA-256 of the executor's owner id, never the id itself (it is
-- a capability, like the approval tokens of 0001). '' for runs stored before this migration:
-- nobody holds their lease, so only take_over (after lease_expires_at, NULL = long expired)
-- can write them again.
ALTER TABLE playbook_runs ADD COLUMN kind TEXT COLLATE "C" NOT NULL DEFAULT 'runbook'
    CHECK (kind IN ('runbook', 'playbook'));
ALTER TABLE playbook_runs ADD COLUMN owner TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE playbook_runs ADD COLUMN owner_id_hash TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE playbook_runs ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0);
ALTER TABLE playbook_runs ADD COLUMN lease_seconds BIGINT NOT NULL DEFAULT 60 CHECK (lease_seconds > 0);
ALTER TABLE playbook_runs ADD COLUMN lease_expires_at TEXT COLLATE "C";

-- source_input: a check step's KQL as the runbook wrote it; input holds the query executed.
ALTER TABLE run_transitions ADD COLUMN source_input TEXT COLLATE "C";
