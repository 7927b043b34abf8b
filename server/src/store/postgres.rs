//! [`PostgresStore`]: sessions and events in PostgreSQL (`--store postgres://…`), so that several
//! servers on several machines share one history.
//!
//! tokio-postgres, one connection: its queries are pipelined, so tasks writing for different
//! sessions do not wait for each other's round trips. An append is one statement (the events as
//! arrays, and the session's count moved from the last sequence to the new one), so it needs no
//! transaction and is refused whole when another writer got there first. A connection that broke
//! (the database restarted) is opened again at the next call. TLS: [`super::postgres_tls`].

use std::sync::Arc;

use async_trait::async_trait;
use tokio_postgres::{Client, NoTls, Row};

use super::pg_statements::PreparedClient;
use super::postgres_tls::{connect_error, Connector};

use super::outbox::{
    self, now_ms, AttemptOutcome, Delivery, DeliveryAttempt, OutboxRules, SharedRules, WebhookEvent,
};
use super::{
    unix_now, ProbeError, SessionRecord, SessionState, SessionUpdate, Store, StoreError,
    StoredChain, StoredDelta, StoredEvent, StoredSnapshot,
};

/// What fences an owner's append: the epoch it claimed and the lease its heartbeat holds.
#[derive(Clone, Copy)]
struct Fence {
    epoch: u64,
    lease: std::time::Duration,
}

/// The migrations, in order; the table `agent_api_migrations` holds those applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/postgres/0001_sessions_and_events.sql"),
    include_str!("../../migrations/postgres/0002_session_usage.sql"),
    include_str!("../../migrations/postgres/0003_session_continuity.sql"),
    include_str!("../../migrations/postgres/0004_tenants_and_tokens.sql"),
    include_str!("../../migrations/postgres/0005_webhook_outbox.sql"),
    include_str!("../../migrations/postgres/0006_fleet_leases_and_commands.sql"),
    include_str!("../../migrations/postgres/0007_snapshot_deltas.sql"),
];

/// Serializes migrations between servers starting at once (`pg_advisory_xact_lock`).
const MIGRATION_LOCK: i64 = 0x6167_656e_745f_6170;

/// A store in a PostgreSQL database.
pub struct PostgresStore {
    connector: Connector,
    client: tokio::sync::Mutex<Arc<PreparedClient>>,
    /// What the outbox takes, once webhooks are configured.
    outbox: SharedRules,
    /// The notifications of the connection that listens (`LISTEN`), to every receiver.
    pub(super) notices: tokio::sync::broadcast::Sender<super::Notice>,
    /// The task listening: stopped with the store.
    listener: tokio::task::AbortHandle,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: never shown.
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

pub(super) fn backend(error: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(error.to_string())
}

async fn connect(connector: &Connector) -> Result<Client, StoreError> {
    // Two connection types (plain, TLS): each is driven by a task of its own.
    fn drive<F>(connection: F)
    where
        F: std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
    {
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!("the PostgreSQL connection ended: {error}");
            }
        });
    }
    match &connector.tls {
        Some(tls) => {
            let (client, connection) = tokio_postgres::connect(&connector.url, tls.clone())
                .await
                .map_err(|e| connect_error(&e))?;
            drive(connection);
            Ok(client)
        }
        None => {
            let (client, connection) = tokio_postgres::connect(&connector.url, NoTls)
                .await
                .map_err(|e| connect_error(&e))?;
            drive(connection);
            Ok(client)
        }
    }
}

