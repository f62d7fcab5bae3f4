-- 0006: GitHub webhook deliveries the control plane has processed (docs/approvals.md, "GitHub
-- App webhook"). One row per X-GitHub-Delivery id, written only after the delivery's handler
-- succeeded, so a redelivery of a processed delivery changes nothing and one whose handler
-- failed is processed again. Nothing of the payload is kept: the event and action only.
CREATE TABLE github_deliveries (
	delivery_id  TEXT COLLATE "C" PRIMARY KEY,
	event        TEXT COLLATE "C" NOT NULL,
	action       TEXT COLLATE "C" NOT NULL,
	processed_at TEXT COLLATE "C" NOT NULL
);
