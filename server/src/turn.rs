//! A message made into a turn: its per-message options checked against the session's (what the
//! library fixes when a session opens may only be repeated), and its images made into files the
//! agent reads (`spec/http-api.md`, "Per-message options").
//!
//! Every name and byte an HTTP client sends is hostile. An image named by `path` is read through
//! [`ConfinedDir`]: beneath the session's working directory, through no symbolic link and no `..`
//! (the kernel refuses them at the open, `openat2`), only a regular file, at most
//! [`IMAGE_MAX_BYTES`]. An inline image is bounded by the request body's bound and by
//! [`IMAGE_MAX_BYTES`] once decoded. Either is copied into a private directory of the server's
//! (mode 0700) that lives as long as the turn: the agent reads that copy, never the client's name,
//! so a file swapped after the check is never what it reads.

use std::path::{Path, PathBuf};

use agent_api::kit::files::ConfinedDir;
use agent_api::kit::images::IMAGE_MAX_BYTES;
use base64::Engine as _;

use crate::error::ApiError;
use crate::wire::{ImageInput, SessionSettings};

/// The most images one message may carry.
pub(crate) const MAX_IMAGES: usize = 20;

/// The image kinds a prompt takes: media type and file extension.
const KINDS: &[(&str, &str)] = &[
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/gif", "gif"),
    ("image/webp", "webp"),
];

/// The images of one turn, as files of the server's own; removed when dropped (the turn ended).
#[derive(Debug, Default)]
pub(crate) struct TurnImages {
    /// The files, in the message's order.
    pub(crate) paths: Vec<PathBuf>,
    /// Their directory, removed when this is dropped.
    _dir: Option<tempfile::TempDir>,
}

/// Refuses, naming the field, an option the message gives with a value other than the session's
/// own: the library fixes it when the session opens.
pub(crate) fn check_fixed(
    message: &SessionSettings,
    session: &SessionSettings,
) -> Result<(), ApiError> {
    fn differs<T: PartialEq>(asked: &Option<T>, own: &Option<T>) -> bool {
        asked.is_some() && asked != own
    }
    let own_permissions = session
        .permission_mode
        .clone()
        .or_else(|| Some("default".into()));
    let fixed = [
        ("agentVersion", message.agent_version.is_some()),
        ("model", differs(&message.model, &session.model)),
        (
            "permissionMode",
            differs(&message.permission_mode, &own_permissions),
        ),
        ("variant", differs(&message.variant, &session.variant)),
        ("options", differs(&message.options, &session.options)),
        (
            "systemPrompt",
            differs(&message.system_prompt, &session.system_prompt),
        ),
        (
            "appendSystemPrompt",
            differs(&message.append_system_prompt, &session.append_system_prompt),
        ),
        (
            "turnTimeoutSecs",
            differs(&message.turn_timeout_secs, &session.turn_timeout_secs),
        ),
        ("maxTurns", differs(&message.max_turns, &session.max_turns)),
        (
            "maxTokens",
            differs(&message.max_tokens, &session.max_tokens),
        ),
        (
            "maxCostUsd",
            differs(&message.max_cost_usd, &session.max_cost_usd),
        ),
        (
            "startupTimeoutSecs",
            differs(&message.startup_timeout_secs, &session.startup_timeout_secs),
        ),
        (
            "idleTimeoutSecs",
            differs(&message.idle_timeout_secs, &session.idle_timeout_secs),
        ),
        (
            "outputSchema",
            differs(&message.output_schema, &session.output_schema),
        ),
        (
            "allowedTools",
            differs(&message.allowed_tools, &session.allowed_tools),
        ),
        (
            "deniedTools",
            differs(&message.denied_tools, &session.denied_tools),
        ),
        ("resume", message.resume.is_some()),
        ("fork", message.fork.is_some()),
    ];
    match fixed.iter().find(|(_, refused)| *refused) {
        Some(("agentVersion", _)) => Err(ApiError::invalid("agentVersion: this server runs the agent version installed")),
        Some((field @ ("resume" | "fork"), _)) => Err(ApiError::invalid(format!(
            "{field}: a session resumes or forks an agent's session only when it is created (POST /v1/sessions/{{id}} with `{field}`)"
        ))),
        Some((field, _)) => Err(ApiError::invalid(format!(
            "{field} cannot change per message: the agent's session was opened with the session's own; create another session for another"
        ))),
        None => Ok(()),
    }
}