async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(backend)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(backend)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS agent_api_migrations (version INTEGER PRIMARY KEY)",
    )
    .await
    .map_err(backend)?;
    let applied: i64 = tx
        .query_one("SELECT COUNT(*) FROM agent_api_migrations", &[])
        .await
        .map_err(backend)?
        .get(0);
    let applied = usize::try_from(applied).unwrap_or(usize::MAX);
    if applied > MIGRATIONS.len() {
        return Err(StoreError::Backend(format!(
            "the database has {applied} migrations, this server knows {}: it was written by a newer agent-api",
            MIGRATIONS.len()
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.batch_execute(sql).await.map_err(backend)?;
        let version = i32::try_from(index + 1).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO agent_api_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(backend)?;
    }
    tx.commit().await.map_err(backend)
}

impl PostgresStore {
    /// Connects to the database at `url` and migrates it. The URL's `sslmode` and `sslrootcert`
    /// say how TLS is used (`spec/http-api.md`, The store); a TLS failure is [`StoreError::Tls`],
    /// TLS settings this server cannot honour [`StoreError::TlsSettings`].
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let connector = Connector::from_url(url)?;
        let mut client = connect(&connector).await?;
        migrate(&mut client).await?;
        let (notices, _) = tokio::sync::broadcast::channel(super::pg_notices::NOTICE_BUFFER);
        let listener = tokio::spawn(super::pg_notices::listen(url.to_string(), notices.clone()));
        Ok(Self {
            connector,
            client: tokio::sync::Mutex::new(Arc::new(PreparedClient::new(client))),
            outbox: SharedRules::default(),
            notices,
            listener: listener.abort_handle(),
        })
    }

    /// Runs `sql` on the session `id` with the one value `value`; [`StoreError::NotFound`] when no
    /// session has that id.
    async fn update_one(&self, sql: &str, id: &str, value: Option<&str>) -> Result<(), StoreError> {
        match self
            .client()
            .await?
            .execute(sql, &[&id, &value])
            .await
            .map_err(backend)?
        {
            0 => Err(StoreError::NotFound(id.into())),
            _ => Ok(()),
        }
    }

    /// The connection, opened again when it broke.
    pub(super) async fn client(&self) -> Result<Arc<PreparedClient>, StoreError> {
        let mut client = self.client.lock().await;
        if client.is_closed() {
            *client = Arc::new(PreparedClient::new(connect(&self.connector).await?));
        }
        Ok(client.clone())
    }
}

const SESSION_COLUMNS: &str =
    "id, agent, agent_mode, permission_mode, model, variant, native_session_id, ended, end_error, event_count, owner, usage, settings, working_dir, state, turns, turn_open, active_at, resumed_how, (SELECT turn FROM snapshots WHERE snapshots.session_id = sessions.id), tenant";

fn session_row(row: &Row) -> SessionRecord {
    SessionRecord {
        id: row.get(0),
        agent: row.get(1),
        agent_mode: row.get(2),
        permission_mode: row.get(3),
        model: row.get(4),
        variant: row.get(5),
        native_session_id: row.get(6),
        ended: row.get(7),
        end_error: row.get(8),
        event_count: u64::try_from(row.get::<_, i64>(9)).unwrap_or(0),
        owner: row.get(10),
        usage: row.get(11),
        settings: row.get(12),
        working_dir: row.get(13),
        state: SessionState::parse(row.get::<_, &str>(14)),
        turns: u64::try_from(row.get::<_, i64>(15)).unwrap_or(0),
        turn_open: row.get(16),
        active_at: row.get(17),
        resumed_how: row.get(18),
        snapshot_turn: row
            .get::<_, Option<i64>>(19)
            .and_then(|t| u64::try_from(t).ok()),
        tenant: row.get(20),
    }
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl PostgresStore {
    /// Why a write on the session `id` by its owner changed no row: no such session, or another
    /// owner.
    async fn why_not_owned(&self, client: &Client, id: &str) -> StoreError {
        match client
            .query_opt("SELECT owner FROM sessions WHERE id = $1", &[&id])
            .await
        {
            Ok(None) => StoreError::NotFound(id.into()),
            Ok(Some(row)) => StoreError::NotOwner {
                session: id.into(),
                owner: row.get::<_, Option<String>>(0).unwrap_or_default(),
            },
            Err(error) => backend(error),
        }
    }

    /// Appends `events` to `session`, by its owner `owner` when given.
    async fn append_checked(
        &self,
        session: &str,
        owner: Option<&str>,
        fence: Option<Fence>,
        events: Vec<StoredEvent>,
    ) -> Result<(), StoreError> {
        let (Some(first), Some(last)) = (
            events.first().map(|e| e.sequence),
            events.last().map(|e| e.sequence),
        ) else {
            return Ok(());
        };
        if let Some((_, event)) = events
            .iter()
            .enumerate()
            .find(|(i, e)| e.sequence != first + *i as u64)
        {
            return Err(StoreError::OutOfOrder {
                session: session.into(),
                last: event.sequence.saturating_sub(1),
                got: event.sequence,
            });
        }
        let sequences: Vec<i64> = events.iter().map(|e| signed(e.sequence)).collect();
        let json: Vec<&str> = events.iter().map(|e| &*e.json).collect();
        let raw: Vec<Option<&str>> = events.iter().map(|e| e.raw.as_deref()).collect();
        let client = self.client().await?;
        let entries = outbox::rules(&self.outbox)
            .map(|rules| rules.entries(&events))
            .unwrap_or_default();
        let epoch = fence.map(|f| signed(f.epoch));
        let lease = fence.map(|f| f.lease.as_secs_f64());
        // One statement: the session's count moves only if the writer still owns it at its epoch
        // and its lease runs (the fence), and the events go in only if the count moved.
        let inserted = if entries.is_empty() {
            client
            .execute(
                "WITH moved AS (UPDATE sessions SET event_count = $3, active_at = $8 WHERE id = $1 AND event_count = $2 AND ($7::TEXT IS NULL OR owner = $7)
                   AND ($9::BIGINT IS NULL OR (epoch = $9 AND EXISTS (SELECT 1 FROM servers WHERE servers.id = $7 AND servers.heartbeat > now() - make_interval(secs => $10::FLOAT8)))) RETURNING id)
                 INSERT INTO events (session_id, sequence, event, raw, epoch)
                 SELECT moved.id, e.sequence, e.event, e.raw, $9 FROM moved, UNNEST($4::BIGINT[], $5::TEXT[], $6::TEXT[]) AS e (sequence, event, raw)",
                &[&session, &signed(first - 1), &signed(last), &sequences, &json, &raw, &owner, &unix_now(), &epoch, &lease],
            )
            .await
            .map_err(backend)?
        } else {
            // The outbox rows in the same statement: stored with their event or not at all.
            let endpoints: Vec<&str> = entries.iter().map(|e| e.endpoint.as_str()).collect();
            let outbox_sequences: Vec<i64> = entries.iter().map(|e| signed(e.sequence)).collect();
            let kinds: Vec<&str> = entries.iter().map(|e| e.event.as_str()).collect();
            let row = client
                .query_one(
                    "WITH moved AS (UPDATE sessions SET event_count = $3, active_at = $8 WHERE id = $1 AND event_count = $2 AND ($7::TEXT IS NULL OR owner = $7)
                       AND ($13::BIGINT IS NULL OR (epoch = $13 AND EXISTS (SELECT 1 FROM servers WHERE servers.id = $7 AND servers.heartbeat > now() - make_interval(secs => $14::FLOAT8)))) RETURNING id),
                     added AS (INSERT INTO events (session_id, sequence, event, raw, epoch)
                         SELECT moved.id, e.sequence, e.event, e.raw, $13 FROM moved, UNNEST($4::BIGINT[], $5::TEXT[], $6::TEXT[]) AS e (sequence, event, raw) RETURNING 1),
                     queued AS (INSERT INTO webhook_outbox (endpoint, session_id, sequence, event_type, created_at, next_attempt_at)
                         SELECT o.endpoint, moved.id, o.sequence, o.event_type, $9, $9 FROM moved, UNNEST($10::TEXT[], $11::BIGINT[], $12::TEXT[]) AS o (endpoint, sequence, event_type)
                         ON CONFLICT DO NOTHING)
                     SELECT COUNT(*) FROM added",
                    &[&session, &signed(first - 1), &signed(last), &sequences, &json, &raw, &owner, &unix_now(), &now_ms(), &endpoints, &outbox_sequences, &kinds, &epoch, &lease],
                )
                .await
                .map_err(backend)?;
            u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)
        };
        if inserted == events.len() as u64 {
            return Ok(());
        }
        match client
            .query_opt(
                "SELECT event_count, owner, epoch, EXISTS (SELECT 1 FROM servers WHERE servers.id = sessions.owner AND servers.heartbeat > now() - make_interval(secs => $2::FLOAT8))
                 FROM sessions WHERE id = $1",
                &[&session, &lease.unwrap_or(0.0)],
            )
            .await
            .map_err(backend)?
        {
            None => Err(StoreError::NotFound(session.into())),
            Some(row)
                if owner.is_some_and(|o| row.get::<_, Option<&str>>(1) != Some(o))
                    || epoch.is_some_and(|e| row.get::<_, i64>(2) != e) =>
            {
                Err(StoreError::NotOwner {
                    session: session.into(),
                    owner: row.get::<_, Option<String>>(1).unwrap_or_default(),
                })
            }
            Some(row) if fence.is_some() && !row.get::<_, bool>(3) => Err(StoreError::LeaseLost {
                session: session.into(),
            }),
            Some(row) => Err(StoreError::OutOfOrder {
                session: session.into(),
                last: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
                got: first,
            }),
        }
    }
}

