//! Pretty printing of events for a person at a terminal. Every agent string goes through
//! [`agent_api::display`]: text keeps its newlines, everything else is one inert line.

use std::io::{self, Write};

use agent_api::display;
use agent_api::run::{Channel, Usage};
use agent_api::universal::{ContentPart, ItemKind, UniversalEventBody, UniversalItem};
use agent_api::UniversalEvent;
use agent_api::{AgentWrapperEvent, AgentWrapperEventKind as Kind};
use serde::Serialize;
use serde_json::Value;

/// Longest line shown for a status, an error or a tool's command.
const LINE_MAX: usize = 300;

/// Prints a run as a readable stream: text inline as it arrives, everything else on its own line.
#[derive(Default)]
pub(crate) struct Pretty {
    channel: Option<Channel>,
    mid_line: bool,
    /// Whether the user's own words are left out: a person typing at `you> ` sees them already.
    pub(crate) hide_user: bool,
}

/// The serde name of an enum value (`tool_call`, `completed`), never its `Debug` form.
pub(crate) fn name_of(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(name)) => name,
        _ => "unknown".to_string(),
    }
}

impl Pretty {
    fn line(&mut self, out: &mut impl Write, text: &str) -> io::Result<()> {
        self.end_of_message(out)?;
        writeln!(out, "{text}")
    }

    /// Ends the current line after a message completes, so the next message starts fresh.
    pub(crate) fn end_of_message(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.mid_line {
            writeln!(out)?;
            self.mid_line = false;
        }
        self.channel = None;
        Ok(())
    }

    /// Prints one wrapper event; tool events are left to [`Self::tool`], which sees the command.
    pub(crate) fn wrapper(
        &mut self,
        out: &mut impl Write,
        event: &AgentWrapperEvent,
    ) -> io::Result<()> {
        match event.kind {
            Kind::TextOutput if self.hide_user && event.channel == Some(Channel::User) => {
                return Ok(())
            }
            Kind::TextOutput => {
                let channel = event.channel.clone().unwrap_or(Channel::Assistant);
                if self.channel.as_ref() != Some(&channel) {
                    if self.mid_line {
                        writeln!(out)?;
                    }
                    match &channel {
                        Channel::Assistant => {}
                        Channel::Reasoning => write!(out, "[thinking] ")?,
                        // The conversation as a person reads it: their line, then the answer.
                        Channel::User => write!(out, "you> ")?,
                        other => write!(out, "[{}] ", display::line(other.as_str(), 64))?,
                    }
                    self.channel = Some(channel);
                }
                write!(
                    out,
                    "{}",
                    display::text(event.text.as_deref().unwrap_or_default())
                )?;
                self.mid_line = true;
            }
            Kind::ToolCall | Kind::ToolResult => {}
            Kind::Status => self.line(
                out,
                &format!(
                    "· {}",
                    display::line(event.message.as_deref().unwrap_or_default(), LINE_MAX)
                ),
            )?,
            Kind::Error => self.line(
                out,
                &format!(
                    "✗ {}",
                    display::line(event.message.as_deref().unwrap_or_default(), LINE_MAX)
                ),
            )?,
            _ => self.line(
                out,
                &format!(
                    "? {}",
                    display::line(
                        event.message.as_deref().unwrap_or("unclassified event"),
                        LINE_MAX
                    )
                ),
            )?,
        }
        out.flush()
    }

    /// Prints a finished tool call with what it acts on, and a finished tool result with its
    /// exit code and output size.
    pub(crate) fn tool(&mut self, out: &mut impl Write, event: &UniversalEvent) -> io::Result<()> {
        let UniversalEventBody::ItemCompleted(data) = &event.body else {
            return Ok(());
        };
        let item = &data.item;
        match item.kind {
            ItemKind::ToolCall => self.line(out, &tool_call_line(item))?,
            ItemKind::ToolResult => self.line(out, &tool_result_line(item))?,
            _ => return Ok(()),
        }
        out.flush()
    }

