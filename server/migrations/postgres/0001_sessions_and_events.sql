-- The sessions the servers sharing this database ran, in the order they were created (position), and
-- their events. `owner` is the server (its --daemon-id) running a live session.
CREATE TABLE sessions (
    position          BIGSERIAL NOT NULL UNIQUE,
    id                TEXT PRIMARY KEY,
    agent             TEXT NOT NULL,
    agent_mode        TEXT NOT NULL,
    permission_mode   TEXT NOT NULL,
    model             TEXT,
    variant           TEXT,
    native_session_id TEXT,
    ended             BOOLEAN NOT NULL DEFAULT FALSE,
    end_error         TEXT,
    event_count       BIGINT NOT NULL DEFAULT 0,
    owner             TEXT
);

-- One row per event: its JSON with "raw":null last, and the raw payload apart (served on opt-in).
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    sequence   BIGINT NOT NULL,
    event      TEXT NOT NULL,
    raw        TEXT,
    PRIMARY KEY (session_id, sequence)
);
