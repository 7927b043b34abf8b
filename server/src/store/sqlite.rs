//! [`SqliteStore`]: sessions and events in one SQLite file (the default store).
//!
//! rusqlite rather than sqlx: the store is one file written by one writer, which is what a
//! dedicated thread holding one connection does best. Every write goes to that thread; whatever
//! writes wait when it is free are committed together in one transaction (batched writes: many
//! sessions streaming at once cost one commit, not one each), and each caller is answered once
//! its write is committed. Reads use a second connection (WAL lets it read while the writer
//! writes) on tokio's blocking pool. `synchronous=NORMAL` in WAL mode: a committed write survives
//! the process being killed (SIGKILL), though not a power loss.
//!
//! One file, one server: the store holds an exclusive lock (`flock`) on a file beside the
//! database (`<file>.lock`, holding the holder's pid) for as long as it is open, and a second
//! store opening the same file is refused with [`StoreError::Locked`] naming that pid. A second
//! server on the file would otherwise take over sessions the first still runs.

use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use super::tokens::{TokenRecord, TokenStore};

use super::outbox::{
    self, now_ms, AttemptOutcome, Delivery, DeliveryAttempt, OutboxRules, SharedRules, WebhookEvent,
};
use super::{
    unix_now, ProbeError, SessionRecord, SessionState, SessionUpdate, Store, StoreError,
    StoredChain, StoredDelta, StoredEvent, StoredSnapshot,
};

/// The migrations, in order; `PRAGMA user_version` says how many a database has had.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/sqlite/0001_sessions_and_events.sql"),
    include_str!("../../migrations/sqlite/0002_session_owner.sql"),
    include_str!("../../migrations/sqlite/0003_session_usage.sql"),
    include_str!("../../migrations/sqlite/0004_session_continuity.sql"),
    include_str!("../../migrations/sqlite/0005_tenants_and_tokens.sql"),
    include_str!("../../migrations/sqlite/0006_webhook_outbox.sql"),
    include_str!("../../migrations/sqlite/0007_snapshot_deltas.sql"),
];

/// The most writes committed in one transaction.
const MAX_BATCH: usize = 512;

/// A store in one SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    writes: mpsc::Sender<Write>,
    reader: Arc<Mutex<Connection>>,
    /// The server using the file (its heartbeat): the only one that can, while the lock is held.
    server: Mutex<Option<String>>,
    /// The scoped tokens, on a connection of their own (`agent-api token` writes them beside
    /// the server).
    tokens: SqliteTokens,
    /// What the outbox takes (shared with the writer), once webhooks are configured.
    outbox: SharedRules,
    /// The exclusive lock on `<file>.lock`, released when the store is dropped.
    _lock: std::fs::File,
}

type Reply = oneshot::Sender<Result<(), StoreError>>;

enum Write {
    Create(Box<SessionRecord>, Reply),
    Append(String, Vec<StoredEvent>, Reply),
    Native(String, String, Reply),
    Ended(String, Option<String>, Reply),
    Usage(String, String, Reply),
    Mode(String, String, Reply),
    /// A readiness probe: a write that changes nothing, in the writer's own transaction.
    Probe(Reply),
    AppendOwned(String, String, Vec<StoredEvent>, Reply),
    Claim(String, String, Option<String>, Reply),
    Update(String, String, SessionUpdate, Reply),
    Snapshot(String, String, StoredSnapshot, Reply),
    SnapshotDelta(String, String, StoredDelta, Reply),
    /// A try to deliver an outbox row.
    Attempt(Box<DeliveryAttempt>, Reply),
}

fn backend(error: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(error.to_string())
}

fn connect(path: &std::path::Path) -> Result<Connection, StoreError> {
    let connection = Connection::open(path)
        .map_err(|e| StoreError::Backend(format!("cannot open {}: {e}", path.display())))?;
    connection
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(backend)?;
    connection
        .pragma_update(None, "journal_mode", "WAL")
        .map_err(backend)?;
    connection
        .pragma_update(None, "synchronous", "NORMAL")
        .map_err(backend)?;
    connection
        .pragma_update(None, "foreign_keys", "ON")
        .map_err(backend)?;
    Ok(connection)
}

