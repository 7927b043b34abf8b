-- Incremental snapshots (issue 47): a session's snapshot is a whole one (the `snapshots` row, its
-- base) and the deltas written on it since (agent_api::SnapshotDelta's bytes, opaque here), each
-- the new tail of the files that grew. `snapshots.turn` is the turn the newest of them was taken
-- after, and `snapshots.deltas` how many deltas follow the base (a reader checks it has them all).
-- A whole snapshot written again replaces the base and removes its deltas.
ALTER TABLE snapshots ADD COLUMN deltas INTEGER NOT NULL DEFAULT 0;

CREATE TABLE snapshot_deltas (
    session_id TEXT NOT NULL REFERENCES snapshots (session_id),
    seq        INTEGER NOT NULL,
    turn       INTEGER NOT NULL,
    bytes      BLOB NOT NULL,
    written_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
);
