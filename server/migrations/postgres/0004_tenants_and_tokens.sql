-- Tenants and scoped tokens (issue 49): the tenant a session belongs to (NULL: none, seen only by
-- untenanted tokens), and the tokens, kept as the SHA-256 of the token, never the token.
ALTER TABLE sessions ADD COLUMN tenant TEXT;
CREATE INDEX sessions_tenant ON sessions (tenant);

CREATE TABLE tokens (
    id           TEXT PRIMARY KEY,
    tenant       TEXT,
    scope        TEXT NOT NULL,
    hash         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
