-- 0019: reserved for a change made on another branch; this file changes nothing.
SELECT 1;
