-- 0007: the GitHub Actions workflow run an executor reports from its runner's environment
-- (docs/approvals.md, "Approve in GitHub"): on a run, as its last StartRun reported it; on an
-- approval, with the GitHub environment the gate is bound to, so a deployment protection
-- rule of that workflow run and environment can be bound to the gate.
-- Reported by the executor, never verified: nothing authorizes on these columns (the
-- verified job is migration 0005's). All NULL when nothing was reported.
ALTER TABLE playbook_runs ADD COLUMN reported_repository TEXT COLLATE "C";
ALTER TABLE playbook_runs ADD COLUMN reported_run_id TEXT COLLATE "C";
ALTER TABLE playbook_runs ADD COLUMN reported_run_attempt TEXT COLLATE "C";
ALTER TABLE playbook_runs ADD COLUMN reported_actor TEXT COLLATE "C";
ALTER TABLE playbook_runs ADD COLUMN reported_sha TEXT COLLATE "C";
ALTER TABLE playbook_runs ADD COLUMN reported_environment TEXT COLLATE "C";
ALTER TABLE playbook_approvals ADD COLUMN github_repository TEXT COLLATE "C";
ALTER TABLE playbook_approvals ADD COLUMN github_run_id TEXT COLLATE "C";
ALTER TABLE playbook_approvals ADD COLUMN github_run_attempt TEXT COLLATE "C";
ALTER TABLE playbook_approvals ADD COLUMN github_actor TEXT COLLATE "C";
ALTER TABLE playbook_approvals ADD COLUMN github_sha TEXT COLLATE "C";
ALTER TABLE playbook_approvals ADD COLUMN github_environment TEXT COLLATE "C";
CREATE INDEX playbook_approvals_github ON playbook_approvals (github_repository, github_run_id, github_environment)
  WHERE github_repository IS NOT NULL;
