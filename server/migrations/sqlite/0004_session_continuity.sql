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
ALTER TABLE sessions ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN turn_open INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN active_at INTEGER;
ALTER TABLE sessions ADD COLUMN resumed_how TEXT;

-- The agent's own session state after a session's last turn (agent_api::SessionSnapshot's
-- bytes, opaque here), one per session, replaced after every turn.
CREATE TABLE snapshots (
    session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions (id),
    turn       INTEGER NOT NULL,
    bytes      BLOB NOT NULL,
    written_at INTEGER NOT NULL
);
