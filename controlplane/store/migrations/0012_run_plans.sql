-- 0012: what a run executes, and the run listing's filters (docs/console-plan.md).
-- run_plans: the plan an executor sent with StartRun (RunPlan, protobuf-encoded), bound to the
-- plan digest it was loaded as. A run that resumes with another digest stores that digest's
-- plan beside the old one; GetRun returns only the plan of the run's current digest. At most
-- 1 MiB of plan per row (the server refuses more before it is written).
CREATE TABLE run_plans (
    run_id       TEXT NOT NULL REFERENCES playbook_runs (run_id),
    content_hash TEXT NOT NULL CHECK (length(content_hash) = 64),
    plan         BLOB NOT NULL,
    stored_at    TEXT NOT NULL,
    PRIMARY KEY (run_id, content_hash)
) STRICT;

-- ListRuns by starter and by repository (the verified job's, else the reported one,
-- compared without regard to case), newest first, keyset-paged like the other listings.
CREATE INDEX playbook_runs_by_starter ON playbook_runs (started_by, started_at DESC, run_id DESC);
CREATE INDEX playbook_runs_by_repository ON playbook_runs
    (lower(coalesce(github_repository, reported_repository)), started_at DESC, run_id DESC);