const TOKEN_COLUMNS: &str = "id, tenant, scope, hash, created_at, last_used_at, revoked_at";

fn token_row(row: &Row) -> Result<super::tokens::TokenRecord, StoreError> {
    Ok(super::tokens::TokenRecord {
        id: row.get(0),
        tenant: row.get(1),
        scope: super::tokens::Scope::parse(row.get::<_, &str>(2)).map_err(backend)?,
        hash: row.get(3),
        created_at: row.get(4),
        last_used_at: row.get(5),
        revoked_at: row.get(6),
    })
}

#[async_trait]
impl super::tokens::TokenStore for PostgresStore {
    async fn create_token(&self, t: super::tokens::TokenRecord) -> Result<(), StoreError> {
        let inserted = self
            .client()
            .await?
            .execute(
                &format!("INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING"),
                &[&t.id, &t.tenant, &t.scope.as_str(), &t.hash, &t.created_at, &t.last_used_at, &t.revoked_at],
            )
            .await
            .map_err(backend)?;
        match inserted {
            0 => Err(StoreError::Duplicate(t.id)),
            _ => Ok(()),
        }
    }

    async fn token(&self, id: &str) -> Result<Option<super::tokens::TokenRecord>, StoreError> {
        let row = self
            .client()
            .await?
            .query_opt(
                &format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE id = $1"),
                &[&id],
            )
            .await
            .map_err(backend)?;
        row.as_ref().map(token_row).transpose()
    }