    /// Prints the answer given to a permission request.
    pub(crate) fn permission_resolved(
        &mut self,
        out: &mut impl Write,
        event: &UniversalEvent,
    ) -> io::Result<()> {
        let UniversalEventBody::PermissionResolved(p) = &event.body else {
            return Ok(());
        };
        self.line(
            out,
            &format!(
                "⚿ permission {}: {}",
                name_of(&p.status),
                display::line(&p.action, LINE_MAX)
            ),
        )?;
        out.flush()
    }

    /// Prints one universal event as a one-line summary.
    pub(crate) fn universal(
        &mut self,
        out: &mut impl Write,
        event: &UniversalEvent,
    ) -> io::Result<()> {
        let detail = match &event.body {
            UniversalEventBody::ItemDelta(d) => display::line(&d.delta, LINE_MAX),
            UniversalEventBody::ItemStarted(d) | UniversalEventBody::ItemCompleted(d) => {
                format!(
                    "{} {} {}",
                    display::line(&d.item.item_id, 64),
                    name_of(&d.item.kind),
                    name_of(&d.item.status)
                )
            }
            UniversalEventBody::Error(e) => display::line(&e.message, LINE_MAX),
            UniversalEventBody::PermissionRequested(p)
            | UniversalEventBody::PermissionResolved(p) => {
                format!(
                    "{} {} {}",
                    display::line(&p.permission_id, 64),
                    name_of(&p.status),
                    display::line(&p.action, LINE_MAX)
                )
            }
            UniversalEventBody::QuestionRequested(q) | UniversalEventBody::QuestionResolved(q) => {
                format!(
                    "{} {} {}",
                    display::line(&q.question_id, 64),
                    name_of(&q.status),
                    display::line(&q.prompt, LINE_MAX)
                )
            }
            _ => String::new(),
        };
        let source = if event.synthetic { "daemon" } else { "agent" };
        self.line(
            out,
            &format!(
                "#{:<4} {:<20} {source:<6} {detail}",
                event.sequence,
                event.type_name()
            ),
        )?;
        out.flush()
    }
}

/// `⚙ Bash: ls -la` — the tool and the command, file or input it acts on.
pub(crate) fn tool_call_line(item: &UniversalItem) -> String {
    let (name, arguments) = item
        .content
        .iter()
        .find_map(|part| match part {
            ContentPart::ToolCall {
                name, arguments, ..
            } => Some((name.as_str(), arguments.as_str())),
            _ => None,
        })
        .unwrap_or(("tool", ""));
    let name = item
        .tool
        .as_ref()
        .and_then(|t| t.tool_name.as_deref())
        .unwrap_or(name);
    let file = item.content.iter().find_map(|part| match part {
        ContentPart::FileRef { path, action, .. } => Some(format!("{} {path}", name_of(action))),
        _ => None,
    });
    // The typed command every backend sets comes first: argument shapes differ per backend.
    let meta = item.tool.as_ref();
    let command = meta.and_then(|t| t.command.clone());
    let target = command
        .or(file)
        .or_else(|| target_of(arguments))
        .unwrap_or_default();
    let line = format!(
        "⚙ {}: {}",
        display::line(name, 64),
        display::line(&target, LINE_MAX)
    );
    match meta.and_then(|t| t.cwd.as_deref()) {
        Some(cwd) => format!("{line} (in {})", display::line(cwd, LINE_MAX)),
        None => line,
    }
}

/// The command, path or query in a tool call's JSON arguments, else the arguments themselves.
fn target_of(arguments: &str) -> Option<String> {
    let parsed: Value = serde_json::from_str(arguments).ok()?;
    let field = [
        "command",
        "cmd",
        "file_path",
        "path",
        "notebook_path",
        "url",
        "pattern",
        "query",
    ]
    .iter()
    .find_map(|k| parsed.get(*k));
    match field {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ if parsed.as_object().is_some_and(|o| o.is_empty()) => None,
        _ => Some(parsed.to_string()),
    }
}

