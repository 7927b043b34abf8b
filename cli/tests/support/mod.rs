//! Shared by the CLI's tests: `agent-api` on a pseudo-terminal whose screen a terminal emulator
//! (`vt100`) rebuilds, so a test checks what a person would see.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Rows of the emulated terminal.
pub(crate) const ROWS: u16 = 40;
/// Columns of the emulated terminal.
pub(crate) const COLS: u16 = 200;

/// A process on a pty, and the screen it drew.
pub(crate) struct Terminal {
    /// The pty's master side: write here to type.
    pub master: std::fs::File,
    screen: Arc<Mutex<vt100::Parser>>,
    child: Child,
}

impl Terminal {
    /// Starts `command` on a new pty, as the session leader with the pty as its controlling
    /// terminal (so Ctrl-C there is a SIGINT to it, as in a shell).
    pub(crate) fn start(mut command: Command) -> Terminal {
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: ROWS,
            ws_col: COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty fills two descriptors; the name buffer and termios are not used.
        assert_eq!(
            unsafe {
                libc::openpty(
                    &mut master,
                    &mut slave,
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    &size,
                )
            },
            0
        );
        // SAFETY: both descriptors were just opened and are owned here only.
        let (master, slave) = unsafe {
            (
                std::fs::File::from_raw_fd(master),
                OwnedFd::from_raw_fd(slave),
            )
        };
        command
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe; they run in the child before exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                libc::setsid();
                libc::ioctl(0, libc::TIOCSCTTY, 0);
                Ok(())
            });
        }
        let child = command.spawn().expect("the command starts");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 0)));
        let (mut reader, feed) = (master.try_clone().unwrap(), screen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                feed.lock().unwrap().process(&buf[..n]);
            }
        });
        Terminal {
            master,
            screen,
            child,
        }
    }

    /// The screen's rows, trailing blanks cut.
    pub(crate) fn rows(&self) -> Vec<String> {
        self.screen
            .lock()
            .unwrap()
            .screen()
            .rows(0, COLS)
            .map(|r| r.trim_end().to_string())
            .collect()
    }

    /// Waits (up to `within`) until a row holds `needle`; returns the screen then.
    pub(crate) fn wait_for(&self, needle: &str, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        loop {
            let rows = self.rows();
            if rows.iter().any(|r| r.contains(needle)) {
                return rows;
            }
            assert!(
                Instant::now() < deadline,
                "`{needle}` never appeared:\n{}",
                rows.join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the process to exit; kills it and fails after `within`.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "the process did not exit within {within:?}:\n{}",
                    self.rows().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
