-- 0017: reserved for the Slack channel, built on another branch; this no-op keeps the
-- versions contiguous until that branch lands, and is replaced by it then.
SELECT 1;
