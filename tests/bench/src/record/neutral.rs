//! Replacing machine paths and ports with the neutral ones the shared fixtures use.

use crate::Sandbox;

/// The neutral HOME of recorded fixtures.
pub const HOME: &str = "/home/dev";
/// The neutral model-server origin of recorded fixtures.
pub const ORIGIN: &str = "http://127.0.0.1:8080";
/// The neutral folder of the installed CLIs.
pub const CLI_DIR: &str = "/opt/agent-clis";

/// An ordered list of text replacements (longest, most specific first).
#[derive(Debug, Clone, Default)]
pub struct Neutralizer {
    pairs: Vec<(String, String)>,
}

impl Neutralizer {
    /// Replacements for a run in `sandbox` against `server_origin` (`http://127.0.0.1:PORT`):
    /// the sandbox HOME becomes `/home/dev` (so the working directory becomes `/home/dev/work/<dir>`),
    /// its TMPDIR `/tmp`, the server port 8080 and the CLI install folder `/opt/agent-clis`.
    pub fn for_sandbox(sandbox: &Sandbox, server_origin: &str) -> Neutralizer {
        let mut pairs = vec![
            (sandbox.home.display().to_string(), HOME.to_string()),
            (sandbox.tmp.display().to_string(), "/tmp".to_string()),
            (server_origin.to_string(), ORIGIN.to_string()),
        ];
        // Claude Code names its per-project folder after the working directory, every other character a dash.
        let neutral_cwd = match sandbox.cwd.strip_prefix(&sandbox.home) {
            Ok(rel) => format!("{HOME}/{}", rel.display()),
            Err(_) => sandbox.cwd.display().to_string(),
        };
        pairs.push((slug(&sandbox.cwd.display().to_string()), slug(&neutral_cwd)));
        if let Some(port) = server_origin.rsplit(':').next() {
            pairs.push((format!("127.0.0.1:{port}"), "127.0.0.1:8080".into()));
            pairs.push((format!("localhost:{port}"), "localhost:8080".into()));
        }
        if let Some(dir) = crate::clis::install_dir() {
            pairs.push((dir.display().to_string(), CLI_DIR.to_string()));
        }
        if let Some(real_home) = std::env::var_os("HOME") {
            let real = real_home.to_string_lossy().to_string();
            if real.len() > 1 {
                pairs.push((format!("{real}/"), format!("{HOME}/")));
            }
        }
        pairs.retain(|(from, _)| !from.is_empty());
        pairs.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        Neutralizer { pairs }
    }

    /// `text` with every replacement applied.
    pub fn apply(&self, text: &str) -> String {
        self.pairs.iter().fold(text.to_string(), |acc, (from, to)| {
            acc.replace(from.as_str(), to)
        })
    }
}

/// `path` with every character but ASCII letters and digits replaced by `-` (Claude Code's project slug).
fn slug(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_project_slug_matches_its_folder_naming() {
        assert_eq!(
            slug("/root/.cache/x_y/home/work/shell"),
            "-root--cache-x-y-home-work-shell"
        );
    }

    #[test]
    fn longer_paths_are_replaced_before_their_prefixes() {
        let n = Neutralizer {
            pairs: vec![
                ("/x/sandbox/home".into(), HOME.into()),
                ("/x/sandbox/tmp".into(), "/tmp".into()),
                ("http://127.0.0.1:4321".into(), ORIGIN.into()),
            ],
        };
        assert_eq!(
            n.apply(r#"{"cwd":"/x/sandbox/home/work/shell","url":"http://127.0.0.1:4321/s/shell","t":"/x/sandbox/tmp/a"}"#),
            r#"{"cwd":"/home/dev/work/shell","url":"http://127.0.0.1:8080/s/shell","t":"/tmp/a"}"#
        );
    }
}
