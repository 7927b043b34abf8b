//! OpenCode's session snapshots (`agent_api.session.snapshot`). OpenCode 1.18 keeps every session
//! of a home in one SQLite database (`$XDG_DATA_HOME/opencode/opencode.db`, with the other
//! sessions and its logins), so a snapshot is never that file: it is the session as OpenCode's own
//! `opencode export <id>` prints it (`{"info", "messages": [{"info", "parts"}]}`), and a restore
//! hands it back to `opencode import`, which writes it into the importing home's database under
//! the project of the directory it runs in (re-keyed by OpenCode itself). Both run the CLI the
//! way a run of the request would (its environment, working directory and launcher), bounded.
//!
//! The export is kept as two files under the pseudo-directory `OPENCODE_EXPORT` (no directory of
//! the home: nothing is written there by path): `<id>/session.json`, the session's record, and
//! `<id>/messages.jsonl`, one message per line in the session's order. A message does not change
//! once its turn has ended, so the messages only grow, turn after turn, and a store keeps them
//! incrementally (`SessionSnapshot::delta_from`); the record is small and whole each time.
//!
//! A restore into a home that already holds the session: the same messages are left alone; a
//! copy with more messages, or one written after the snapshot's while it lacks some of the
//! snapshot's, is kept (newest wins, said in the [`SnapshotImport`]); an older copy that holds
//! messages the snapshot does not (it went another way) is deleted first, so the two are never
//! mixed; an older copy the snapshot extends gets the snapshot's messages added.

use agent_api::kit::snapshot::home_dir;
use agent_api::request::SessionRef;
use agent_api::snapshot::{
    check_session_id, Continuity, SnapshotError, SnapshotFile, SnapshotImport, SNAPSHOT_FILES_BOUND,
};
use agent_api::{AgentError, RunRequest, SessionSnapshot};
use serde_json::{json, Value};

use crate::config::OpenCodeConfig;
use crate::KIND;

/// The pseudo-directory a snapshot's files are named under: they are OpenCode's export, not
/// files of its home.
pub const ROOT: &str = "OPENCODE_EXPORT";

/// The snapshot's name of the session's record.
pub fn record_path(id: &str) -> String {
    format!("{id}/session.json")
}

/// The snapshot's name of the session's messages, one per line.
pub fn messages_path(id: &str) -> String {
    format!("{id}/messages.jsonl")
}

/// The directory of OpenCode's database for a run of `request`; refuses a home that does not
/// outlive its run (isolated, hermetic), as every snapshot does.
fn data_dir(
    config: &OpenCodeConfig,
    request: &RunRequest,
) -> Result<std::path::PathBuf, AgentError> {
    home_dir(request, &config.env, true, "XDG_DATA_HOME", ".local/share")
}

/// `opencode ARGS` as a run of `request` would start it (environment, working directory, launcher).
fn command(
    config: &OpenCodeConfig,
    request: &RunRequest,
    args: &[&str],
) -> Result<agent_api::kit::CommandSpec, AgentError> {
    Ok(crate::base_spec(config, &plain(request))?.args(args.iter().copied()))
}

/// `request` without what only a turn needs (its prompt's files, its caller tools, its
/// structured output): an export or import starts no turn.
fn plain(request: &RunRequest) -> RunRequest {
    let mut plain = RunRequest::new("");
    plain.env = request.env.clone();
    plain.home = request.home;
    plain.launcher = request.launcher.clone();
    plain.working_dir = request.working_dir.clone();
    plain
}

/// The session as `opencode export` prints it in the home of a run of `request`: `Ok(None)`
/// when the home does not hold it, `Err(over)` when it prints more than the files' bound.
async fn exported(
    config: &OpenCodeConfig,
    request: &RunRequest,
    id: &str,
) -> Result<Result<Option<Value>, u64>, AgentError> {
    let spec = command(config, request, &["export", id])?;
    let out = crate::cli::run(&spec, None, SNAPSHOT_FILES_BOUND).await?;
    if out.over {
        return Ok(Err(SNAPSHOT_FILES_BOUND));
    }
    let Some(bytes) = out.ok() else {
        return Ok(Ok(None));
    };
    let export: Value = serde_json::from_slice(&bytes).map_err(|_| AgentError::Protocol {
        reason: "`opencode export` printed no JSON".into(),
    })?;
    if export.pointer("/info/id").and_then(Value::as_str) != Some(id) {
        return Err(AgentError::Protocol {
            reason: "`opencode export` printed another session".into(),
        });
    }
    Ok(Ok(Some(export)))
}

