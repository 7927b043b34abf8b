//! [`Fleet`] on PostgreSQL: the `commands` table; the notifications come from the store's listening
//! connection ([`super::pg_notices`]).

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::postgres::{backend, PostgresStore};
use super::{Answer, Command, CommandState, Fleet, Notice, StoreError};

#[async_trait]
impl Fleet for PostgresStore {
    fn notices(&self) -> broadcast::Receiver<Notice> {
        self.notices.subscribe()
    }

    async fn send_command(
        &self,
        target: Option<&str>,
        session: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<i64, StoreError> {
        let row = self
            .client()
            .await?
            .query_one(
                // Commands nobody collected (their sender died) are cleared as new ones come.
                "WITH old AS (DELETE FROM commands WHERE created_at < now() - interval '10 minutes')
                 INSERT INTO commands (target, session_id, method, path, body) VALUES ($1, $2, $3, $4, $5) RETURNING id",
                &[&target, &session, &method, &path, &body],
            )
            .await
            .map_err(backend)?;
        Ok(row.get(0))
    }

    async fn take_command(
        &self,
        id: i64,
        server: &str,
        any: bool,
    ) -> Result<Option<Command>, StoreError> {
        let row = self
            .client()
            .await?
            .query_opt(
                "UPDATE commands SET taken_by = $2, taken_at = now()
                 WHERE id = (SELECT id FROM commands WHERE id = $1 AND taken_by IS NULL AND (target = $2 OR ($3 AND target IS NULL)) FOR UPDATE SKIP LOCKED)
                 RETURNING method, path, body",
                &[&id, &server, &any],
            )
            .await
            .map_err(backend)?;
        Ok(row.map(|row| Command {
            id,
            method: row.get(0),
            path: row.get(1),
            body: row.get(2),
        }))
    }

    async fn open_commands(&self, server: &str, any: bool) -> Result<Vec<i64>, StoreError> {
        let rows = self
            .client()
            .await?
            .query(
                "SELECT id FROM commands WHERE taken_by IS NULL AND (target = $1 OR ($2 AND target IS NULL)) ORDER BY id LIMIT 100",
                &[&server, &any],
            )
            .await
            .map_err(backend)?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn answer_command(&self, id: i64, answer: Answer) -> Result<(), StoreError> {
        self.client()
            .await?
            .execute(
                "UPDATE commands SET status = $2, answer = $3, answer_type = $4, retry_after = $5 WHERE id = $1",
                &[
                    &id,
                    &i32::from(answer.status),
                    &answer.body,
                    &answer.content_type,
                    &answer.retry_after,
                ],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn withdraw_command(&self, id: i64) -> Result<bool, StoreError> {
        let withdrawn = self
            .client()
            .await?
            .execute(
                "DELETE FROM commands WHERE id = $1 AND taken_by IS NULL",
                &[&id],
            )
            .await
            .map_err(backend)?;
        Ok(withdrawn > 0)
    }

    async fn command_state(
        &self,
        id: i64,
        lease: std::time::Duration,
    ) -> Result<CommandState, StoreError> {
        let client = self.client().await?;
        let answered = client
            .query_opt(
                "DELETE FROM commands WHERE id = $1 AND status IS NOT NULL RETURNING status, answer, answer_type, retry_after",
                &[&id],
            )
            .await
            .map_err(backend)?;
        if let Some(row) = answered {
            return Ok(CommandState::Answered(Answer {
                status: u16::try_from(row.get::<_, i32>(0)).unwrap_or(500),
                body: row.get(1),
                content_type: row.get(2),
                retry_after: row.get(3),
            }));
        }
        let row = client
            .query_opt(
                "SELECT taken_by IS NOT NULL, EXISTS (SELECT 1 FROM servers WHERE servers.id = commands.taken_by AND servers.heartbeat > now() - make_interval(secs => $2::FLOAT8))
                 FROM commands WHERE id = $1",
                &[&id, &lease.as_secs_f64()],
            )
            .await
            .map_err(backend)?;
        Ok(match row {
            None => CommandState::Lost,
            Some(row) if !row.get::<_, bool>(0) => CommandState::Open,
            Some(row) if row.get::<_, bool>(1) => CommandState::Taken,
            Some(_) => CommandState::Lost,
        })
    }
}
