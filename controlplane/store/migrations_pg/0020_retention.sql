-- 0020: retention (docs/backup.md, "Retention"). Finished runs older than rbook serve's
-- --retention are deleted with every row about them. run_transitions stays append-only for
-- everything else: its delete trigger lets a row go only while its run is listed in
-- run_prunes, which the prune fills and empties inside its own transaction, so no committed
-- state ever holds a row there. playbook_runs_by_end lists the finished runs oldest end first;
-- notification_events_run finds a run's notification events (a prune checks and deletes them).
CREATE TABLE run_prunes (
    run_id TEXT COLLATE "C" PRIMARY KEY
);

CREATE FUNCTION run_transitions_delete_when_pruned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM run_prunes p WHERE p.run_id = OLD.run_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'run_transitions is append-only';
END;
$$;

DROP TRIGGER run_transitions_no_delete ON run_transitions;
CREATE TRIGGER run_transitions_no_delete BEFORE DELETE ON run_transitions
    FOR EACH ROW EXECUTE FUNCTION run_transitions_delete_when_pruned();

CREATE INDEX playbook_runs_by_end ON playbook_runs (completed_at, run_id)
    WHERE status IN ('failed', 'succeeded', 'cancelled');

CREATE INDEX notification_events_run ON notification_events (run_id);
