-- 0001 (PostgreSQL; issue 10, item 1, D10-2): the same tables, columns and names as
-- migrations/0001_init.sql. SQLite's INTEGER is BIGINT, STRICT is implied by PostgreSQL's
-- types, json_valid is a cast to jsonb, and the append-only triggers call one function.
-- 0001: runs, transitions (with their evidence) and approvals.
-- Seed playbooks, "Database tables": playbook_runs and playbook_approvals keep the seed's
-- columns and names; the columns after them are what the runbook executor needs (seed
-- runbook-executor, Steps 3-8). Times are fixed-width RFC 3339 text in UTC with nine
-- fractional digits, so text order is time order (keyset paging and deadlines rely on it).

CREATE TABLE playbook_runs (
    run_id                    TEXT PRIMARY KEY,
    playbook_name             TEXT NOT NULL,
    playbook_hash             TEXT NOT NULL,
    current_node              TEXT,
    bindings                  TEXT NOT NULL DEFAULT '{}' CHECK ((bindings::jsonb IS NOT NULL)),
    error_context             TEXT CHECK (error_context IS NULL OR (error_context::jsonb IS NOT NULL)),
    status                    TEXT NOT NULL DEFAULT 'running'
                              CHECK (status IN ('running', 'paused', 'failed', 'succeeded', 'cancelled')),
    iteration_counts          TEXT NOT NULL DEFAULT '{}' CHECK ((iteration_counts::jsonb IS NOT NULL)),
    epic_id                   TEXT,
    session_id                TEXT,
    started_at                TEXT NOT NULL DEFAULT (to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"')),
    completed_at              TEXT,
    -- runbook executor
    schema_hash8              TEXT NOT NULL DEFAULT '',
    total_steps               BIGINT NOT NULL DEFAULT 0 CHECK (total_steps >= 0),
    last_completed_step_index BIGINT NOT NULL DEFAULT -1 CHECK (last_completed_step_index >= -1),
    last_deploy_name          TEXT,
    started_by                TEXT,
    last_seq                  BIGINT NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    updated_at                TEXT NOT NULL DEFAULT (to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"')),
    cancelled_by              TEXT,
    cancel_reason             TEXT
);

CREATE INDEX playbook_runs_by_start ON playbook_runs (started_at DESC, run_id DESC);
CREATE INDEX playbook_runs_by_status ON playbook_runs (status, started_at DESC, run_id DESC);
CREATE INDEX playbook_runs_by_name ON playbook_runs (playbook_name, started_at DESC, run_id DESC);

-- Append-only: one row per transition; the evidence entry of a step_finished (or of the
-- CANCEL audit) rides in the same row, so both commit with the run-row update in one
-- transaction (DESIGN D10). status IS NULL means the transition carries no evidence.
CREATE TABLE run_transitions (
    run_id             TEXT NOT NULL REFERENCES playbook_runs (run_id),
    seq                BIGINT NOT NULL CHECK (seq >= 1),
    kind               TEXT NOT NULL CHECK (kind <> ''),
    step_index         BIGINT NOT NULL CHECK (step_index >= -1),
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
);

CREATE FUNCTION run_transitions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'run_transitions is append-only';
END;
$$;

CREATE TRIGGER run_transitions_no_update BEFORE UPDATE ON run_transitions
    FOR EACH ROW EXECUTE FUNCTION run_transitions_append_only();

CREATE TRIGGER run_transitions_no_delete BEFORE DELETE ON run_transitions
    FOR EACH ROW EXECUTE FUNCTION run_transitions_append_only();

-- token holds the lowercase hex SHA-256 of the resume token, never the token: a leaked
-- database file must not hand out bearer tokens that approve gates (DESIGN D9).
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
    auto_passed       BIGINT NOT NULL DEFAULT 0 CHECK (auto_passed IN (0, 1)),
    -- runbook executor and DESIGN D8-D9
    step_index        BIGINT NOT NULL DEFAULT -1 CHECK (step_index >= -1),
    deadline          TEXT,
    plan_digest       TEXT NOT NULL DEFAULT '',
    prompt            TEXT NOT NULL DEFAULT '',
    decided_by_source TEXT
);

-- At most one open gate per (run, node): a retried RequestApproval finds it instead of
-- opening a second one.
CREATE UNIQUE INDEX playbook_approvals_one_pending ON playbook_approvals (run_id, node_id)
    WHERE status = 'pending';
CREATE INDEX playbook_approvals_due ON playbook_approvals (deadline) WHERE status = 'pending';
CREATE INDEX playbook_approvals_by_request ON playbook_approvals (requested_at DESC, approval_id DESC);
CREATE INDEX playbook_approvals_by_status ON playbook_approvals (status, requested_at DESC, approval_id DESC);
CREATE INDEX playbook_approvals_by_run ON playbook_approvals (run_id, requested_at DESC, approval_id DESC);