fn migrate(connection: &mut Connection) -> Result<(), StoreError> {
    let applied: usize = connection
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(backend)?;
    if applied > MIGRATIONS.len() {
        return Err(StoreError::Backend(format!(
            "the database has {applied} migrations, this server knows {}: it was written by a newer agent-api",
            MIGRATIONS.len()
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        let tx = connection.transaction().map_err(backend)?;
        tx.execute_batch(sql).map_err(backend)?;
        tx.pragma_update(None, "user_version", index + 1)
            .map_err(backend)?;
        tx.commit().map_err(backend)?;
    }
    Ok(())
}

impl SqliteStore {
    /// Opens (creating it and its directory when missing) and migrates the database at `path`.
    pub async fn open(path: PathBuf) -> Result<Self, StoreError> {
        tokio::task::spawn_blocking(move || {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                crate::private::create_dirs(dir).map_err(|e| {
                    StoreError::Backend(format!("cannot create {}: {e}", dir.display()))
                })?;
            }
            let lock = lock_file(&path)?;
            // The transcripts are the operator's: 0600 before SQLite writes a byte (its WAL and
            // shared-memory files take the database's mode), and again for a store made before.
            let private = |e: std::io::Error| {
                StoreError::Backend(format!("cannot make {} private: {e}", path.display()))
            };
            crate::private::private_file(&path).map_err(private)?;
            let mut writer = connect(&path)?;
            migrate(&mut writer)?;
            let reader = connect(&path)?;
            let tokens = SqliteTokens {
                connection: Arc::new(Mutex::new(connect(&path)?)),
            };
            let siblings: Vec<PathBuf> = ["-wal", "-shm", "-journal"]
                .iter()
                .map(|suffix| {
                    let mut name = path.clone().into_os_string();
                    name.push(suffix);
                    PathBuf::from(name)
                })
                .collect();
            crate::private::private_if_there(siblings.iter().map(PathBuf::as_path))
                .map_err(private)?;
            let (writes, queue) = mpsc::channel();
            let outbox = SharedRules::default();
            let rules = outbox.clone();
            std::thread::Builder::new()
                .name("agent-api-store".into())
                .spawn(move || write_loop(writer, queue, &rules))
                .map_err(|e| {
                    StoreError::Backend(format!("cannot start the store's writer: {e}"))
                })?;
            Ok(Self {
                writes,
                reader: Arc::new(Mutex::new(reader)),
                server: Mutex::new(None),
                tokens,
                outbox,
                _lock: lock,
            })
        })
        .await
        .map_err(backend)?
    }

    async fn write(&self, make: impl FnOnce(Reply) -> Write) -> Result<(), StoreError> {
        let (reply, done) = oneshot::channel();
        self.writes
            .send(make(reply))
            .map_err(|_| StoreError::Backend("the store's writer stopped".into()))?;
        done.await
            .unwrap_or_else(|_| Err(StoreError::Backend("the store's writer stopped".into())))
    }

    async fn read<T: Send + 'static>(
        &self,
        query: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || {
            query(&reader.lock().unwrap_or_else(|p| p.into_inner()))
        })
        .await
        .map_err(backend)?
    }
}

/// Takes the exclusive lock of the database at `path` (on `<file>.lock`, created 0600), or
/// refuses naming the process holding it.
fn lock_file(path: &std::path::Path) -> Result<std::fs::File, StoreError> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = std::path::PathBuf::from(name);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|e| StoreError::Backend(format!("cannot open {}: {e}", lock_path.display())))?;
    if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let by = match holder.trim().parse::<u32>() {
            Ok(pid) => format!("process {pid}"),
            Err(_) => "another process".into(),
        };
        return Err(StoreError::Locked(format!(
            "{} is in use by another agent-api server ({by}): one SQLite file takes one server; stop that one, or give this one another --store (PostgreSQL for several servers)",
            path.display()
        )));
    }
    // The holder's pid, for the refusal above (advice only: the lock is what counts).
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = write!(file, "{}", std::process::id());
    Ok(file)
}

