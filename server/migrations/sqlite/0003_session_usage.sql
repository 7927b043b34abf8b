-- The tokens and cost of a session's turns, summed (JSON, as `SessionInfo.usage` serves it).
ALTER TABLE sessions ADD COLUMN usage TEXT;
