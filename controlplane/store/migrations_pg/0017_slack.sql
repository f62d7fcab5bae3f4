-- 0017: Slack (docs/slack.md). slack_messages keeps, for each gate and configured Slack
-- channel, the message the control plane posted for it (Slack channel id and ts), so later
-- events update that message in place (chat.update) and the run's events reply in its
-- thread. slack_interactions keeps a hash of each signed interaction request Slack sent
-- (button presses, modal submissions) for a while, so a replayed request, on this replica or
-- another, changes nothing; rows older than the replay window are swept.
CREATE TABLE slack_messages (
	approval_id   TEXT COLLATE "C" NOT NULL,
	channel       TEXT COLLATE "C" NOT NULL,
	run_id        TEXT COLLATE "C" NOT NULL,
	slack_channel TEXT COLLATE "C" NOT NULL,
	ts            TEXT COLLATE "C" NOT NULL,
	created_at    TEXT COLLATE "C" NOT NULL,
	PRIMARY KEY (approval_id, channel)
);
CREATE INDEX slack_messages_run ON slack_messages (run_id, channel);
CREATE TABLE slack_interactions (
	request_hash TEXT COLLATE "C" PRIMARY KEY,
	received_at  TEXT COLLATE "C" NOT NULL
);
CREATE INDEX slack_interactions_received ON slack_interactions (received_at);
