//! Pretty printing of events for a person at a terminal.

use std::io::Write;

use agent_api::universal::{UniversalEvent, UniversalEventBody};
use agent_api::{AgentWrapperEvent, AgentWrapperEventKind as Kind, Channel};

/// Prints wrapper events as a readable stream: text inline as it arrives, everything else on
/// its own line.
#[derive(Default)]
pub struct Pretty {
    channel: Option<Channel>,
    mid_line: bool,
}

impl Pretty {
    fn line(&mut self, out: &mut impl Write, text: &str) {
        if self.mid_line {
            let _ = writeln!(out);
            self.mid_line = false;
        }
        self.channel = None;
        let _ = writeln!(out, "{text}");
    }

    /// Ends the current line after a message completes, so the next message starts fresh.
    pub fn end_of_message(&mut self, out: &mut impl Write) {
        if self.mid_line {
            let _ = writeln!(out);
            self.mid_line = false;
        }
        self.channel = None;
    }

    /// Prints one wrapper event.
    pub fn wrapper(&mut self, out: &mut impl Write, event: &AgentWrapperEvent) {
        match event.kind {
            Kind::TextOutput => {
                let channel = event.channel.clone().unwrap_or(Channel::Assistant);
                if self.channel.as_ref() != Some(&channel) {
                    if self.mid_line {
                        let _ = writeln!(out);
                    }
                    let _ = match &channel {
                        Channel::Assistant => Ok(()),
                        Channel::Reasoning => write!(out, "[thinking] "),
                        other => write!(out, "[{other}] "),
                    };
                    self.channel = Some(channel);
                }
                let _ = write!(out, "{}", event.text.as_deref().unwrap_or_default());
                self.mid_line = true;
            }
            Kind::ToolCall | Kind::ToolResult => {
                let tool = event.data.as_ref().and_then(|d| d.get("tool"));
                let field = |k: &str| tool.and_then(|t| t.get(k)).and_then(|v| v.as_str()).unwrap_or("?").to_string();
                let what = if event.kind == Kind::ToolCall { "tool call" } else { "tool result" };
                let exit = tool.and_then(|t| t.get("exit_code")).and_then(|v| v.as_i64()).map(|c| format!(" exit {c}")).unwrap_or_default();
                let name = tool.and_then(|t| t.get("tool_name")).and_then(|v| v.as_str()).unwrap_or("tool");
                self.line(out, &format!("⚙ {what} {name} [{}] {}{exit}", field("phase"), field("status")));
            }
            Kind::Status => self.line(out, &format!("· {}", event.message.as_deref().unwrap_or_default())),
            Kind::Error => self.line(out, &format!("✗ {}", event.message.as_deref().unwrap_or_default())),
            _ => self.line(out, &format!("? {}", event.message.as_deref().unwrap_or("unclassified event"))),
        }
        let _ = out.flush();
    }

    /// Prints one universal event as a one-line summary.
    pub fn universal(&mut self, out: &mut impl Write, event: &UniversalEvent) {
        let detail = match &event.body {
            UniversalEventBody::ItemDelta(d) => format!("{:?}", d.delta),
            UniversalEventBody::ItemStarted(d) | UniversalEventBody::ItemCompleted(d) => {
                format!("{} {:?} {:?}", d.item.item_id, d.item.kind, d.item.status)
            }
            UniversalEventBody::Error(e) => e.message.clone(),
            UniversalEventBody::PermissionRequested(p) | UniversalEventBody::PermissionResolved(p) => {
                format!("{} {:?} {}", p.permission_id, p.status, p.action)
            }
            UniversalEventBody::QuestionRequested(q) | UniversalEventBody::QuestionResolved(q) => {
                format!("{} {:?} {}", q.question_id, q.status, q.prompt)
            }
            _ => String::new(),
        };
        let source = if event.synthetic { "daemon" } else { "agent" };
        self.line(out, &format!("#{:<4} {:<20} {source:<6} {detail}", event.sequence, event.type_name()));
    }
}
