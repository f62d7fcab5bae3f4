-- 0008: custom deployment protection rules bound to rbook gates, and the outbox of what the
-- control plane owes GitHub for each (docs/approvals.md, "Approve in GitHub"). One row per
-- deployment. A rule is bound to the gate of its workflow run and environment (approval_id)
-- when both exist, in whichever order they arrive; once bound a status report is due; when the
-- gate is decided by any channel its verdict is written here in the same transaction as the
-- decision (verdict_state, set once: one verdict per deployment), then delivered by the control
-- plane's delivery loop with back-off (verdict_sent_at).
-- rule_id is "repository/run_id/environment/deployment_id": the callback URL names the
-- workflow run only, so two environments or attempts of one run share it.
CREATE TABLE github_protection_rules (
	rule_id          TEXT COLLATE "C" PRIMARY KEY,
	callback_url     TEXT COLLATE "C" NOT NULL,
	deployment_id    BIGINT NOT NULL DEFAULT 0,
	installation_id  BIGINT NOT NULL CHECK (installation_id > 0),
	repository       TEXT COLLATE "C" NOT NULL,
	run_id           TEXT COLLATE "C" NOT NULL,
	environment      TEXT COLLATE "C" NOT NULL,
	requested_at     TEXT COLLATE "C" NOT NULL,
	approval_id      TEXT COLLATE "C" REFERENCES playbook_approvals (approval_id),
	bound_at         TEXT COLLATE "C",
	-- due once bound; sent, or abandoned when it failed and the verdict was ready to go.
	report_state     TEXT COLLATE "C" NOT NULL DEFAULT 'due' CHECK (report_state IN ('due', 'sent', 'abandoned')),
	verdict_state    TEXT COLLATE "C" CHECK (verdict_state IN ('approved', 'rejected')),
	verdict_comment  TEXT COLLATE "C",
	verdict_at       TEXT COLLATE "C",
	verdict_sent_at  TEXT COLLATE "C",
	attempts         BIGINT NOT NULL DEFAULT 0,
	next_attempt_at  TEXT COLLATE "C",
	last_error       TEXT COLLATE "C"
);
CREATE INDEX github_protection_rules_unbound ON github_protection_rules (repository, run_id, environment)
	WHERE approval_id IS NULL;
CREATE INDEX github_protection_rules_approval ON github_protection_rules (approval_id) WHERE approval_id IS NOT NULL;
CREATE INDEX github_protection_rules_due ON github_protection_rules (next_attempt_at)
	WHERE approval_id IS NOT NULL AND verdict_sent_at IS NULL;
