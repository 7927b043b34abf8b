-- A fleet of servers on one database (issue 48).
--
-- Fencing: `epoch` counts the claims of a session; every event its owner writes names the epoch it
-- holds (events.epoch), and the write is refused unless the session's owner and epoch are still
-- the writer's and the owner's lease (servers.heartbeat within the lease) has not run out. A
-- server that wakes after another claimed its session can never append to it.
ALTER TABLE sessions ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN epoch BIGINT;

-- Commands handed from the server a client asked to the one that runs the session (target), or
-- to any server with room (target NULL, taken with FOR UPDATE SKIP LOCKED): the request as the
-- client sent it, then the answer (status, body) the server that took it gave.
CREATE TABLE commands (
    id          BIGSERIAL PRIMARY KEY,
    target      TEXT,
    session_id  TEXT,
    method      TEXT NOT NULL,
    path        TEXT NOT NULL,
    body        BYTEA NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    taken_by    TEXT,
    taken_at    TIMESTAMPTZ,
    status      INTEGER,
    answer      BYTEA,
    answer_type TEXT,
    retry_after TEXT
);
CREATE INDEX commands_open ON commands (id) WHERE taken_by IS NULL;

-- Change notifications, ids and counts only: a session's new event count (and whether it ended),
-- a command's id when it is written, and again when it is answered. Sent at commit.
CREATE FUNCTION agent_api_notify_session() RETURNS trigger AS $$
BEGIN
    IF NEW.event_count IS DISTINCT FROM OLD.event_count OR NEW.ended IS DISTINCT FROM OLD.ended THEN
        PERFORM pg_notify('agent_api_events', NEW.event_count || ' ' || NEW.ended::INT || ' ' || NEW.id);
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER sessions_notify AFTER UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION agent_api_notify_session();

CREATE FUNCTION agent_api_notify_command() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('agent_api_commands', NEW.id::TEXT);
    ELSIF NEW.status IS NOT NULL AND OLD.status IS NULL THEN
        PERFORM pg_notify('agent_api_answers', NEW.id::TEXT);
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER commands_notify AFTER INSERT OR UPDATE ON commands
    FOR EACH ROW EXECUTE FUNCTION agent_api_notify_command();