/// The writer thread: takes every write waiting, commits them in one transaction (each in its
/// own savepoint, so one refused write does not undo the others), then answers each.
fn write_loop(mut connection: Connection, queue: mpsc::Receiver<Write>, outbox: &SharedRules) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(write) => batch.push(write),
                Err(_) => break,
            }
        }
        let mut results = Vec::with_capacity(batch.len());
        let committed = (|| {
            // Takes the write lock at once (waiting on it as busy_timeout says): a transaction
            // begun as a reader (a create reads before it inserts) cannot write once the tokens'
            // connection or `agent-api token` committed meanwhile, and SQLite refuses that at
            // once ("database is locked"), without waiting.
            let mut tx = connection
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(backend)?;
            for write in &batch {
                let mut savepoint = tx.savepoint().map_err(backend)?;
                let result = apply(&savepoint, write, outbox);
                if result.is_ok() {
                    savepoint.commit().map_err(backend)?;
                } else {
                    savepoint.rollback().map_err(backend)?;
                }
                results.push(result);
            }
            tx.commit().map_err(backend)
        })();
        for (index, write) in batch.into_iter().enumerate() {
            let result = match &committed {
                Ok(()) => results
                    .get_mut(index)
                    .map_or(Ok(()), |r| std::mem::replace(r, Ok(()))),
                Err(error) => Err(StoreError::Backend(error.to_string())),
            };
            let (Write::Create(_, reply)
            | Write::Append(_, _, reply)
            | Write::Native(_, _, reply)
            | Write::Ended(_, _, reply)
            | Write::Usage(_, _, reply)
            | Write::Mode(_, _, reply)
            | Write::Probe(reply)
            | Write::AppendOwned(_, _, _, reply)
            | Write::Claim(_, _, _, reply)
            | Write::Update(_, _, _, reply)
            | Write::Snapshot(_, _, _, reply)
            | Write::SnapshotDelta(_, _, _, reply)
            | Write::Attempt(_, reply)) = write;
            let _ = reply.send(result);
        }
    }
}