/// Exports `session` from the home of a run of `request` (see the module's docs).
pub(crate) async fn export(
    config: &OpenCodeConfig,
    request: &RunRequest,
    session: &SessionRef,
) -> Result<SessionSnapshot, AgentError> {
    check_session_id(&session.id)?;
    data_dir(config, request)?;
    let snapshot = SessionSnapshot::new(KIND, session.id.clone())
        .in_working_dir(crate::working_dir(config, request));
    let export = match exported(config, request, &session.id).await? {
        Ok(Some(export)) => export,
        Ok(None) => {
            return Err(SnapshotError::Missing {
                id: session.id.clone(),
            }
            .into())
        }
        Err(bound) => {
            return Ok(snapshot.with_continuity(Continuity::Replay {
                reason: format!("the session's export is over the snapshot bound of {bound} bytes"),
            }))
        }
    };
    let mut snapshot = snapshot;
    snapshot.files = files(&session.id, &export);
    Ok(snapshot)
}

/// The snapshot's files of an export.
fn files(id: &str, export: &Value) -> Vec<SnapshotFile> {
    let record = export.get("info").cloned().unwrap_or(Value::Null);
    let updated = record.pointer("/time/updated").and_then(Value::as_u64);
    let mut messages = Vec::new();
    for message in export
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        messages.extend_from_slice(&compact(message));
        messages.push(b'\n');
    }
    let record = compact(&record);
    vec![
        SnapshotFile::new(ROOT, record_path(id), record).modified_at(updated),
        SnapshotFile::new(ROOT, messages_path(id), messages).modified_at(updated),
    ]
}

/// `value` as compact JSON (a `Value` always serializes: its map keys are strings).
fn compact(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// The export a snapshot's files hold, checked: both files there, the record the snapshot's
/// session, every line a message of it.
fn rebuilt(snapshot: &SessionSnapshot) -> Result<Value, SnapshotError> {
    let id = &snapshot.native_session_id;
    let file = |path: String| {
        snapshot
            .files
            .iter()
            .find(|f| f.root == ROOT && f.path == path)
            .map(|f| f.bytes.as_slice())
    };
    let (Some(record), Some(messages)) = (file(record_path(id)), file(messages_path(id))) else {
        return Err(SnapshotError::Missing { id: id.clone() });
    };
    let corrupt = |reason: &str| SnapshotError::Corrupt {
        reason: format!("OpenCode's export {reason}"),
    };
    let record: Value =
        serde_json::from_slice(record).map_err(|_| corrupt("has a record that is not JSON"))?;
    if record.get("id").and_then(Value::as_str) != Some(id.as_str()) {
        return Err(corrupt("has another session's record"));
    }
    let mut list = Vec::new();
    for (n, line) in messages
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let message: Value = serde_json::from_slice(line)
            .map_err(|_| corrupt(&format!("has message {} that is not JSON", n + 1)))?;
        if message.pointer("/info/sessionID").and_then(Value::as_str) != Some(id.as_str()) {
            return Err(corrupt(&format!(
                "has message {} of another session",
                n + 1
            )));
        }
        list.push(message);
    }
    Ok(json!({ "info": record, "messages": list }))
}

/// The ids of an export's messages, in order.
fn message_ids(export: &Value) -> Vec<&str> {
    export
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.pointer("/info/id").and_then(Value::as_str))
        .collect()
}

/// What a restore does with the home's own copy of the session.
#[derive(Debug, PartialEq, Eq)]
enum Held {
    /// The same messages: nothing to do.
    Same,
    /// Newer (more messages, or written later): kept.
    Newer,
    /// Older, and the snapshot extends it: the snapshot's messages are added.
    Extended,
    /// Older, and it went another way: deleted, then the snapshot imported.
    Diverged,
}

fn compare(home: &Value, snapshot: &Value) -> Held {
    let (ours, theirs) = (message_ids(home), message_ids(snapshot));
    if ours == theirs {
        return Held::Same;
    }
    let updated = |v: &Value| v.pointer("/info/time/updated").and_then(Value::as_u64);
    let later = matches!((updated(home), updated(snapshot)), (Some(h), Some(s)) if h > s);
    if ours.starts_with(&theirs) {
        return Held::Newer;
    }
    if theirs.starts_with(&ours) {
        return Held::Extended;
    }
    if later {
        return Held::Newer;
    }
    Held::Diverged
}

