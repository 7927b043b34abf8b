//! The prompt's images ([`Prompt::images`](crate::Prompt)), checked the same way for every
//! backend before anything is spawned.
//!
//! An image is a PNG, JPEG, GIF or WebP file (known by its extension) of at most
//! [`IMAGE_MAX_BYTES`]. A relative path is taken against the caller's current directory, not
//! the run's working directory: it names a file on the caller's side. Agents that read the file
//! themselves (through a flag such as `-i` or `-f`) get its absolute path ([`ImageFile::check`]);
//! agents that take image data in their input (stream-json, ACP, an HTTP server's messages) get
//! it read and encoded ([`ImageData::read`]).
//!
//! ```
//! use agent_api::kit::images::ImageData;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("dot.png");
//! std::fs::write(&path, [0x89, b'P', b'N', b'G']).unwrap();
//! let image = ImageData::read(&path).unwrap();
//! assert_eq!(image.file.media_type, "image/png");
//! assert_eq!(image.data_url(), "data:image/png;base64,iVBORw==");
//! assert!(ImageData::read(&dir.path().join("notes.txt")).is_err());
//! ```

use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::Prompt;

/// The largest image a prompt may carry: 20 MiB, the most the model APIs take inline.
pub const IMAGE_MAX_BYTES: u64 = 20 * 1024 * 1024;

/// An image file of the prompt, checked: it exists, its kind is known, its size is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImageFile {
    /// The file, absolute.
    pub path: PathBuf,
    /// Its media type (`image/png`, `image/jpeg`, `image/gif` or `image/webp`).
    pub media_type: &'static str,
}

impl ImageFile {
    /// Checks `path` (kind by extension, size); an [`AgentError::InvalidRequest`] says why not.
    pub fn check(path: &Path) -> Result<Self, AgentError> {
        let media_type = media_type(path).ok_or_else(|| {
            invalid(
                path,
                "not a PNG, JPEG, GIF or WebP file (by its extension)".into(),
            )
        })?;
        let path = std::path::absolute(path).map_err(|e| invalid(path, e.to_string()))?;
        // Asked of the open file, never waited on: a FIFO or a device (a link to /dev/zero named
        // `x.png`) is refused here, before an agent or this process reads it.
        let file =
            crate::guards::files::open_regular(&path).map_err(|e| invalid(&path, e.to_string()))?;
        let size = file
            .metadata()
            .map_err(|e| invalid(&path, e.to_string()))?
            .len();
        if size > IMAGE_MAX_BYTES {
            return Err(invalid(
                &path,
                format!("{size} bytes, more than the {IMAGE_MAX_BYTES} a prompt image may have"),
            ));
        }
        Ok(Self { path, media_type })
    }

    /// Every image of `prompt`, checked (the first that fails is the error).
    pub fn check_all(prompt: &Prompt) -> Result<Vec<Self>, AgentError> {
        prompt.images.iter().map(|path| Self::check(path)).collect()
    }
}

/// An image file of the prompt, read and base64-encoded for agents that take image data.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImageData {
    /// The file it was read from.
    pub file: ImageFile,
    /// Its bytes, base64 (standard alphabet, padded).
    pub base64: String,
}

impl ImageData {
    /// Checks and reads `path`.
    pub fn read(path: &Path) -> Result<Self, AgentError> {
        let file = ImageFile::check(path)?;
        let bytes = crate::guards::files::read_regular(&file.path, IMAGE_MAX_BYTES)
            .map_err(|e| invalid(&file.path, e.to_string()))?;
        Ok(Self {
            base64: base64::engine::general_purpose::STANDARD.encode(bytes),
            file,
        })
    }

    /// Every image of `prompt`, read (the first that fails is the error).
    pub fn read_all(prompt: &Prompt) -> Result<Vec<Self>, AgentError> {
        prompt.images.iter().map(|path| Self::read(path)).collect()
    }

    /// The image as a `data:` URL.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.file.media_type, self.base64)
    }
}

impl std::fmt::Debug for ImageData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The data can be megabytes: its size says enough.
        f.debug_struct("ImageData")
            .field("file", &self.file)
            .field("base64_len", &self.base64.len())
            .finish()
    }
}

/// The media type of an image file, by its extension.
fn media_type(path: &Path) -> Option<&'static str> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

fn invalid(path: &Path, why: String) -> AgentError {
    AgentError::InvalidRequest {
        reason: format!("image {}: {why}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_image_is_an_invalid_request_naming_the_file() {
        let err = ImageFile::check(Path::new("/nonexistent/cat.png")).unwrap_err();
        assert!(
            matches!(&err, AgentError::InvalidRequest { reason } if reason.contains("/nonexistent/cat.png")),
            "{err:?}"
        );
    }

    #[test]
    fn an_image_over_the_limit_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.JPG");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(IMAGE_MAX_BYTES + 1)
            .unwrap();
        let err = ImageData::read(&path).unwrap_err();
        assert!(
            matches!(&err, AgentError::InvalidRequest { reason } if reason.contains("more than")),
            "{err:?}"
        );
    }

    #[test]
    fn a_fifo_or_a_device_named_like_an_image_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let zero = dir.path().join("zero.png");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let fifo = dir.path().join("pipe.png");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        for path in [zero, fifo] {
            let (tx, rx) = std::sync::mpsc::channel();
            let asked = path.clone();
            std::thread::spawn(move || {
                tx.send((
                    ImageFile::check(&asked).is_err(),
                    ImageData::read(&asked).is_err(),
                ))
            });
            let refused = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("reading the image blocked");
            assert_eq!(refused, (true, true), "{}", path.display());
        }
    }

    #[test]
    fn a_relative_image_is_made_absolute_against_the_current_directory() {
        let dir = tempfile::tempdir_in(".").unwrap();
        let name = dir.path().file_name().unwrap();
        std::fs::write(dir.path().join("a.webp"), b"RIFF").unwrap();
        let file = ImageFile::check(&Path::new(name).join("a.webp")).unwrap();
        assert!(file.path.is_absolute() && file.path.ends_with("a.webp"));
        assert_eq!(file.media_type, "image/webp");
    }
}
