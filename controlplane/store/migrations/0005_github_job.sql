-- 0005: the GitHub Actions job that started a run (docs/decisions/identity.md): claims of
-- the job's OIDC token as the control plane verified them at StartRun, never request fields.
-- All NULL for a run started without an OIDC token (an auth-file caller, auth off).
ALTER TABLE playbook_runs ADD COLUMN github_actor TEXT;
ALTER TABLE playbook_runs ADD COLUMN github_repository TEXT;
ALTER TABLE playbook_runs ADD COLUMN github_repository_id TEXT;
ALTER TABLE playbook_runs ADD COLUMN github_run_id TEXT;
ALTER TABLE playbook_runs ADD COLUMN github_run_attempt TEXT;
ALTER TABLE playbook_runs ADD COLUMN github_sha TEXT;
ALTER TABLE playbook_runs ADD COLUMN github_workflow_ref TEXT;
ALTER TABLE playbook_runs ADD COLUMN github_ref TEXT;
ALTER TABLE playbook_runs ADD COLUMN github_environment TEXT;
ALTER TABLE playbook_runs ADD COLUMN github_job_workflow_ref TEXT;
