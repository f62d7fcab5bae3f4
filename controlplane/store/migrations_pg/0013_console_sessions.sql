-- 0013: console sign-in sessions (docs/console-signin.md, "Sessions"). A row is one signed-in
-- person in a browser. id_hash is the hex SHA-256 of the session id the cookie carries; the
-- id itself is never stored, so a copy of the database signs nobody in. identity, role
-- ('approver' or 'viewer'), group_names (comma-separated) and github_login are what the auth
-- interceptor hands the RPC handlers, as for a bearer token. method is how the person signed
-- in ('oidc', 'github', 'token') and provider the configured provider id. expires_at is an
-- absolute end; revoked_at is set by sign-out. Expired and revoked rows are swept.
CREATE TABLE console_sessions (
    id_hash      TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    identity     TEXT COLLATE "C" NOT NULL,
    display_name TEXT COLLATE "C" NOT NULL DEFAULT '',
    role         TEXT COLLATE "C" NOT NULL CHECK (role IN ('approver', 'viewer')),
    group_names  TEXT COLLATE "C" NOT NULL DEFAULT '',
    github_login TEXT COLLATE "C" NOT NULL DEFAULT '',
    method       TEXT COLLATE "C" NOT NULL,
    provider     TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at   TEXT COLLATE "C" NOT NULL,
    expires_at   TEXT COLLATE "C" NOT NULL,
    revoked_at   TEXT COLLATE "C"
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
