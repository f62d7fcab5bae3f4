-- 0019: key-check values of the control plane's approval secret (docs/tls.md, "Rotating the
-- approval secret"), so replicas that disagree on the secret are refused at start-up. name is
-- the secret's name ('approval'); current_check is HMAC-SHA256(secret, "rbook approval secret
-- check v1") of the secret that signs, in lowercase hex, never the secret; previous_check is the
-- same of the secret it replaced ('' before the first rotation); previous_retired is 1 once a
-- replica started without a previous secret after that rotation (the rotation is complete, and
-- a replica still signing with the previous secret is refused). updated_at is when the row last
-- changed.
CREATE TABLE secret_checks (
    name             TEXT NOT NULL PRIMARY KEY,
    current_check    TEXT NOT NULL CHECK (length(current_check) = 64),
    previous_check   TEXT NOT NULL DEFAULT '' CHECK (previous_check = '' OR length(previous_check) = 64),
    previous_retired INTEGER NOT NULL DEFAULT 0 CHECK (previous_retired IN (0, 1)),
    updated_at       TEXT NOT NULL
) STRICT;
