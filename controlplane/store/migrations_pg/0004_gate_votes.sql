-- 0004: M-of-N gates with identities (docs/decisions/identity.md, docs/approvals.md, "Gate
-- policy"). Every vote cast on a gate is kept (who, when, why, through which channel, whether
-- the identity was authenticated), and the gate policy's requirement is captured on the
-- approval row when the gate opens, so a policy edit does not change an open gate. Gates opened
-- before this migration need one approval by anyone (approvals_required 1, allowed_approvers
-- '[]').
CREATE TABLE approval_votes (
    approval_id TEXT COLLATE "C" NOT NULL REFERENCES playbook_approvals (approval_id),
    approver    TEXT COLLATE "C" NOT NULL,
    verdict     TEXT COLLATE "C" NOT NULL CHECK (verdict IN ('approved', 'rejected')),
    reason      TEXT COLLATE "C" NOT NULL DEFAULT '',
    at          TEXT COLLATE "C" NOT NULL,
    source      TEXT COLLATE "C" NOT NULL DEFAULT '',
    verified    BIGINT NOT NULL DEFAULT 0 CHECK (verified IN (0, 1)),
    -- rowid: the order the votes were stored, as SQLite's implicit rowid (rows.go, votesPG).
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (approval_id, approver)
);

-- approvals_required: distinct approvals that open the gate (1..10, approval.MaxGateApprovals).
ALTER TABLE playbook_approvals ADD COLUMN approvals_required BIGINT NOT NULL DEFAULT 1
    CHECK (approvals_required BETWEEN 1 AND 10);
-- allowed_approvers: JSON array of identities, "github:<login>" and "group:<name>"; [] = anyone
-- with the approver role.
ALTER TABLE playbook_approvals ADD COLUMN allowed_approvers TEXT COLLATE "C" NOT NULL DEFAULT '[]'
    CHECK ((allowed_approvers::jsonb IS NOT NULL) AND jsonb_typeof(allowed_approvers::jsonb) = 'array');
ALTER TABLE playbook_approvals ADD COLUMN starter_may_approve BIGINT NOT NULL DEFAULT 0
    CHECK (starter_may_approve IN (0, 1));
-- policy_rule: the gate-policy rule that applied, named in refusals.
ALTER TABLE playbook_approvals ADD COLUMN policy_rule TEXT COLLATE "C" NOT NULL DEFAULT '';
