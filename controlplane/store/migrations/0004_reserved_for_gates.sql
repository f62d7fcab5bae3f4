-- 0004: reserved for the gate-policy migration of helper "gates" (issue 7, item 4). This
-- placeholder only keeps the version numbers contiguous on the oidc branch; the gates
-- branch's 0004_*.sql replaces it when both are merged (delete this file then).
SELECT 1;
