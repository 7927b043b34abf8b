-- Sessions that outlive their server (issue 47): what a server needs to bring one back.
-- settings: the creation's options (JSON), so that another server opens the agent the same way;
-- working_dir: where its agent worked; state: `live` (its owner holds the agent), `idle` (its owner
-- released the agent) or `stopped` (its owner stopped cleanly); turns and turn_open: the turns
-- started and whether one was running (a turn its server died in is closed as interrupted);
-- active_at: when it last took an event or a turn (unix seconds, for --session-idle-ttl);
-- resumed_how: `native` or `replay`, how it was last brought back.
ALTER TABLE sessions ADD COLUMN settings TEXT;
ALTER TABLE sessions ADD COLUMN working_dir TEXT;
ALTER TABLE sessions ADD COLUMN state TEXT NOT NULL DEFAULT 'live';
ALTER TABLE sessions ADD COLUMN turns BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN turn_open BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sessions ADD COLUMN active_at BIGINT;
ALTER TABLE sessions ADD COLUMN resumed_how TEXT;

-- The agent's own session state after a session's last turn (agent_api::SessionSnapshot's
-- bytes, opaque here), one per session, replaced after every turn.
CREATE TABLE snapshots (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id),
    turn       BIGINT NOT NULL,
    bytes      BYTEA NOT NULL,
    written_at BIGINT NOT NULL
);

-- The servers sharing this database, each renewing its heartbeat while it runs: a session whose
-- owner's heartbeat is older than the lease belongs to a server that is gone, and may be resumed
-- by another.
CREATE TABLE servers (
    id        TEXT PRIMARY KEY,
    heartbeat TIMESTAMPTZ NOT NULL
);
