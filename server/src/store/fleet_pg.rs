//! [`Fleet`] on PostgreSQL: the `commands` table, and one connection of the store's own that
//! `LISTEN`s to the notifications the migration's triggers send at commit (ids and counts only).

use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};

use super::postgres::PostgresStore;
use super::{Answer, Command, CommandState, Fleet, Notice, StoreError};

/// The notifications a slow receiver may fall behind by before it is told it missed some.
pub(super) const NOTICE_BUFFER: usize = 4096;

/// The longest pause before the listening connection is opened again.
const MAX_PAUSE: std::time::Duration = std::time::Duration::from_secs(2);

fn backend(error: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(error.to_string())
}

/// A notification's channel and payload as a [`Notice`] (`None`: not one of ours, or malformed).
fn notice(channel: &str, payload: &str) -> Option<Notice> {
    match channel {
        "agent_api_events" => {
            let mut parts = payload.splitn(3, ' ');
            let events = parts.next()?.parse().ok()?;
            let ended = parts.next()? == "1";
            let session = parts.next()?.to_string();
            Some(Notice::Events {
                session,
                events,
                ended,
            })
        }
        "agent_api_commands" => payload.parse().ok().map(Notice::Command),
        "agent_api_answers" => payload.parse().ok().map(Notice::Answer),
        _ => None,
    }
}

/// Listens on a connection of its own while the store lives, opening it again when it breaks
/// (each time: [`Notice::Missed`], so that whoever waits reads the rows again).
pub(super) async fn listen(url: String, notices: broadcast::Sender<Notice>) {
    let mut pause = std::time::Duration::from_millis(100);
    loop {
        match listen_once(&url, &notices).await {
            Ok(()) => pause = std::time::Duration::from_millis(100),
            Err(error) => tracing::warn!("the store's listening connection failed: {error}"),
        }
        let _ = notices.send(Notice::Missed);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

async fn listen_once(url: &str, notices: &broadcast::Sender<Notice>) -> Result<(), StoreError> {
    let (client, mut connection) = tokio_postgres::connect(url, NoTls).await.map_err(backend)?;
    let (ready, mut messages) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut stream = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = stream.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if let Some(notice) = notice(n.channel(), n.payload()) {
                        if ready.send(notice).is_err() {
                            return;
                        }
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!("the store's listening connection ended: {error}");
                    return;
                }
            }
        }
    });
    client
        .batch_execute(
            "LISTEN agent_api_events; LISTEN agent_api_commands; LISTEN agent_api_answers",
        )
        .await
        .map_err(backend)?;
    // What was sent before the LISTEN took hold is read from the rows by whoever waits.
    let _ = notices.send(Notice::Missed);
    while let Some(notice) = messages.recv().await {
        let _ = notices.send(notice);
    }
    driver.abort();
    drop(client);
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_are_read_and_anything_else_is_dropped() {
        assert_eq!(
            notice("agent_api_events", "12 1 a b"),
            Some(Notice::Events {
                session: "a b".into(),
                events: 12,
                ended: true
            })
        );
        assert_eq!(notice("agent_api_commands", "7"), Some(Notice::Command(7)));
        assert_eq!(notice("agent_api_answers", "x"), None);
        assert_eq!(notice("agent_api_events", "12"), None);
        assert_eq!(notice("other", "1"), None);
    }
}
