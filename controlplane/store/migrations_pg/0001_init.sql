-- 0001 (PostgreSQL; docs/decisions/store-dialects.md, docs/decisions/schema-migrations.md): the
-- same tables, columns and names as migrations/0001_init.sql. SQLite's INTEGER is BIGINT,
-- STRICT is implied by PostgreSQL's types, json_valid is a cast to jsonb, and the append-only
-- triggers call one function. Every TEXT column is COLLATE "C": byte order, as SQLite's BINARY,
-- so ORDER BY and keyset paging order ids the same on any database whatever its default
-- collation.
-- 0001: runs, transitions (with their evidence) and approvals.
-- playbook_runs and playbook_approvals keep the columns and names of docs/spec/playbooks.md,
-- sections "Table playbook_runs" and "Table playbook_approvals"; the columns after them are
-- what the runbook executor needs (docs/spec/runbooks.md, "Step 3: Resume detection" to
-- "Step 8: Cancel flow"). Times are fixed-width RFC 3339 text in UTC with nine
-- fractional digits, so text order is time order (keyset paging and deadlines rely on it).

CREATE TABLE playbook_runs (
    run_id                    TEXT COLLATE "C" PRIMARY KEY,
    playbook_name             TEXT COLLATE "C" NOT NULL,
    playbook_hash             TEXT COLLATE "C" NOT NULL,
    current_node              TEXT COLLATE "C",
    bindings                  TEXT COLLATE "C" NOT NULL DEFAULT '{}' CHECK ((bindings::jsonb IS NOT NULL)),
    error_context             TEXT COLLATE "C" CHECK (error_context IS NULL OR (error_context::jsonb IS NOT NULL)),
    status                    TEXT COLLATE "C" NOT NULL DEFAULT 'running'
                              CHECK (status IN ('running', 'paused', 'failed', 'succeeded', 'cancelled')),
    iteration_counts          TEXT COLLATE "C" NOT NULL DEFAULT '{}' CHECK ((iteration_counts::jsonb IS NOT NULL)),
    epic_id                   TEXT COLLATE "C",
    session_id                TEXT COLLATE "C",
    started_at                TEXT COLLATE "C" NOT NULL DEFAULT (to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"')),
    completed_at              TEXT COLLATE "C",
    -- runbook executor
    schema_hash8              TEXT COLLATE "C" NOT NULL DEFAULT '',
    total_steps               BIGINT NOT NULL DEFAULT 0 CHECK (total_steps >= 0),
    last_completed_step_index BIGINT NOT NULL DEFAULT -1 CHECK (last_completed_step_index >= -1),
    last_deploy_name          TEXT COLLATE "C",
    started_by                TEXT COLLATE "C",
    last_seq                  BIGINT NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    updated_at                TEXT COLLATE "C" NOT NULL DEFAULT (to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"')),
    cancelled_by              TEXT COLLATE "C",
    cancel_reason             TEXT COLLATE "C"
);

CREATE INDEX playbook_runs_by_start ON playbook_runs (started_at DESC, run_id DESC);
CREATE INDEX playbook_runs_by_status ON playbook_runs (status, started_at DESC, run_id DESC);
CREATE INDEX playbook_runs_by_name ON playbook_runs (playbook_name, started_at DESC, run_id DESC);

-- Append-only: one row per transition; the evidence entry of a step_finished (or of the CANCEL
-- audit) rides in the same row, so both commit with the run-row update in one transaction
-- (docs/decisions/durability.md). status IS NULL means the transition carries no evidence.
CREATE TABLE run_transitions (
    run_id             TEXT COLLATE "C" NOT NULL REFERENCES playbook_runs (run_id),
    seq                BIGINT NOT NULL CHECK (seq >= 1),
    kind               TEXT COLLATE "C" NOT NULL CHECK (kind <> ''),
    step_index         BIGINT NOT NULL CHECK (step_index >= -1),
    step_name          TEXT COLLATE "C" NOT NULL,
    step_type          TEXT COLLATE "C" NOT NULL,
    status             TEXT COLLATE "C" CHECK (status IS NULL OR status IN
                           ('PASS', 'FAIL', 'TIMED_OUT', 'SKIPPED', 'AWAITING_CONFIRMATION')),
    input              TEXT COLLATE "C",
    output             TEXT COLLATE "C",
    evidence_step_name TEXT COLLATE "C",
    evidence_type      TEXT COLLATE "C",
    evidence_at        TEXT COLLATE "C",
    run_status         TEXT COLLATE "C" NOT NULL CHECK (run_status IN ('IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED')),
    last_deploy_name   TEXT COLLATE "C",
    rollback_for       TEXT COLLATE "C",
    message            TEXT COLLATE "C" NOT NULL DEFAULT '',
    at                 TEXT COLLATE "C" NOT NULL,
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
-- database file must not hand out bearer tokens that approve gates
-- (docs/decisions/approval-tokens.md).
-- The columns from step_index on are what the runbook executor's confirm gates need: the step,
-- the gate's deadline, the digest of the plan the token approves, the prompt shown, and the
-- channel that decided (docs/decisions/confirm-gates.md, docs/decisions/approval-tokens.md).
CREATE TABLE playbook_approvals (
    approval_id       TEXT COLLATE "C" PRIMARY KEY,
    run_id            TEXT COLLATE "C" NOT NULL REFERENCES playbook_runs (run_id),
    node_id           TEXT COLLATE "C" NOT NULL,
    token             TEXT COLLATE "C" NOT NULL UNIQUE CHECK (length(token) = 64),
    requested_at      TEXT COLLATE "C" NOT NULL,
    approved_at       TEXT COLLATE "C",
    approver          TEXT COLLATE "C",
    reason            TEXT COLLATE "C",
    status            TEXT COLLATE "C" NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')),
    auto_passed       BIGINT NOT NULL DEFAULT 0 CHECK (auto_passed IN (0, 1)),
    step_index        BIGINT NOT NULL DEFAULT -1 CHECK (step_index >= -1),
    deadline          TEXT COLLATE "C",
    plan_digest       TEXT COLLATE "C" NOT NULL DEFAULT '',
    prompt            TEXT COLLATE "C" NOT NULL DEFAULT '',
    decided_by_source TEXT COLLATE "C"
);

-- At most one open gate per (run, node): a retried RequestApproval finds it instead of
-- opening a second one.
CREATE UNIQUE INDEX playbook_approvals_one_pending ON playbook_approvals (run_id, node_id)
    WHERE status = 'pending';
CREATE INDEX playbook_approvals_due ON playbook_approvals (deadline) WHERE status = 'pending';
CREATE INDEX playbook_approvals_by_request ON playbook_approvals (requested_at DESC, approval_id DESC);
CREATE INDEX playbook_approvals_by_status ON playbook_approvals (status, requested_at DESC, approval_id DESC);
CREATE INDEX playbook_approvals_by_run ON playbook_approvals (run_id, requested_at DESC, approval_id DESC);