fn apply(
    tx: &rusqlite::Savepoint<'_>,
    write: &Write,
    outbox: &SharedRules,
) -> Result<(), StoreError> {
    match write {
        // Matches no row, yet SQLite takes the write lock for it: refused when it cannot write.
        Write::Probe(_) => {
            tx.execute("UPDATE sessions SET id = id WHERE 0", [])
                .map_err(backend)?;
        }
        Write::Create(r, _) => {
            let exists = tx
                .query_row("SELECT 1 FROM sessions WHERE id = ?1", [&r.id], |_| Ok(()))
                .optional()
                .map_err(backend)?;
            if exists.is_some() {
                return Err(StoreError::Duplicate(r.id.clone()));
            }
            tx.execute(
                "INSERT INTO sessions (id, agent, agent_mode, permission_mode, model, variant, native_session_id, ended, end_error, event_count, owner, settings, working_dir, state, active_at, tenant)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10, ?11, ?12, ?13, ?14, ?15)",
                params![r.id, r.agent, r.agent_mode, r.permission_mode, r.model, r.variant, r.native_session_id, r.ended, r.end_error, r.owner, r.settings, r.working_dir, r.state.as_str(), unix_now(), r.tenant],
            )
            .map_err(backend)?;
        }
        Write::AppendOwned(session, owner, events, _) => {
            check_owner(tx, session, owner)?;
            tx.execute(
                "UPDATE sessions SET active_at = ?2 WHERE id = ?1",
                params![session, unix_now()],
            )
            .map_err(backend)?;
            append(tx, session, events)?;
            enqueue(tx, outbox, session, events)?;
        }
        Write::Claim(id, owner, from, _) => {
            let rows = tx
                .execute(
                    "UPDATE sessions SET owner = ?2, state = 'live', active_at = ?4 WHERE id = ?1 AND owner IS ?3",
                    params![id, owner, from, unix_now()],
                )
                .map_err(backend)?;
            if rows == 0 {
                let now: Option<Option<String>> = tx
                    .query_row("SELECT owner FROM sessions WHERE id = ?1", [id], |row| {
                        row.get(0)
                    })
                    .optional()
                    .map_err(backend)?;
                return Err(match now {
                    None => StoreError::NotFound(id.clone()),
                    Some(owner) => StoreError::NotOwner {
                        session: id.clone(),
                        owner: owner.unwrap_or_default(),
                    },
                });
            }
        }
        Write::Update(id, owner, update, _) => {
            check_owner(tx, id, owner)?;
            if let Some(state) = update.state {
                tx.execute(
                    "UPDATE sessions SET state = ?2 WHERE id = ?1",
                    params![id, state.as_str()],
                )
                .map_err(backend)?;
            }
            if let Some((turns, open)) = update.turns {
                tx.execute(
                    "UPDATE sessions SET turns = ?2, turn_open = ?3, active_at = ?4 WHERE id = ?1",
                    params![id, turns, open, unix_now()],
                )
                .map_err(backend)?;
            }
            if let Some(how) = &update.resumed_how {
                tx.execute(
                    "UPDATE sessions SET resumed_how = ?2 WHERE id = ?1",
                    params![id, how],
                )
                .map_err(backend)?;
            }
        }
        Write::Snapshot(id, owner, snapshot, _) => {
            check_owner(tx, id, owner)?;
            tx.execute("DELETE FROM snapshot_deltas WHERE session_id = ?1", [id])
                .map_err(backend)?;
            tx.execute(
                "INSERT INTO snapshots (session_id, turn, bytes, written_at, deltas) VALUES (?1, ?2, ?3, ?4, 0)
                 ON CONFLICT (session_id) DO UPDATE SET turn = excluded.turn, bytes = excluded.bytes, written_at = excluded.written_at, deltas = 0",
                params![id, snapshot.turn, snapshot.bytes, unix_now()],
            )
            .map_err(backend)?;
        }
        Write::SnapshotDelta(id, owner, delta, _) => {
            check_owner(tx, id, owner)?;
            let kept: Option<u64> = tx
                .query_row(
                    "SELECT deltas FROM snapshots WHERE session_id = ?1",
                    [id],
                    |row| row.get(0),
                )
                .optional()
                .map_err(backend)?;
            if kept.map(|k| k + 1) != Some(delta.seq) {
                return Err(StoreError::SnapshotOutOfOrder {
                    session: id.clone(),
                    kept: kept.unwrap_or(0),
                    got: delta.seq,
                });
            }
            tx.execute(
                "INSERT INTO snapshot_deltas (session_id, seq, turn, bytes, written_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, delta.seq, delta.turn, delta.bytes, unix_now()],
            )
            .map_err(backend)?;
            tx.execute(
                "UPDATE snapshots SET turn = ?2, deltas = ?3, written_at = ?4 WHERE session_id = ?1",
                params![id, delta.turn, delta.seq, unix_now()],
            )
            .map_err(backend)?;
        }
        Write::Append(session, events, _) => {
            append(tx, session, events)?;
            enqueue(tx, outbox, session, events)?;
        }
        Write::Attempt(attempt, _) => record_attempt(tx, attempt)?,
        Write::Native(id, native, _) => {
            updated(
                tx.execute(
                    "UPDATE sessions SET native_session_id = ?2 WHERE id = ?1",
                    params![id, native],
                ),
                id,
            )?;
        }
        Write::Ended(id, error, _) => {
            updated(
                tx.execute(
                    "UPDATE sessions SET ended = 1, end_error = ?2 WHERE id = ?1",
                    params![id, error],
                ),
                id,
            )?;
        }
        Write::Usage(id, usage, _) => {
            updated(
                tx.execute(
                    "UPDATE sessions SET usage = ?2 WHERE id = ?1",
                    params![id, usage],
                ),
                id,
            )?;
        }
        Write::Mode(id, mode, _) => {
            updated(
                tx.execute(
                    "UPDATE sessions SET agent_mode = ?2 WHERE id = ?1",
                    params![id, mode],
                ),
                id,
            )?;
        }
    }
    Ok(())
}

/// Appends `events` to `session`, following its last sequence.
fn append(
    tx: &rusqlite::Savepoint<'_>,
    session: &String,
    events: &[StoredEvent],
) -> Result<(), StoreError> {
    let last: Option<u64> = tx
        .query_row(
            "SELECT event_count FROM sessions WHERE id = ?1",
            [session],
            |row| row.get(0),
        )
        .optional()
        .map_err(backend)?;
    let mut last = last.ok_or_else(|| StoreError::NotFound(session.clone()))?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO events (session_id, sequence, event, raw) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(backend)?;
    for event in events {
        if event.sequence != last + 1 {
            return Err(StoreError::OutOfOrder {
                session: session.clone(),
                last,
                got: event.sequence,
            });
        }
        insert
            .execute(params![
                session,
                event.sequence,
                &*event.json,
                event.raw.as_deref()
            ])
            .map_err(backend)?;
        last = event.sequence;
    }
    tx.execute(
        "UPDATE sessions SET event_count = ?2 WHERE id = ?1",
        params![session, last],
    )
    .map_err(backend)?;
    Ok(())
}

