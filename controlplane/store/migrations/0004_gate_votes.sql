-- 0004: M-of-N gates with identities (docs/decisions/identity.md, docs/approvals.md, "Gate
-- policy"). Every vote cast on a gate is kept (who, when, why, through which channel, whether
-- the identity was authenticated), and the gate policy's requirement is captured on the
-- approval row when the gate opens, so a policy edit does not change an open gate. Gates opened
-- before this migration need one approval by anyone (approvals_required 1, allowed_approvers
-- '[]').
CREATE TABLE approval_votes (
    approval_id TEXT NOT NULL REFERENCES playbook_approvals (approval_id),
    approver    TEXT NOT NULL,
    verdict     TEXT NOT NULL CHECK (verdict IN ('approved', 'rejected')),
    reason      TEXT NOT NULL DEFAULT '',
    at          TEXT NOT NULL,
    source      TEXT NOT NULL DEFAULT '',
    verified    INTEGER NOT NULL DEFAULT 0 CHECK (verified IN (0, 1)),
    PRIMARY KEY (approval_id, approver)
) STRICT;

-- approvals_required: distinct approvals that open the gate (1..10, approval.MaxGateApprovals).
ALTER TABLE playbook_approvals ADD COLUMN approvals_required INTEGER NOT NULL DEFAULT 1
    CHECK (approvals_required BETWEEN 1 AND 10);
-- allowed_approvers: JSON array of identities, "github:<login>" and "group:<name>"; [] = anyone
-- with the approver role.
ALTER TABLE playbook_approvals ADD COLUMN allowed_approvers TEXT NOT NULL DEFAULT '[]'
    CHECK (json_valid(allowed_approvers) AND json_type(allowed_approvers) = 'array');
ALTER TABLE playbook_approvals ADD COLUMN starter_may_approve INTEGER NOT NULL DEFAULT 0
    CHECK (starter_may_approve IN (0, 1));
-- policy_rule: the gate-policy rule that applied, named in refusals.
ALTER TABLE playbook_approvals ADD COLUMN policy_rule TEXT NOT NULL DEFAULT '';
