//! One shell command string from an argv, for the far sides that take only a string (`ssh`).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use crate::vocabulary::error::AgentError;

/// Joins `argv` into one POSIX shell command line that a shell splits back into exactly these
/// elements, quoting each with `shlex` (bytes, so non-UTF-8 arguments pass unchanged). An element
/// with a NUL byte cannot be passed to a program at all: that is
/// [`AgentError::UnquotableArgument`] with its index.
///
/// ```
/// use agent_api::kit::launch::shell_join;
/// let line = shell_join(&["echo".into(), "it's $(rm -rf ~)".into()]).unwrap();
/// assert_eq!(line, r#"echo "it's "'$(rm -rf ~)'"#);
/// ```
pub fn shell_join(argv: &[OsString]) -> Result<OsString, AgentError> {
    let mut line = Vec::new();
    for (index, arg) in argv.iter().enumerate() {
        let quoted = shlex::bytes::try_quote(arg.as_bytes())
            .map_err(|_| AgentError::UnquotableArgument { index })?;
        if index > 0 {
            line.push(b' ');
        }
        line.extend_from_slice(&quoted);
    }
    Ok(OsString::from_vec(line))
}
