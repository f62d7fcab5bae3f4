-- 0002: an approval keeps its step's on_fail, and a transition keeps when the control plane
-- stored it.
-- on_fail: '' for approvals requested without one (and for every approval stored before
-- this migration).
ALTER TABLE playbook_approvals ADD COLUMN on_fail TEXT COLLATE "C" NOT NULL DEFAULT ''
    CHECK (on_fail IN ('', 'halt', 'rollback', 'continue'));

-- recorded_at: the time the writer stored the transition, in the transaction that committed
-- it (same text format as every other time column). NULL for transitions stored before this
-- migration: their commit time was not kept, and run_transitions is append-only.
ALTER TABLE run_transitions ADD COLUMN recorded_at TEXT COLLATE "C";