/// Puts the outbox rows `events` make (once webhooks are configured) in the append's transaction.
fn enqueue(
    tx: &rusqlite::Savepoint<'_>,
    outbox: &SharedRules,
    session: &str,
    events: &[StoredEvent],
) -> Result<(), StoreError> {
    let Some(rules) = outbox::rules(outbox) else {
        return Ok(());
    };
    let entries = rules.entries(events);
    if entries.is_empty() {
        return Ok(());
    }
    let now = now_ms();
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO webhook_outbox (endpoint, session_id, sequence, event_type, created_at, next_attempt_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT DO NOTHING",
        )
        .map_err(backend)?;
    for entry in entries {
        insert
            .execute(params![
                entry.endpoint,
                session,
                entry.sequence,
                entry.event.as_str(),
                now
            ])
            .map_err(backend)?;
    }
    Ok(())
}

/// Records a try: the outbox row's state and next try, and a row of the delivery log.
fn record_attempt(
    tx: &rusqlite::Savepoint<'_>,
    attempt: &DeliveryAttempt,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE webhook_outbox SET attempts = ?4, state = ?5, next_attempt_at = COALESCE(?6, next_attempt_at)
         WHERE endpoint = ?1 AND session_id = ?2 AND sequence = ?3",
        params![
            attempt.endpoint,
            attempt.session,
            attempt.sequence,
            attempt.attempt,
            attempt.outcome.row_state(),
            attempt.next_attempt_ms
        ],
    )
    .map_err(backend)?;
    tx.execute(
        "INSERT INTO webhook_attempts (endpoint, session_id, sequence, attempt, event_id, event_type, at, status, error, outcome, next_attempt_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT DO NOTHING",
        params![
            attempt.endpoint,
            attempt.session,
            attempt.sequence,
            attempt.attempt,
            attempt.event_id,
            attempt.event.as_str(),
            attempt.at_ms,
            attempt.status,
            attempt.error,
            attempt.outcome.as_str(),
            attempt.next_attempt_ms
        ],
    )
    .map_err(backend)?;
    Ok(())
}

/// A row of the delivery log.
fn attempt_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<DeliveryAttempt> {
    Ok(DeliveryAttempt {
        endpoint: row.get(0)?,
        session: row.get(1)?,
        sequence: row.get(2)?,
        attempt: row.get(3)?,
        event_id: row.get(4)?,
        event: WebhookEvent::parse(&row.get::<_, String>(5)?).unwrap_or(WebhookEvent::Error),
        at_ms: row.get(6)?,
        status: row.get(7)?,
        error: row.get(8)?,
        outcome: AttemptOutcome::parse(&row.get::<_, String>(9)?),
        next_attempt_ms: row.get(10)?,
    })
}

/// [`StoreError::NotOwner`] unless `owner` owns `session` ([`StoreError::NotFound`]: no such session).
fn check_owner(tx: &rusqlite::Savepoint<'_>, session: &str, owner: &str) -> Result<(), StoreError> {
    let now: Option<Option<String>> = tx
        .query_row(
            "SELECT owner FROM sessions WHERE id = ?1",
            [session],
            |row| row.get(0),
        )
        .optional()
        .map_err(backend)?;
    match now {
        None => Err(StoreError::NotFound(session.into())),
        Some(Some(now)) if now == owner => Ok(()),
        Some(now) => Err(StoreError::NotOwner {
            session: session.into(),
            owner: now.unwrap_or_default(),
        }),
    }
}

fn updated(rows: rusqlite::Result<usize>, id: &str) -> Result<(), StoreError> {
    match rows.map_err(backend)? {
        0 => Err(StoreError::NotFound(id.into())),
        _ => Ok(()),
    }
}

const SESSION_COLUMNS: &str =
    "id, agent, agent_mode, permission_mode, model, variant, native_session_id, ended, end_error, event_count, owner, usage, settings, working_dir, state, turns, turn_open, active_at, resumed_how, (SELECT turn FROM snapshots WHERE snapshots.session_id = sessions.id), tenant";