/// Imports `snapshot` into the home of a run of `request`, in its working directory (see the
/// module's docs).
pub(crate) async fn import(
    config: &OpenCodeConfig,
    request: &RunRequest,
    snapshot: &SessionSnapshot,
) -> Result<SnapshotImport, AgentError> {
    snapshot.check_agent(&KIND)?;
    snapshot.check()?;
    let data = data_dir(config, request)?;
    let id = snapshot.native_session_id.as_str();
    let export = rebuilt(snapshot)?;
    let shown = format!("{ROOT}/{id}");
    let mut report = SnapshotImport::default();
    // A home without OpenCode's database holds no session (and asking would create one).
    let local = request
        .launcher
        .as_ref()
        .is_none_or(|l| l.is_local_filesystem());
    let may_hold = !local || data.join("opencode").join("opencode.db").is_file();
    let held = if may_hold {
        match exported(config, request, id).await? {
            Ok(Some(home)) => Some(compare(&home, &export)),
            Ok(None) => None,
            // Over the bound here: larger than the snapshot could be, so newer.
            Err(_) => Some(Held::Newer),
        }
    } else {
        None
    };
    match held {
        Some(Held::Same) => {
            report.unchanged.push(shown);
            return Ok(report);
        }
        Some(Held::Newer) => {
            tracing::info!(session = %id, "restore kept the home's newer copy of the session (newest wins)");
            report.kept_newer.push(shown);
            return Ok(report);
        }
        Some(Held::Diverged) => {
            let spec = command(config, request, &["session", "delete", id])?;
            if crate::cli::run(&spec, None, 64 * 1024)
                .await?
                .ok()
                .is_none()
            {
                return Err(refused(&shown, "`opencode session delete` failed"));
            }
        }
        Some(Held::Extended) | None => {}
    }
    let bytes = compact(&export);
    // OpenCode reads the file it is named; its stdin is one, through any launcher.
    let spec = command(config, request, &["import", "/dev/stdin"])?.with_stdin();
    if crate::cli::run(&spec, Some(&bytes), 64 * 1024)
        .await?
        .ok()
        .is_none()
    {
        return Err(refused(&shown, "`opencode import` failed"));
    }
    report.written.push(shown);
    Ok(report)
}

fn refused(shown: &str, reason: &str) -> AgentError {
    SnapshotError::File {
        path: shown.to_string(),
        action: "restored",
        reason: reason.to_string(),
        escape: false,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(ids: &[&str], updated: u64) -> Value {
        json!({
            "info": {"id": "ses_1", "time": {"updated": updated}},
            "messages": ids.iter().map(|id| json!({"info": {"id": id, "sessionID": "ses_1"}, "parts": []})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn an_export_becomes_a_record_and_a_growing_message_list_and_back() {
        let one = export(&["msg_1", "msg_2"], 10);
        let two = export(&["msg_1", "msg_2", "msg_3", "msg_4"], 20);
        let snapshot = |e: &Value| {
            let mut s = SessionSnapshot::new(KIND, "ses_1");
            s.files = files("ses_1", e);
            s
        };
        let (first, second) = (snapshot(&one), snapshot(&two));
        assert_eq!(rebuilt(&first).unwrap(), one);
        assert_eq!(rebuilt(&second).unwrap(), two);
        // The messages grew: the delta appends to them.
        let delta = second.delta_from(&first);
        let messages = delta
            .files
            .iter()
            .find(|f| f.path == messages_path("ses_1"))
            .unwrap();
        assert!(matches!(
            messages.change,
            agent_api::snapshot::FileChange::Append { .. }
        ));
    }

    #[test]
    fn a_snapshot_without_its_files_or_with_anothers_is_a_typed_error() {
        let mut s = SessionSnapshot::new(KIND, "ses_1");
        assert!(matches!(rebuilt(&s), Err(SnapshotError::Missing { .. })));
        s.files = files("ses_1", &export(&["msg_1"], 1));
        let mut cut = s.clone();
        let n = cut.files[1].bytes.len() / 2;
        cut.files[1].bytes.truncate(n);
        assert!(matches!(rebuilt(&cut), Err(SnapshotError::Corrupt { .. })));
        let mut other = s.clone();
        other.files[0].bytes = br#"{"id":"ses_2"}"#.to_vec();
        assert!(matches!(
            rebuilt(&other),
            Err(SnapshotError::Corrupt { .. })
        ));
    }

    #[test]
    fn the_homes_copy_is_kept_when_newer_and_replaced_when_it_went_another_way() {
        let snap = export(&["msg_1", "msg_2"], 20);
        assert_eq!(compare(&export(&["msg_1", "msg_2"], 99), &snap), Held::Same);
        assert_eq!(
            compare(&export(&["msg_1", "msg_2", "msg_3"], 5), &snap),
            Held::Newer
        );
        assert_eq!(compare(&export(&["msg_1"], 5), &snap), Held::Extended);
        assert_eq!(
            compare(&export(&["msg_1", "msg_9"], 5), &snap),
            Held::Diverged
        );
        assert_eq!(
            compare(&export(&["msg_1", "msg_9"], 30), &snap),
            Held::Newer
        );
    }
}
