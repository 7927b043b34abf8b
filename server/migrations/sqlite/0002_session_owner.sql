-- The server (its --daemon-id) that runs a live session: a server starting again ends only its own.
ALTER TABLE sessions ADD COLUMN owner TEXT;
