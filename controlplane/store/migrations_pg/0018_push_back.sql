-- 0018: push-back (docs/push-back.md). rewind_targets_json is the JSON array of node ids a
-- reviewer may send the run back to, as the executor declared them when the gate opened ('' for
-- none). redo_from is the node a rejection sent the run back to ('' for a plain rejection and
-- while pending). iteration is which opening of the node's gate in its run this approval is:
-- 1 for the first, n+1 after the run was sent back n times.
ALTER TABLE playbook_approvals ADD COLUMN rewind_targets_json TEXT COLLATE "C" NOT NULL DEFAULT ''
    CHECK (rewind_targets_json = '' OR jsonb_typeof(rewind_targets_json::jsonb) = 'array');
ALTER TABLE playbook_approvals ADD COLUMN redo_from TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE playbook_approvals ADD COLUMN iteration INTEGER NOT NULL DEFAULT 1 CHECK (iteration >= 1);