impl TurnImages {
    /// Checks and copies a message's images (`images[i]` in every refusal), for a session working
    /// in `working_dir`. Blocking file I/O: run it on the blocking pool.
    pub(crate) fn make(working_dir: &Path, images: &[ImageInput]) -> Result<Self, ApiError> {
        if images.is_empty() {
            return Ok(Self::default());
        }
        if images.len() > MAX_IMAGES {
            return Err(ApiError::invalid(format!(
                "images: {} images, more than the {MAX_IMAGES} a message may carry",
                images.len()
            )));
        }
        let dir = tempfile::Builder::new()
            .prefix("agent-api-images-")
            .tempdir()
            .and_then(|dir| crate::private::own_dir(dir.path()).map(|()| dir))
            .map_err(|e| {
                ApiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "stream_error",
                    format!("images: {e}"),
                )
            })?;
        let mut confined = None;
        let mut paths = Vec::with_capacity(images.len());
        for (index, image) in images.iter().enumerate() {
            let field = |why: String| ApiError::invalid(format!("images[{index}]: {why}"));
            let (bytes, extension) = match (&image.path, &image.data) {
                (Some(path), None) => {
                    if image.media_type.is_some() {
                        return Err(field("`mediaType` goes with `data`; a file's kind is its extension".into()));
                    }
                    let confined = match &confined {
                        Some(dir) => dir,
                        None => confined.insert(ConfinedDir::open(working_dir).map_err(|e| {
                            field(format!("the session's working directory {} cannot be opened: {e}", working_dir.display()))
                        })?),
                    };
                    read_path(confined, path).map_err(field)?
                }
                (None, Some(data)) => decode(data, image.media_type.as_deref()).map_err(field)?,
                _ => return Err(field("give `path` (a file in the session's working directory) or `data` (base64), one of them".into())),
            };
            let copy = dir.path().join(format!("image-{index}.{extension}"));
            crate::private::write_new(&copy, &bytes)
                .map_err(|e| field(format!("cannot copy it for the agent: {e}")))?;
            paths.push(copy);
        }
        Ok(Self {
            paths,
            _dir: Some(dir),
        })
    }
}

/// The extension of an image kind the prompt takes, by the file's name.
fn extension_of(name: &str) -> Option<&'static str> {
    let extension = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
    let extension = if extension == "jpeg" {
        "jpg".to_string()
    } else {
        extension
    };
    KINDS
        .iter()
        .map(|(_, ext)| *ext)
        .find(|ext| *ext == extension)
}

/// The bytes of the image file `name` (relative to the working directory, or absolute beneath
/// it) and its extension.
fn read_path(dir: &ConfinedDir, name: &str) -> Result<(Vec<u8>, &'static str), String> {
    let shown = agent_api::display::line(name, 256);
    let extension = extension_of(name).ok_or_else(|| {
        format!("`{shown}` is not a PNG, JPEG, GIF or WebP file (by its extension)")
    })?;
    let path = Path::new(name);
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        dir.path().join(path)
    };
    let bytes = dir.read(&path, IMAGE_MAX_BYTES).map_err(|refusal| match refusal.is_escape() {
        true => format!("`{shown}`: {refusal}: an image must be a file beneath the session's working directory"),
        false => format!("`{shown}`: {refusal}"),
    })?;
    Ok((bytes, extension))
}

/// The bytes of an inline image and its extension.
fn decode(data: &str, media_type: Option<&str>) -> Result<(Vec<u8>, &'static str), String> {
    let media_type = media_type
        .ok_or("`data` needs its `mediaType` (image/png, image/jpeg, image/gif or image/webp)")?;
    let extension = KINDS
        .iter()
        .find(|(kind, _)| *kind == media_type)
        .map(|(_, ext)| *ext)
        .ok_or_else(|| {
            format!(
                "mediaType `{}`: image/png, image/jpeg, image/gif or image/webp",
                agent_api::display::line(media_type, 64)
            )
        })?;
    // Refused before decoding: base64 is 4 characters for 3 bytes.
    if data.len() as u64 / 4 * 3 > IMAGE_MAX_BYTES {
        return Err(format!(
            "more than the {IMAGE_MAX_BYTES} bytes a prompt image may have"
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("`data` is not base64: {e}"))?;
    if bytes.is_empty() {
        return Err("`data` is empty".into());
    }
    Ok((bytes, extension))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_copies_are_0600_in_a_0700_folder_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("shot.png"), b"\x89PNG").unwrap();
        let images = [
            ImageInput {
                path: Some("shot.png".into()),
                ..ImageInput::default()
            },
            ImageInput {
                data: Some("aGVsbG8=".into()),
                media_type: Some("image/png".into()),
                ..ImageInput::default()
            },
        ];
        // SAFETY: umask has no preconditions; the loosest one, put back after.
        let before = unsafe { libc::umask(0) };
        let made = TurnImages::make(work.path(), &images);
        unsafe { libc::umask(before) };
        let made = made.unwrap();
        let folder = made.paths[0].parent().unwrap();
        assert_eq!(mode(folder), 0o700);
        for copy in &made.paths {
            assert_eq!(mode(copy), 0o600, "{}", copy.display());
        }
        // Another user: `nobody` reads no copy (when this runs as root, which can switch users).
        if unsafe { libc::geteuid() } == 0 {
            use std::os::unix::process::CommandExt;
            for copy in &made.paths {
                let read = std::process::Command::new("cat")
                    .arg(copy)
                    .uid(65534)
                    .gid(65534)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .unwrap();
                assert!(!read.success(), "nobody read {}", copy.display());
            }
        } else {
            eprintln!("NOT CHECKED: reading the copies as another user needs root (the modes were checked)");
        }
    }

    #[test]
    fn image_kinds_come_from_the_name_and_jpeg_is_jpg() {
        assert_eq!(extension_of("a/b.PNG"), Some("png"));
        assert_eq!(extension_of("c.jpeg"), Some("jpg"));
        assert_eq!(extension_of("d.svg"), None);
        assert_eq!(extension_of("png"), None);
    }
}
