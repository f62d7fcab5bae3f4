-- 0009: the workflow run attempt of a protection rule (a re-run must not bind to the
-- decided gate of an earlier attempt). A deployment_protection_rule payload does not carry the
-- attempt; the control plane learns it from GET /repos/{o}/{r}/actions/runs/{run_id}
-- (run_attempt) before binding. NULL: not learned yet, so the rule stays unbound and the
-- delivery loop asks GitHub (with back-off). Gates carry their attempt in
-- playbook_approvals.github_run_attempt (0007); a gate without one counts as attempt 1.
ALTER TABLE github_protection_rules ADD COLUMN run_attempt TEXT COLLATE "C";
CREATE INDEX github_protection_rules_attempt_due ON github_protection_rules (next_attempt_at)
	WHERE approval_id IS NULL AND run_attempt IS NULL;
-- given_up_at / given_up_reason: the delivery loop stopped trying this rule (GitHub refused it
-- MaxGitHubDeliveryAttempts times, or a client error MaxGitHubRefusedAttempts times; see the
-- server's github_gates.go). The gate's decision stays in rbook; only GitHub's copy is missing.
ALTER TABLE github_protection_rules ADD COLUMN given_up_at TEXT COLLATE "C";
ALTER TABLE github_protection_rules ADD COLUMN given_up_reason TEXT COLLATE "C";