fn session_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        id: row.get(0)?,
        agent: row.get(1)?,
        agent_mode: row.get(2)?,
        permission_mode: row.get(3)?,
        model: row.get(4)?,
        variant: row.get(5)?,
        native_session_id: row.get(6)?,
        ended: row.get(7)?,
        end_error: row.get(8)?,
        event_count: row.get(9)?,
        owner: row.get(10)?,
        usage: row.get(11)?,
        settings: row.get(12)?,
        working_dir: row.get(13)?,
        state: SessionState::parse(&row.get::<_, String>(14)?),
        turns: row.get(15)?,
        turn_open: row.get(16)?,
        active_at: row.get(17)?,
        resumed_how: row.get(18)?,
        snapshot_turn: row.get(19)?,
        tenant: row.get(20)?,
    })
}

/// The scoped tokens of a SQLite file, on a connection of their own: the server's store holds
/// one, and `agent-api token` opens one beside a running server (without its lock: each token
/// write is one short transaction, which SQLite serializes with the server's writer).
#[derive(Debug, Clone)]
pub(crate) struct SqliteTokens {
    connection: Arc<Mutex<Connection>>,
}

const TOKEN_COLUMNS: &str = "id, tenant, scope, hash, created_at, last_used_at, revoked_at";

fn token_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(TokenRecord, String)> {
    Ok((
        TokenRecord {
            id: row.get(0)?,
            tenant: row.get(1)?,
            scope: super::tokens::Scope::Read,
            hash: row.get(3)?,
            created_at: row.get(4)?,
            last_used_at: row.get(5)?,
            revoked_at: row.get(6)?,
        },
        row.get(2)?,
    ))
}

/// A token read back, its scope parsed (an unknown one refused, never widened).
fn token_scope((mut token, scope): (TokenRecord, String)) -> Result<TokenRecord, StoreError> {
    token.scope = super::tokens::Scope::parse(&scope).map_err(backend)?;
    Ok(token)
}

impl SqliteTokens {
    /// Opens (creating and migrating it when needed) the database at `path` for its tokens.
    pub(crate) async fn open(path: PathBuf) -> Result<Self, StoreError> {
        tokio::task::spawn_blocking(move || {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                crate::private::create_dirs(dir).map_err(|e| {
                    StoreError::Backend(format!("cannot create {}: {e}", dir.display()))
                })?;
            }
            crate::private::private_file(&path).map_err(|e| {
                StoreError::Backend(format!("cannot make {} private: {e}", path.display()))
            })?;
            let mut connection = connect(&path)?;
            migrate(&mut connection)?;
            Ok(Self {
                connection: Arc::new(Mutex::new(connection)),
            })
        })
        .await
        .map_err(backend)?
    }

    async fn run<T: Send + 'static>(
        &self,
        query: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let connection = self.connection.clone();
        tokio::task::spawn_blocking(move || {
            query(&connection.lock().unwrap_or_else(|p| p.into_inner()))
        })
        .await
        .map_err(backend)?
    }
}

#[async_trait]
impl TokenStore for SqliteTokens {
    async fn create_token(&self, t: TokenRecord) -> Result<(), StoreError> {
        self.run(move |db| {
            let inserted = db
                .execute(
                    &format!("INSERT OR IGNORE INTO tokens ({TOKEN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                    params![t.id, t.tenant, t.scope.as_str(), t.hash, t.created_at, t.last_used_at, t.revoked_at],
                )
                .map_err(backend)?;
            match inserted {
                0 => Err(StoreError::Duplicate(t.id)),
                _ => Ok(()),
            }
        })
        .await
    }

    async fn token(&self, id: &str) -> Result<Option<TokenRecord>, StoreError> {
        let id = id.to_string();
        self.run(move |db| {
            db.prepare_cached(&format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE id = ?1"))
                .and_then(|mut query| query.query_row([&id], token_row).optional())
                .map_err(backend)?
                .map(token_scope)
                .transpose()
        })
        .await
    }

    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        self.run(|db| {
            let mut query = db
                .prepare(&format!(
                    "SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created_at, id"
                ))
                .map_err(backend)?;
            let rows = query.query_map([], token_row).map_err(backend)?;
            rows.map(|row| row.map_err(backend).and_then(token_scope))
                .collect()
        })
        .await
    }

    async fn revoke_token(&self, id: &str, at: i64) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.run(move |db| {
            db.execute(
                "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
                params![id, at],
            )
            .map(|rows| rows > 0)
            .map_err(backend)
        })
        .await
    }