/// `  ↳ completed, exit 0, 1234 bytes of output`.
pub(crate) fn tool_result_line(item: &UniversalItem) -> String {
    let mut parts = vec![name_of(&item.status)];
    if let Some(meta) = &item.tool {
        if let Some(code) = meta.exit_code {
            parts.push(format!("exit {code}"));
        }
        let bytes = meta
            .bytes
            .stdout
            .saturating_add(meta.bytes.stderr)
            .saturating_add(meta.bytes.result);
        parts.push(format!("{bytes} bytes of output"));
        if meta.bytes.diff > 0 {
            parts.push(format!("{} bytes of diff", meta.bytes.diff));
        }
    }
    format!("  ↳ {}", parts.join(", "))
}

/// `tokens: 24 in (10 cached), 40 out, cost $0.0012` — plain numbers, absent ones left out.
pub(crate) fn usage_line(usage: &Usage) -> String {
    let mut parts = Vec::new();
    if let Some(n) = usage.input_tokens {
        match usage.cached_input_tokens.filter(|c| *c > 0) {
            Some(cached) => parts.push(format!("{n} in ({cached} cached)")),
            None => parts.push(format!("{n} in")),
        }
    }
    if let Some(n) = usage.output_tokens {
        parts.push(format!("{n} out"));
    }
    let mut line = if parts.is_empty() {
        String::new()
    } else {
        format!("tokens: {}", parts.join(", "))
    };
    if let Some(cost) = usage.cost_usd {
        line.push_str(&format!(
            "{}cost {}",
            if line.is_empty() { "" } else { ", " },
            display::usd(cost)
        ));
    }
    line
}

/// What [`Pretty::wrapper`] prints for assistant text, for the prompt's terminal test.
#[cfg(test)]
pub(crate) fn sanitized_text_for_tests(text: &str) -> String {
    display::text(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_api::kit::transcript::NewItem;

    #[test]
    fn usage_is_plain_numbers() {
        let mut usage = Usage::default();
        usage.input_tokens = Some(24);
        usage.output_tokens = Some(40);
        assert_eq!(usage_line(&usage), "tokens: 24 in, 40 out");
        usage.cost_usd = Some(0.5);
        assert_eq!(usage_line(&usage), "tokens: 24 in, 40 out, cost $0.5000");
    }

    #[test]
    fn tool_lines_show_the_command_inert() {
        let mut transcript = agent_api::kit::transcript::Transcript::new("s".into(), false);
        let id = transcript.start_item(NewItem::tool_call(
            "Bash",
            r#"{"command":"ls -la\u001b[2J"}"#,
            "c1",
        ));
        transcript.complete_item(&id);
        let events: Vec<_> = transcript.drain().collect();
        let item = events
            .iter()
            .find_map(|e| match &e.body {
                UniversalEventBody::ItemCompleted(d) => Some(d.item.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(tool_call_line(&item), "⚙ Bash: ls -la\\e[2J");
    }

    #[test]
    fn tool_lines_show_the_typed_command_and_cwd_whatever_the_arguments() {
        // ACP arguments carry a title, not the command: the typed field is what names it.
        let meta = agent_api::universal::ToolMeta::default()
            .with_shell_fields(&serde_json::json!({"command": "cargo test", "cwd": "/w"}));
        let mut transcript = agent_api::kit::transcript::Transcript::new("s".into(), false);
        let id = transcript
            .start_item(NewItem::tool_call("execute", r#"{"title":"Run tests"}"#, "c1").tool(meta));
        let item = transcript.open_item(&id).unwrap().clone();
        assert_eq!(tool_call_line(&item), "⚙ execute: cargo test (in /w)");
    }
}
