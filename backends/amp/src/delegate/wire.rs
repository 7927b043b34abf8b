//! The private channel between the delegate helper and the running SDK (`spec/amp-delegate.md`):
//! one JSON line each way over a Unix socket.
//!
//! The helper finds the channel through the path amp ran it by: the run's settings name
//! `<dir>/delegate` (a link to the helper), and `<dir>/channel.json` holds the socket path and
//! the run's secret. Nothing is added to amp's environment, so tools amp runs see no secret.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The name of the link to the helper in a run's channel directory.
pub const DELEGATE_LINK: &str = "delegate";
/// The name of the channel file in a run's channel directory.
pub const CHANNEL_FILE: &str = "channel.json";
/// The name of the settings file in a run's channel directory.
pub const SETTINGS_FILE: &str = "settings.json";
/// The socket's name in a run's channel directory.
pub const SOCKET_FILE: &str = "socket";
/// The helper's first argument that makes it a relay (see [`ToRelay`]).
pub const RELAY_ARG: &str = "relay";
/// The largest tool input the helper forwards (a bigger one is rejected).
pub const MAX_INPUT: usize = 1024 * 1024;

/// Exit status: amp runs the tool.
pub const EXIT_ALLOW: i32 = 0;
/// Exit status: amp would ask a person (never answered in execute mode).
pub const EXIT_ASK: i32 = 1;
/// Exit status: amp rejects the tool call.
pub const EXIT_REJECT: i32 = 2;

/// Where the helper finds the SDK (`channel.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Channel {
    /// The Unix socket the SDK listens on.
    pub socket: PathBuf,
    /// The run's secret; a request without it is refused.
    pub secret: String,
}

/// What the helper sends: one line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The run's secret.
    pub secret: String,
    /// `AGENT_TOOL_NAME`.
    pub tool: String,
    /// The tool's arguments (amp's JSON on the helper's stdin).
    pub input: Value,
}

/// What the SDK answers: one line.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Reply {
    /// The helper's exit status for amp.
    pub exit: i32,
}

/// What the SDK writes to a relay (the helper run as `amp-permission-delegate relay` on the far
/// side of a container, ssh or prefix launcher), one JSON line each.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToRelay {
    /// The first line: the run's settings and whether tool calls are delegated (then the relay
    /// adds the delegate rule and listens with `secret` in its channel file).
    Start {
        /// amp's settings without the delegate rule (an object).
        settings: Value,
        /// Whether the relay adds the delegate rule and listens.
        delegate: bool,
        /// The run's secret, for the channel file.
        secret: String,
    },
    /// The verdict for the request the relay forwarded as `conn`.
    Reply {
        /// The relay's number for the waiting helper.
        conn: u64,
        /// The helper's exit status.
        exit: i32,
    },
}

/// What a relay writes to the SDK, one JSON line each.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum FromRelay {
    /// The run's directory on the far side is ready: amp takes `DIR/settings.json`.
    Ready {
        /// The directory.
        dir: PathBuf,
    },
    /// The relay could not set the directory up.
    Failed {
        /// Why, in words.
        reason: String,
    },
    /// A helper's request line ([`Request`], as the helper sent it), waiting as `conn`.
    Request {
        /// The relay's number for the waiting helper.
        conn: u64,
        /// The helper's line.
        request: Value,
    },
}

/// The helper's whole job: read the tool call amp hands it, ask the SDK, and return the exit
/// status amp reads as its verdict. Any failure rejects the call (fail closed).
pub fn ask_sdk(invoked_as: &Path, tool: &str, mut stdin: impl Read) -> i32 {
    let mut raw = Vec::new();
    if stdin
        .by_ref()
        .take(MAX_INPUT as u64 + 1)
        .read_to_end(&mut raw)
        .is_err()
        || raw.len() > MAX_INPUT
    {
        return EXIT_REJECT;
    }
    let input: Value = if raw.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&raw).unwrap_or(Value::Null)
    };
    let Some(dir) = invoked_as.parent() else {
        return EXIT_REJECT;
    };
    let Ok(text) = std::fs::read(dir.join(CHANNEL_FILE)) else {
        return EXIT_REJECT;
    };
    let Ok(channel) = serde_json::from_slice::<Channel>(&text) else {
        return EXIT_REJECT;
    };
    exchange(
        &channel,
        &Request {
            secret: channel.secret.clone(),
            tool: tool.to_string(),
            input,
        },
    )
    .unwrap_or(EXIT_REJECT)
}

/// Sends `request` and waits, without limit, for the verdict: the caller may take as long as it
/// likes, and a cancelled run closes the socket (which rejects).
fn exchange(channel: &Channel, request: &Request) -> std::io::Result<i32> {
    let mut stream = UnixStream::connect(&channel.socket)?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    stream.write_all(&line)?;
    let mut answer = String::new();
    BufReader::new(stream.take(256)).read_line(&mut answer)?;
    let reply: Reply = serde_json::from_str(answer.trim())?;
    Ok(if reply.exit == EXIT_ALLOW {
        EXIT_ALLOW
    } else {
        reply.exit.max(EXIT_REJECT)
    })
}