    async fn token_used(&self, id: &str, at: i64) -> Result<(), StoreError> {
        let id = id.to_string();
        self.run(move |db| {
            db.execute(
                "UPDATE tokens SET last_used_at = ?2 WHERE id = ?1",
                params![id, at],
            )
            .map(|_| ())
            .map_err(backend)
        })
        .await
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn token_store(&self) -> Option<&dyn TokenStore> {
        Some(&self.tokens)
    }

    async fn create_session(&self, record: SessionRecord) -> Result<(), StoreError> {
        self.write(|reply| Write::Create(Box::new(record), reply))
            .await
    }

    async fn append(&self, session: &str, events: Vec<StoredEvent>) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        self.write(|reply| Write::Append(session.into(), events, reply))
            .await
    }

    async fn events(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let session = session.to_string();
        self.read(move |db| {
            let known = db.query_row("SELECT 1 FROM sessions WHERE id = ?1", [&session], |_| Ok(())).optional().map_err(backend)?;
            if known.is_none() {
                return Err(StoreError::NotFound(session));
            }
            let mut query = db
                .prepare_cached(
                    "SELECT sequence, event, raw FROM events WHERE session_id = ?1 AND sequence > ?2 ORDER BY sequence LIMIT ?3",
                )
                .map_err(backend)?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let after = i64::try_from(after).unwrap_or(i64::MAX);
            let rows = query
                .query_map(params![session, after, limit], |row| {
                    Ok(StoredEvent {
                        sequence: row.get(0)?,
                        json: row.get::<_, String>(1)?.into(),
                        raw: row.get::<_, Option<String>>(2)?.map(Into::into),
                    })
                })
                .map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            db.query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"),
                [&id],
                session_row,
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.read(|db| {
            let mut query = db
                .prepare_cached(&format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions ORDER BY rowid"
                ))
                .map_err(backend)?;
            let rows = query.query_map([], session_row).map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn set_native_session_id(&self, id: &str, native: &str) -> Result<(), StoreError> {
        self.write(|reply| Write::Native(id.into(), native.into(), reply))
            .await
    }

    async fn mark_ended(&self, id: &str, error: Option<&str>) -> Result<(), StoreError> {
        self.write(|reply| Write::Ended(id.into(), error.map(Into::into), reply))
            .await
    }

    async fn set_usage(&self, id: &str, usage: &str) -> Result<(), StoreError> {
        self.write(|reply| Write::Usage(id.into(), usage.into(), reply))
            .await
    }

    async fn set_agent_mode(&self, id: &str, mode: &str) -> Result<(), StoreError> {
        self.write(|reply| Write::Mode(id.into(), mode.into(), reply))
            .await
    }

    async fn probe(&self) -> Result<(), ProbeError> {
        let applied: u64 = self
            .read(|c| {
                c.pragma_query_value(None, "user_version", |row| row.get(0))
                    .map_err(backend)
            })
            .await
            .map_err(|e| ProbeError::Unreachable(e.to_string()))?;
        let known = MIGRATIONS.len() as u64;
        if applied != known {
            return Err(ProbeError::Migrations { applied, known });
        }
        self.write(Write::Probe)
            .await
            .map_err(|e| ProbeError::ReadOnly(e.to_string()))
    }

    async fn append_owned(
        &self,
        session: &str,
        owner: &str,
        events: Vec<StoredEvent>,
    ) -> Result<(), StoreError> {
        self.write(|reply| Write::AppendOwned(session.into(), owner.into(), events, reply))
            .await
    }

    async fn claim(&self, id: &str, owner: &str, from: Option<&str>) -> Result<(), StoreError> {
        self.write(|reply| Write::Claim(id.into(), owner.into(), from.map(Into::into), reply))
            .await
    }

    async fn update(&self, id: &str, owner: &str, update: SessionUpdate) -> Result<(), StoreError> {
        self.write(|reply| Write::Update(id.into(), owner.into(), update, reply))
            .await
    }

    async fn put_snapshot(
        &self,
        id: &str,
        owner: &str,
        snapshot: StoredSnapshot,
    ) -> Result<(), StoreError> {
        self.write(|reply| Write::Snapshot(id.into(), owner.into(), snapshot, reply))
            .await
    }

    async fn put_snapshot_delta(
        &self,
        id: &str,
        owner: &str,
        delta: StoredDelta,
    ) -> Result<(), StoreError> {
        self.write(|reply| Write::SnapshotDelta(id.into(), owner.into(), delta, reply))
            .await
    }

    async fn snapshot(&self, id: &str) -> Result<Option<StoredChain>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            // One statement: the base and its deltas as they stood at one moment.
            let mut query = db
                .prepare_cached(
                    "SELECT 0, turn, bytes, deltas FROM snapshots WHERE session_id = ?1
                     UNION ALL
                     SELECT seq, turn, bytes, 0 FROM snapshot_deltas WHERE session_id = ?1
                     ORDER BY 1",
                )
                .map_err(backend)?;
            let rows = query
                .query_map([&id], |row| {
                    Ok((
                        row.get::<_, u64>(0)?,
                        row.get::<_, u64>(1)?,
                        row.get::<_, Vec<u8>>(2)?,
                        row.get::<_, u64>(3)?,
                    ))
                })
                .map_err(backend)?;
            let rows = rows.collect::<Result<Vec<_>, _>>().map_err(backend)?;
            Ok(StoredChain::from_rows(rows))
        })
        .await
    }

    async fn heartbeat(&self, server: &str) -> Result<(), StoreError> {
        *self.server.lock().unwrap_or_else(|p| p.into_inner()) = Some(server.into());
        Ok(())
    }

    async fn server_alive(
        &self,
        server: &str,
        _lease: std::time::Duration,
    ) -> Result<bool, StoreError> {
        // The file's lock is held by this store: no other server runs on it.
        Ok(self
            .server
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_deref()
            == Some(server))
    }

    fn set_outbox(&self, rules: Arc<OutboxRules>) -> Result<(), StoreError> {
        outbox::install(&self.outbox, rules);
        Ok(())
    }

    async fn claim_deliveries(
        &self,
        _server: &str,
        endpoints: &[String],
        now_ms: i64,
        _lease: std::time::Duration,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        // One server holds the file (its lock), and its one worker finishes a batch before it
        // takes the next: a row is never taken twice, with no lease to keep.
        let endpoints = endpoints.to_vec();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT o.endpoint, o.session_id, s.agent, o.sequence, o.event_type, e.event, o.attempts
                     FROM webhook_outbox o
                     JOIN events e ON e.session_id = o.session_id AND e.sequence = o.sequence
                     JOIN sessions s ON s.id = o.session_id
                     WHERE o.endpoint = ?1 AND o.state = 'pending' AND o.next_attempt_at <= ?2
                       AND NOT EXISTS (SELECT 1 FROM webhook_outbox p WHERE p.endpoint = o.endpoint
                           AND p.session_id = o.session_id AND p.state = 'pending' AND p.sequence < o.sequence)
                     ORDER BY o.next_attempt_at, o.created_at LIMIT ?3",
                )
                .map_err(backend)?;
            let mut due = Vec::new();
            for endpoint in &endpoints {
                let rows = statement
                    .query_map(params![endpoint, now_ms, limit], |row| {
                        Ok(Delivery {
                            endpoint: row.get(0)?,
                            session: row.get(1)?,
                            agent: row.get(2)?,
                            sequence: row.get(3)?,
                            event: WebhookEvent::parse(&row.get::<_, String>(4)?)
                                .unwrap_or(WebhookEvent::Error),
                            json: row.get::<_, String>(5)?.into(),
                            attempts: row.get(6)?,
                        })
                    })
                    .map_err(backend)?;
                for row in rows {
                    due.push(row.map_err(backend)?);
                }
            }
            due.truncate(limit);
            Ok(due)
        })
        .await
    }

    async fn record_attempt(&self, attempt: DeliveryAttempt) -> Result<(), StoreError> {
        self.write(|reply| Write::Attempt(Box::new(attempt), reply))
            .await
    }

    async fn delivery_log(
        &self,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryAttempt>, StoreError> {
        let session = session.map(str::to_string);
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT endpoint, session_id, sequence, attempt, event_id, event_type, at, status, error, outcome, next_attempt_at
                     FROM webhook_attempts WHERE ?1 IS NULL OR session_id = ?1
                     ORDER BY at DESC, attempt DESC LIMIT ?2",
                )
                .map_err(backend)?;
            let rows = statement
                .query_map(params![session, limit], attempt_row)
                .map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }
}
