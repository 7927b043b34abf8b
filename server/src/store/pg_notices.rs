//! The PostgreSQL store's listening connection: one connection of its own that `LISTEN`s to the
//! notifications the migration's triggers send at commit (ids and counts only), passed on as
//! [`Notice`]s to whoever follows the store ([`super::fleet_pg`], the fleet).

use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};

use super::{Notice, StoreError};

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
