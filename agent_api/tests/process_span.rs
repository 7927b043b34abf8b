//! An agent process is an `agent_process` span from its spawn to its group's end, naming its
//! program and pid and recording its exit code, never its arguments; and
//! `agent_api::kit::process::running` counts it while it is held.

use std::sync::{Arc, Mutex};

use agent_api::kit::process::{running, spawn};
use agent_api::kit::CommandSpec;

/// Every span's name and fields (`name: field=value` lines), and the spans closed.
#[derive(Default)]
struct Seen {
    lines: Vec<String>,
    closed: usize,
}

struct Capture(Arc<Mutex<Seen>>);

struct Fields<'a>(&'a mut Vec<String>, &'a str);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .push(format!("{}: {}={value:?}", self.1, field.name()));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let name = span.metadata().name();
        span.record(&mut Fields(&mut self.0.lock().unwrap().lines, name));
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut Fields(&mut self.0.lock().unwrap().lines, "record"));
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
    fn try_close(&self, _: tracing::span::Id) -> bool {
        self.0.lock().unwrap().closed += 1;
        true
    }
}

#[tokio::test]
async fn an_agent_process_is_a_span_with_its_program_pid_and_exit_code_never_its_arguments() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let _default = tracing::subscriber::set_default(Capture(seen.clone()));
    let spec = CommandSpec::new("sh").args(["-c", "exit 3", "SECRET-ARGUMENT"]);
    let before = running();
    let mut child = spawn(&spec).unwrap();
    assert!(running() > before, "the held process is counted");
    let status = child.child.wait().await.unwrap();
    assert_eq!(status.code(), Some(3));
    let pid = child.pgid;
    drop(child);
    let seen = seen.lock().unwrap();
    let text = seen.lines.join("\n");
    assert!(
        text.contains("agent_process: process.executable.name=sh"),
        "{text}"
    );
    assert!(
        text.contains(&format!("agent_process: process.pid={pid}")),
        "{text}"
    );
    assert!(text.contains("record: process.exit.code=3"), "{text}");
    assert!(
        !text.contains("SECRET-ARGUMENT") && !text.contains("exit 3"),
        "{text}"
    );
    assert!(seen.closed >= 1, "the span ends with the process group");
}
