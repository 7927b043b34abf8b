-- The webhook outbox (issue 49): a row per event and endpoint whose filter takes it, written in the
-- same transaction as the event. `endpoint` is the endpoint's key (a digest of its URL: no secret),
-- `state` is `pending`, `delivered` or `abandoned`; times are unix milliseconds. A session's rows
-- go to an endpoint in order: only the oldest pending one is ever tried.
CREATE TABLE webhook_outbox (
    endpoint        TEXT NOT NULL,
    session_id      TEXT NOT NULL REFERENCES sessions (id),
    sequence        INTEGER NOT NULL,
    event_type      TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending',
    PRIMARY KEY (endpoint, session_id, sequence)
) WITHOUT ROWID;
CREATE INDEX webhook_outbox_due ON webhook_outbox (state, next_attempt_at);

-- The delivery log: one row per try (no body, no secret), shown by GET /v1/webhooks/deliveries.
CREATE TABLE webhook_attempts (
    endpoint        TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    sequence        INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    at              INTEGER NOT NULL,
    status          INTEGER,
    error           TEXT,
    outcome         TEXT NOT NULL,
    next_attempt_at INTEGER,
    PRIMARY KEY (endpoint, session_id, sequence, attempt)
);
CREATE INDEX webhook_attempts_session ON webhook_attempts (session_id, at);