    async fn tokens(&self) -> Result<Vec<super::tokens::TokenRecord>, StoreError> {
        let rows = self
            .client()
            .await?
            .query(
                &format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created_at, id"),
                &[],
            )
            .await
            .map_err(backend)?;
        rows.iter().map(token_row).collect()
    }

    async fn revoke_token(&self, id: &str, at: i64) -> Result<bool, StoreError> {
        let rows = self
            .client()
            .await?
            .execute(
                "UPDATE tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1",
                &[&id, &at],
            )
            .await
            .map_err(backend)?;
        Ok(rows > 0)
    }

    async fn token_used(&self, id: &str, at: i64) -> Result<(), StoreError> {
        self.client()
            .await?
            .execute(
                "UPDATE tokens SET last_used_at = $2 WHERE id = $1",
                &[&id, &at],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }
}

#[async_trait]
impl Store for PostgresStore {
    fn token_store(&self) -> Option<&dyn super::tokens::TokenStore> {
        Some(self)
    }

    async fn create_session(&self, r: SessionRecord) -> Result<(), StoreError> {
        let inserted = self
            .client()
            .await?
            .execute(
                "INSERT INTO sessions (id, agent, agent_mode, permission_mode, model, variant, native_session_id, ended, end_error, owner, settings, working_dir, state, active_at, tenant)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT (id) DO NOTHING",
                &[
                    &r.id,
                    &r.agent,
                    &r.agent_mode,
                    &r.permission_mode,
                    &r.model,
                    &r.variant,
                    &r.native_session_id,
                    &r.ended,
                    &r.end_error,
                    &r.owner,
                    &r.settings,
                    &r.working_dir,
                    &r.state.as_str(),
                    &unix_now(),
                    &r.tenant,
                ],
            )
            .await
            .map_err(backend)?;
        match inserted {
            0 => Err(StoreError::Duplicate(r.id)),
            _ => Ok(()),
        }
    }

