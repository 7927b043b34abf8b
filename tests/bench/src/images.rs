//! A small image for the prompt-image tests, and the check that it reached the model.
//!
//! Every model API carries a prompt image as base64 (Anthropic `source.data`, a Responses or
//! Chat Completions `data:` URL, Gemini `inlineData.data`), so the image reached the model when
//! a request holds [`PNG_BASE64`].

use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::ModelServer;

/// A valid 2×2 RGB PNG (red, green, blue, white), base64: small enough that no CLI resizes it.
pub const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEklEQVR4nGP4z8DAAMIM/4EAAB/uBfsL2WiLAAAAAElFTkSuQmCC";

/// Writes the image as `swatch.png` in `dir` and returns its path.
pub fn write_png(dir: &Path) -> PathBuf {
    let path = dir.join("swatch.png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(PNG_BASE64)
        .expect("valid base64");
    std::fs::write(&path, bytes).expect("write the test image");
    path
}

/// How many of the requests `server` received carry the image.
pub fn requests_with_image(server: &ModelServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(PNG_BASE64))
        .count()
}
