-- The sessions the server ran, in the order they were created (rowid), and their events.
CREATE TABLE sessions (
    id                TEXT PRIMARY KEY NOT NULL,
    agent             TEXT NOT NULL,
    agent_mode        TEXT NOT NULL,
    permission_mode   TEXT NOT NULL,
    model             TEXT,
    variant           TEXT,
    native_session_id TEXT,
    ended             INTEGER NOT NULL DEFAULT 0,
    end_error         TEXT,
    event_count       INTEGER NOT NULL DEFAULT 0
);

-- One row per event: its JSON with "raw":null last, and the raw payload apart (served on opt-in).
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    sequence   INTEGER NOT NULL,
    event      TEXT NOT NULL,
    raw        TEXT,
    PRIMARY KEY (session_id, sequence)
) WITHOUT ROWID;
