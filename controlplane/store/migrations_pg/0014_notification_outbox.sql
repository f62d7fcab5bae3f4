-- 0014: the notification outbox (docs/notifications.md). notification_events holds one row
-- per event a gate or run change reports (gate opened, vote cast, gate decided, expired or
-- withdrawn, run finished, failed or cancelled), written in the transaction of that change.
-- event_id is stable (the kind and the gate or run it is about), so writing the same event
-- twice keeps one row and a receiver can de-duplicate on it. routed_at is set when the
-- control plane's delivery loop wrote the event's deliveries (one per channel its routes
-- chose). notification_deliveries is the per-receiver outbox: delivered at least once with
-- back-off (attempts, next_attempt_at; a claim moves next_attempt_at to the end of the
-- claimer's lease), then delivered_at or given_up_at. provider_message_id is what the
-- channel returned for the message (a chat message to update later), '' when nothing.
CREATE TABLE notification_events (
	event_id    TEXT COLLATE "C" PRIMARY KEY,
	kind        TEXT COLLATE "C" NOT NULL,
	run_id      TEXT COLLATE "C" NOT NULL,
	approval_id TEXT COLLATE "C" NOT NULL DEFAULT '',
	payload     TEXT COLLATE "C" NOT NULL,
	created_at  TEXT COLLATE "C" NOT NULL,
	routed_at   TEXT COLLATE "C"
);
CREATE INDEX notification_events_unrouted ON notification_events (created_at) WHERE routed_at IS NULL;
CREATE INDEX notification_events_gate ON notification_events (approval_id, kind) WHERE approval_id <> '';
CREATE TABLE notification_deliveries (
	event_id            TEXT COLLATE "C" NOT NULL REFERENCES notification_events (event_id),
	channel             TEXT COLLATE "C" NOT NULL,
	created_at          TEXT COLLATE "C" NOT NULL,
	attempts            BIGINT NOT NULL DEFAULT 0,
	next_attempt_at     TEXT COLLATE "C",
	last_error          TEXT COLLATE "C",
	delivered_at        TEXT COLLATE "C",
	given_up_at         TEXT COLLATE "C",
	given_up_reason     TEXT COLLATE "C",
	provider_message_id TEXT COLLATE "C" NOT NULL DEFAULT '',
	PRIMARY KEY (event_id, channel)
);
CREATE INDEX notification_deliveries_due ON notification_deliveries (channel, next_attempt_at)
	WHERE delivered_at IS NULL AND given_up_at IS NULL;
