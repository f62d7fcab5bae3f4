-- 0012: reserved for the run plan (placeholder until that migration is merged).
SELECT 1;
