-- 0015: reserved for the directory of people, built on another branch; this no-op keeps the
-- versions contiguous until that branch lands, and is replaced by it then.
SELECT 1;
