//! The store's one PostgreSQL connection, with its statements kept prepared.
//!
//! `tokio_postgres::Client::query` given SQL text prepares a statement, runs it and closes it:
//! three messages and two round trips a statement, each waking the connection's task and the
//! caller's. The store runs a few dozen statements, the same text again and again (a turn's
//! events, its snapshot delta, a heartbeat), so each is prepared once per connection and kept:
//! one round trip afterwards. Every statement names its columns, so a newer server adding columns
//! to a shared database (its migrations) leaves the prepared ones valid.

use std::collections::HashMap;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Error, Row, Statement};

/// The most statements kept prepared: the store's own texts are far fewer; any beyond (a text
/// made per call) is prepared for its call only, so that the cache never grows without bound.
const KEPT: usize = 128;

/// A connection whose statements are prepared once ([`PreparedClient::query`] and the like take
/// the same SQL text as the client's own methods).
pub(crate) struct PreparedClient {
    client: Client,
    statements: std::sync::Mutex<HashMap<String, Statement>>,
}

impl std::ops::Deref for PreparedClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl PreparedClient {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            client,
            statements: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// `sql` prepared on this connection, kept for the next call.
    async fn statement(&self, sql: &str) -> Result<Statement, Error> {
        if let Some(statement) = self.kept().get(sql) {
            return Ok(statement.clone());
        }
        // Prepared outside the lock: two callers may prepare the same text at once, and the
        // second one's is kept (both work).
        let statement = self.client.prepare(sql).await?;
        let mut kept = self.kept();
        if kept.len() < KEPT {
            kept.insert(sql.to_string(), statement.clone());
        }
        Ok(statement)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, Statement>> {
        self.statements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.client.query(&statement, params).await
    }

    pub(crate) async fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        let statement = self.statement(sql).await?;
        self.client.query_one(&statement, params).await
    }

    pub(crate) async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.client.query_opt(&statement, params).await
    }

    pub(crate) async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        let statement = self.statement(sql).await?;
        self.client.execute(&statement, params).await
    }
}
