-- 0010: the playbook projection (docs/spec/playbooks.md, "Table playbook_runs").
-- active_nodes: a playbook run's active nodes (started and not finished; a node waiting at an
-- approval gate stays active) as a JSON array of {"node": id, "index": step_index, "gate":
-- bool} in step_index order; current_node holds their ids joined by "," (the specification's
-- column, NULL when none). "gate" is true while the node's gate is open (gate_opened without
-- gate_decided): the run is paused while any is. '[]' for runbook runs, which keep current_node
-- = the step name.
ALTER TABLE playbook_runs ADD COLUMN active_nodes TEXT COLLATE "C" NOT NULL DEFAULT '[]' CHECK ((active_nodes::jsonb IS NOT NULL));
CREATE INDEX playbook_runs_by_kind ON playbook_runs (kind, started_at DESC, run_id DESC);

-- policy_json: what the auto-pass policy decided at a playbook approval node
-- (docs/decisions/auto-pass-policy.md), a JSON object {"auto_passed", "rule", "action",
-- "reason", "shadow"}; NULL when no policy ran (runbook confirm steps).
ALTER TABLE playbook_approvals ADD COLUMN policy_json TEXT COLLATE "C" CHECK (policy_json IS NULL OR (policy_json::jsonb IS NOT NULL));
