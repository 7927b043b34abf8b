//! Standard output that notices when its reader is gone (`agent-api … | head -1`): a write error
//! (EPIPE) marks it closed instead of panicking, later writes are skipped, and the command ends
//! with [`CLOSED_EXIT`], the status of a process ended by SIGPIPE, without a message.

use std::io::{self, Write};
use std::process::ExitCode;

/// Exit status when stdout was closed by its reader (128 + SIGPIPE, as shells report it).
pub(crate) const CLOSED_EXIT: u8 = 141;

/// Stdout that records a failed write.
pub(crate) struct Stdout {
    inner: io::Stdout,
    closed: bool,
}

impl Stdout {
    /// This process's stdout.
    pub(crate) fn new() -> Self {
        Self {
            inner: io::stdout(),
            closed: false,
        }
    }

    /// Runs `write` on the locked stream unless it is closed; false when it is (now or before).
    pub(crate) fn write_with(
        &mut self,
        write: impl FnOnce(&mut io::StdoutLock<'static>) -> io::Result<()>,
    ) -> bool {
        if self.closed {
            return false;
        }
        let mut lock = self.inner.lock();
        if write(&mut lock).and_then(|()| lock.flush()).is_err() {
            self.closed = true;
        }
        !self.closed
    }

    /// Writes one line.
    pub(crate) fn line(&mut self, text: &str) -> bool {
        self.write_with(|out| writeln!(out, "{text}"))
    }

    /// Whether the reader went away.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }
}

/// `code`, or [`CLOSED_EXIT`] when the reader went away.
pub(crate) fn finish(out: Stdout, code: ExitCode) -> ExitCode {
    if out.is_closed() {
        ExitCode::from(CLOSED_EXIT)
    } else {
        code
    }
}
