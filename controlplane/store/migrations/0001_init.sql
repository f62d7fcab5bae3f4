-- 0001: runs, transitions (with their evidence) and approvals.
-- playbook_runs and playbook_approvals keep the columns and names of docs/spec/playbooks.md,
-- sections "Table playbook_runs" and "Table playbook_approvals"; the columns after them are
-- what the runbook executor needs (docs/spec/runbooks.md, "Step 3: Resume detection" to
-- "Step 8: Cancel flow"). Times are fixed-width RFC 3339 text in UTC with nine
-- fractional digits, so text order is time order (keyset paging and deadlines rely on it).

CREATE TABLE playbook_runs (
    run_id                    TEXT PRIMARY KEY,
    playbook_name             TEXT NOT NULL,
    playbook_hash             TEXT NOT NULL,
    current_node              TEXT,
    bindings                  TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(bindings)),
    error_context             TEXT CHECK (error_context IS NULL OR json_valid(error_context)),
    status                    TEXT NOT NULL DEFAULT 'running'
                              CHECK (status IN ('running', 'paused', 'failed', 'succeeded', 'cancelled')),
    iteration_counts          TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(iteration_counts)),
    epic_id                   TEXT,
    session_id                TEXT,
    started_at                TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000000Z', 'now')),
    completed_at              TEXT,
    -- runbook executor
    schema_hash8              TEXT NOT NULL DEFAULT '',
    total_steps               INTEGER NOT NULL DEFAULT 0 CHECK (total_steps >= 0),
    last_completed_step_index INTEGER NOT NULL DEFAULT -1 CHECK (last_completed_step_index >= -1),
    last_deploy_name          TEXT,
    started_by                TEXT,
    last_seq                  INTEGER NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    updated_at                TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000000Z', 'now')),
    cancelled_by              TEXT,
    cancel_reason             TEXT
) STRICT;

CREATE INDEX playbook_runs_by_start ON playbook_runs (started_at DESC, run_id DESC);
CREATE INDEX playbook_runs_by_status ON playbook_runs (status, started_at DESC, run_id DESC);
CREATE INDEX playbook_runs_by_name ON playbook_runs (playbook_name, started_at DESC, run_id DESC);

-- Append-only: one row per transition; the evidence entry of a step_finished (or of the CANCEL
-- audit) rides in the same row, so both commit with the run-row update in one transaction
-- (docs/decisions/durability.md). status IS NULL means the transition carries no evidence.
CREATE TABLE run_transitions (
    run_id             TEXT NOT NULL REFERENCES playbook_runs (run_id),
    seq                INTEGER NOT NULL CHECK (seq >= 1),
    kind               TEXT NOT NULL CHECK (kind <> ''),
    step_index         INTEGER NOT NULL CHECK (step_index >= -1),
    step_name          TEXT NOT NULL,
    step_type          TEXT NOT NULL,
    status             TEXT CHECK (status IS NULL OR status IN
                           ('PASS', 'FAIL', 'TIMED_OUT', 'SKIPPED', 'AWAITING_CONFIRMATION')),
    input              TEXT,
    output             TEXT,
    evidence_step_name TEXT,
    evidence_type      TEXT,
    evidence_at        TEXT,
    run_status         TEXT NOT NULL CHECK (run_status IN ('IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED')),
    last_deploy_name   TEXT,
    rollback_for       TEXT,
    message            TEXT NOT NULL DEFAULT '',
    at                 TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT;

CREATE TRIGGER run_transitions_no_update BEFORE UPDATE ON run_transitions
BEGIN
    SELECT RAISE(ABORT, 'run_transitions is append-only');
END;

CREATE TRIGGER run_transitions_no_delete BEFORE DELETE ON run_transitions
BEGIN
    SELECT RAISE(ABORT, 'run_transitions is append-only');
END;

-- token holds the lowercase hex SHA-256 of the resume token, never the token: a leaked
-- database file must not hand out bearer tokens that approve gates
-- (docs/decisions/approval-tokens.md).
-- The columns from step_index on are what the runbook executor's confirm gates need: the step,
-- the gate's deadline, the digest of the plan the token approves, the prompt shown, and the
-- channel that decided (docs/decisions/confirm-gates.md, docs/decisions/approval-tokens.md).
CREATE TABLE playbook_approvals (
    approval_id       TEXT PRIMARY KEY,
    run_id            TEXT NOT NULL REFERENCES playbook_runs (run_id),
    node_id           TEXT NOT NULL,
    token             TEXT NOT NULL UNIQUE CHECK (length(token) = 64),
    requested_at      TEXT NOT NULL,
    approved_at       TEXT,
    approver          TEXT,
    reason            TEXT,
    status            TEXT NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')),
    auto_passed       INTEGER NOT NULL DEFAULT 0 CHECK (auto_passed IN (0, 1)),
    step_index        INTEGER NOT NULL DEFAULT -1 CHECK (step_index >= -1),
    deadline          TEXT,
    plan_digest       TEXT NOT NULL DEFAULT '',
    prompt            TEXT NOT NULL DEFAULT '',
    decided_by_source TEXT
) STRICT;

-- At most one open gate per (run, node): a retried RequestApproval finds it instead of
-- opening a second one.
CREATE UNIQUE INDEX playbook_approvals_one_pending ON playbook_approvals (run_id, node_id)
    WHERE status = 'pending';
CREATE INDEX playbook_approvals_due ON playbook_approvals (deadline) WHERE status = 'pending';
CREATE INDEX playbook_approvals_by_request ON playbook_approvals (requested_at DESC, approval_id DESC);
CREATE INDEX playbook_approvals_by_status ON playbook_approvals (status, requested_at DESC, approval_id DESC);
CREATE INDEX playbook_approvals_by_run ON playbook_approvals (run_id, requested_at DESC, approval_id DESC);