    async fn append(&self, session: &str, events: Vec<StoredEvent>) -> Result<(), StoreError> {
        self.append_checked(session, None, None, events).await
    }

    async fn append_owned(
        &self,
        session: &str,
        owner: &str,
        events: Vec<StoredEvent>,
    ) -> Result<(), StoreError> {
        self.append_checked(session, Some(owner), None, events)
            .await
    }

    async fn append_fenced(
        &self,
        session: &str,
        owner: &str,
        epoch: u64,
        lease: std::time::Duration,
        events: Vec<StoredEvent>,
    ) -> Result<(), StoreError> {
        let fence = Fence { epoch, lease };
        self.append_checked(session, Some(owner), Some(fence), events)
            .await
    }

    async fn claim_lease(
        &self,
        id: &str,
        owner: &str,
        from: Option<&str>,
        lease: std::time::Duration,
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        // Compare and swap on the owner, taken only from an owner that holds no agent for it or
        // whose lease ran out (decided by the database, in this one statement); the epoch moves
        // on, so that whatever the last owner still tries to write is refused.
        let row = client
            .query_opt(
                "UPDATE sessions SET owner = $2, epoch = epoch + 1, state = 'live', active_at = $4
                 WHERE id = $1 AND owner IS NOT DISTINCT FROM $3
                   AND (owner IS NULL OR owner = $2 OR state <> 'live'
                        OR NOT EXISTS (SELECT 1 FROM servers WHERE servers.id = sessions.owner AND servers.heartbeat > now() - make_interval(secs => $5::FLOAT8)))
                 RETURNING epoch",
                &[&id, &owner, &from, &unix_now(), &lease.as_secs_f64()],
            )
            .await
            .map_err(backend)?;
        match row {
            Some(row) => Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)),
            None => Err(self.why_not_owned(&client, id).await),
        }
    }

    async fn owned(&self, server: &str) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = self
            .client()
            .await?
            .query(
                "SELECT id, epoch FROM sessions WHERE owner = $1 AND NOT ended",
                &[&server],
            )
            .await
            .map_err(backend)?;
        Ok(rows
            .iter()
            .map(|row| (row.get(0), u64::try_from(row.get::<_, i64>(1)).unwrap_or(0)))
            .collect())
    }

    fn fleet(&self) -> Option<&dyn super::Fleet> {
        Some(self)
    }

    async fn claim(&self, id: &str, owner: &str, from: Option<&str>) -> Result<(), StoreError> {
        let client = self.client().await?;
        let rows = client
            .execute(
                "UPDATE sessions SET owner = $2, epoch = epoch + 1, state = 'live', active_at = $4 WHERE id = $1 AND owner IS NOT DISTINCT FROM $3",
                &[&id, &owner, &from, &unix_now()],
            )
            .await
            .map_err(backend)?;
        match rows {
            0 => Err(self.why_not_owned(&client, id).await),
            _ => Ok(()),
        }
    }

    async fn update(&self, id: &str, owner: &str, update: SessionUpdate) -> Result<(), StoreError> {
        let client = self.client().await?;
        let state = update.state.map(SessionState::as_str);
        let turns = update.turns.map(|(turns, _)| signed(turns));
        let open = update.turns.map(|(_, open)| open);
        let rows = client
            .execute(
                "UPDATE sessions SET state = COALESCE($3, state), turns = COALESCE($4, turns), turn_open = COALESCE($5, turn_open),
                 resumed_how = COALESCE($6, resumed_how), active_at = CASE WHEN $4::BIGINT IS NULL THEN active_at ELSE $7 END
                 WHERE id = $1 AND owner = $2",
                &[&id, &owner, &state, &turns, &open, &update.resumed_how, &unix_now()],
            )
            .await
            .map_err(backend)?;
        match rows {
            0 => Err(self.why_not_owned(&client, id).await),
            _ => Ok(()),
        }
    }

    async fn put_snapshot(
        &self,
        id: &str,
        owner: &str,
        snapshot: StoredSnapshot,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        // One statement: the base replaced and its deltas removed together.
        let rows = client
            .execute(
                "WITH owned AS (SELECT id FROM sessions WHERE id = $1 AND owner = $2),
                      gone AS (DELETE FROM snapshot_deltas WHERE session_id IN (SELECT id FROM owned))
                 INSERT INTO snapshots (session_id, turn, bytes, written_at, deltas)
                 SELECT id, $3, $4, $5, 0 FROM owned
                 ON CONFLICT (session_id) DO UPDATE SET turn = excluded.turn, bytes = excluded.bytes, written_at = excluded.written_at, deltas = 0",
                &[&id, &owner, &signed(snapshot.turn), &snapshot.bytes, &unix_now()],
            )
            .await
            .map_err(backend)?;
        match rows {
            0 => Err(self.why_not_owned(&client, id).await),
            _ => Ok(()),
        }
    }

    async fn put_snapshot_delta(
        &self,
        id: &str,
        owner: &str,
        delta: StoredDelta,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        // One statement: the delta added only on the base it follows, by the owner, and the
        // base's count and turn moved with it.
        let rows = client
            .execute(
                "WITH kept AS (
                     SELECT snapshots.session_id FROM snapshots JOIN sessions ON sessions.id = snapshots.session_id
                     WHERE snapshots.session_id = $1 AND sessions.owner = $2 AND snapshots.deltas = $3::BIGINT - 1
                     FOR UPDATE OF snapshots),
                      added AS (
                     INSERT INTO snapshot_deltas (session_id, seq, turn, bytes, written_at)
                     SELECT session_id, $3, $4, $5, $6 FROM kept RETURNING session_id)
                 UPDATE snapshots SET turn = $4, deltas = $3, written_at = $6
                 WHERE session_id IN (SELECT session_id FROM added)",
                &[
                    &id,
                    &owner,
                    &signed(delta.seq),
                    &signed(delta.turn),
                    &delta.bytes,
                    &unix_now(),
                ],
            )
            .await
            .map_err(backend)?;
        if rows > 0 {
            return Ok(());
        }
        match self.why_not_owned(&client, id).await {
            StoreError::NotOwner { owner: now, .. } if now == owner => {
                let kept = client
                    .query_opt("SELECT deltas FROM snapshots WHERE session_id = $1", &[&id])
                    .await
                    .map_err(backend)?
                    .map_or(0, |row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0));
                Err(StoreError::SnapshotOutOfOrder {
                    session: id.into(),
                    kept,
                    got: delta.seq,
                })
            }
            other => Err(other),
        }
    }

    async fn snapshot(&self, id: &str) -> Result<Option<StoredChain>, StoreError> {
        // One statement: the base and its deltas as they stood at one moment.
        let rows = self
            .client()
            .await?
            .query(
                "SELECT 0::BIGINT, turn, bytes, deltas FROM snapshots WHERE session_id = $1
                 UNION ALL
                 SELECT seq, turn, bytes, 0 FROM snapshot_deltas WHERE session_id = $1
                 ORDER BY 1",
                &[&id],
            )
            .await
            .map_err(backend)?;
        let unsigned = |row: &Row, at: usize| u64::try_from(row.get::<_, i64>(at)).unwrap_or(0);
        Ok(StoredChain::from_rows(rows.iter().map(|row| {
            (
                unsigned(row, 0),
                unsigned(row, 1),
                row.get(2),
                unsigned(row, 3),
            )
        })))
    }

    async fn heartbeat(&self, server: &str) -> Result<(), StoreError> {
        self.client()
            .await?
            .execute(
                "INSERT INTO servers (id, heartbeat) VALUES ($1, now()) ON CONFLICT (id) DO UPDATE SET heartbeat = now()",
                &[&server],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn server_alive(
        &self,
        server: &str,
        lease: std::time::Duration,
    ) -> Result<bool, StoreError> {
        let row = self
            .client()
            .await?
            .query_opt(
                "SELECT heartbeat > now() - make_interval(secs => $2) FROM servers WHERE id = $1",
                &[&server, &lease.as_secs_f64()],
            )
            .await
            .map_err(backend)?;
        Ok(row.is_some_and(|row| row.get::<_, bool>(0)))
    }
    async fn events(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT sequence, event, raw FROM events WHERE session_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
                &[&session, &signed(after), &i64::try_from(limit).unwrap_or(i64::MAX)],
            )
            .await
            .map_err(backend)?;
        if rows.is_empty()
            && client
                .query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&session])
                .await
                .map_err(backend)?
                .is_none()
        {
            return Err(StoreError::NotFound(session.into()));
        }
        Ok(rows
            .iter()
            .map(|row| StoredEvent {
                sequence: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
                json: row.get::<_, String>(1).into(),
                raw: row.get::<_, Option<String>>(2).map(Into::into),
            })
            .collect())
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let row = self
            .client()
            .await?
            .query_opt(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"),
                &[&id],
            )
            .await
            .map_err(backend)?;
        Ok(row.as_ref().map(session_row))
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let rows = self
            .client()
            .await?
            .query(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions ORDER BY position"),
                &[],
            )
            .await
            .map_err(backend)?;
        Ok(rows.iter().map(session_row).collect())
    }

    async fn set_native_session_id(&self, id: &str, native: &str) -> Result<(), StoreError> {
        self.update_one(
            "UPDATE sessions SET native_session_id = $2 WHERE id = $1",
            id,
            Some(native),
        )
        .await
    }

    async fn set_usage(&self, id: &str, usage: &str) -> Result<(), StoreError> {
        self.update_one(
            "UPDATE sessions SET usage = $2 WHERE id = $1",
            id,
            Some(usage),
        )
        .await
    }

    async fn set_agent_mode(&self, id: &str, mode: &str) -> Result<(), StoreError> {
        self.update_one(
            "UPDATE sessions SET agent_mode = $2 WHERE id = $1",
            id,
            Some(mode),
        )
        .await
    }

    async fn probe(&self) -> Result<(), ProbeError> {
        let client = self
            .client()
            .await
            .map_err(|e| ProbeError::Unreachable(e.to_string()))?;
        // One statement: the connection is shared (pipelined), so no transaction of its own. The
        // UPDATE matches no row, yet PostgreSQL refuses it when the database takes no writes (a
        // standby, `default_transaction_read_only`).
        let row = client
            .query_one(
                "WITH probe AS (UPDATE agent_api_migrations SET version = version WHERE FALSE RETURNING 1)
                 SELECT COUNT(*) FROM agent_api_migrations",
                &[],
            )
            .await
            .map_err(|e| match e.code() {
                Some(&tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION) => {
                    ProbeError::ReadOnly(e.to_string())
                }
                _ => ProbeError::Unreachable(e.to_string()),
            })?;
        let applied = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        let known = MIGRATIONS.len() as u64;
        match applied == known {
            true => Ok(()),
            false => Err(ProbeError::Migrations { applied, known }),
        }
    }

    async fn mark_ended(&self, id: &str, error: Option<&str>) -> Result<(), StoreError> {
        self.update_one(
            "UPDATE sessions SET ended = TRUE, end_error = $2 WHERE id = $1",
            id,
            error,
        )
        .await
    }

    fn set_outbox(&self, rules: Arc<OutboxRules>) -> Result<(), StoreError> {
        outbox::install(&self.outbox, rules);
        Ok(())
    }

    async fn claim_deliveries(
        &self,
        server: &str,
        endpoints: &[String],
        now_ms: i64,
        lease: std::time::Duration,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        // The heads due (the oldest pending row of each endpoint and session), locked with SKIP
        // LOCKED so that servers claiming at once take different ones, then leased to `server`:
        // another sees a leased head as taken and, it being the head, takes none of its session's
        // later rows either. A server that dies with a lease leaves the row to others once it
        // runs out (at least once).
        let until = now_ms.saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .client()
            .await?
            .query(
                "WITH taken AS (
                     UPDATE webhook_outbox o SET claimed_by = $1, claimed_until = $4
                     WHERE (o.endpoint, o.session_id, o.sequence) IN (
                         SELECT h.endpoint, h.session_id, h.sequence FROM webhook_outbox h
                         WHERE h.state = 'pending' AND h.endpoint = ANY($2) AND h.next_attempt_at <= $3
                           AND (h.claimed_until IS NULL OR h.claimed_until < $3)
                           AND NOT EXISTS (SELECT 1 FROM webhook_outbox p WHERE p.endpoint = h.endpoint
                               AND p.session_id = h.session_id AND p.state = 'pending' AND p.sequence < h.sequence)
                         ORDER BY h.next_attempt_at, h.created_at LIMIT $5
                         FOR UPDATE SKIP LOCKED)
                     RETURNING o.endpoint, o.session_id, o.sequence, o.event_type, o.attempts, o.next_attempt_at)
                 SELECT t.endpoint, t.session_id, s.agent, t.sequence, t.event_type, e.event, t.attempts
                 FROM taken t JOIN events e ON e.session_id = t.session_id AND e.sequence = t.sequence
                 JOIN sessions s ON s.id = t.session_id
                 ORDER BY t.next_attempt_at",
                &[&server, &endpoints, &now_ms, &until, &limit],
            )
            .await
            .map_err(backend)?;
        Ok(rows
            .iter()
            .map(|row| Delivery {
                endpoint: row.get(0),
                session: row.get(1),
                agent: row.get(2),
                sequence: u64::try_from(row.get::<_, i64>(3)).unwrap_or(0),
                event: WebhookEvent::parse(row.get(4)).unwrap_or(WebhookEvent::Error),
                json: row.get::<_, &str>(5).into(),
                attempts: u32::try_from(row.get::<_, i32>(6)).unwrap_or(0),
            })
            .collect())
    }

    async fn record_attempt(&self, attempt: DeliveryAttempt) -> Result<(), StoreError> {
        let number = i32::try_from(attempt.attempt).unwrap_or(i32::MAX);
        let status = attempt.status.map(i32::from);
        self.client()
            .await?
            .execute(
                "WITH done AS (UPDATE webhook_outbox SET attempts = $4, state = $5, next_attempt_at = COALESCE($6, next_attempt_at),
                     claimed_by = NULL, claimed_until = NULL
                     WHERE endpoint = $1 AND session_id = $2 AND sequence = $3)
                 INSERT INTO webhook_attempts (endpoint, session_id, sequence, attempt, event_id, event_type, at, status, error, outcome, next_attempt_at)
                 VALUES ($1, $2, $3, $4, $7, $8, $9, $10, $11, $12, $6) ON CONFLICT DO NOTHING",
                &[
                    &attempt.endpoint,
                    &attempt.session,
                    &signed(attempt.sequence),
                    &number,
                    &attempt.outcome.row_state(),
                    &attempt.next_attempt_ms,
                    &attempt.event_id,
                    &attempt.event.as_str(),
                    &attempt.at_ms,
                    &status,
                    &attempt.error,
                    &attempt.outcome.as_str(),
                ],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn delivery_log(
        &self,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryAttempt>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .client()
            .await?
            .query(
                "SELECT endpoint, session_id, sequence, attempt, event_id, event_type, at, status, error, outcome, next_attempt_at
                 FROM webhook_attempts WHERE $1::TEXT IS NULL OR session_id = $1
                 ORDER BY at DESC, attempt DESC LIMIT $2",
                &[&session, &limit],
            )
            .await
            .map_err(backend)?;
        Ok(rows
            .iter()
            .map(|row| DeliveryAttempt {
                endpoint: row.get(0),
                session: row.get(1),
                sequence: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
                attempt: u32::try_from(row.get::<_, i32>(3)).unwrap_or(0),
                event_id: row.get(4),
                event: WebhookEvent::parse(row.get(5)).unwrap_or(WebhookEvent::Error),
                at_ms: row.get(6),
                status: row
                    .get::<_, Option<i32>>(7)
                    .and_then(|s| u16::try_from(s).ok()),
                error: row.get(8),
                outcome: AttemptOutcome::parse(row.get(9)),
                next_attempt_ms: row.get(10),
            })
            .collect())
    }
}
