//! A protocol for the fake CLI (`fake_agent_cli`) used by the fault tests and benchmarks.

use agent_api::kit::transcript::NewItem;
use agent_api::kit::{parse_typed, parse_value, Ctx, ExitInfo, LineStr, Protocol, Unparsed};
use agent_api::universal::ItemRole;
use agent_api::{AgentError, RunCompletion};
use serde_json::Value;

/// Understands the fake CLI's lines: `text` becomes assistant text; `pid` and `echo` become status items.
#[derive(Default)]
pub struct FakeProtocol {
    message: Option<String>,
}

/// A `text` line, read in place (as a backend reads its most frequent lines: see
/// [`parse_typed`]).
#[derive(serde::Deserialize)]
struct TextLine<'a> {
    #[serde(rename = "type", borrow)]
    kind: LineStr<'a>,
    #[serde(borrow)]
    text: Option<LineStr<'a>>,
}

impl FakeProtocol {
    fn text(&mut self, text: &str, ctx: &mut Ctx<'_>) {
        let id = self.message.get_or_insert_with(|| {
            ctx.transcript
                .start_item(NewItem::message(ItemRole::Assistant))
        });
        ctx.transcript.delta(id, text);
    }
}

impl Protocol for FakeProtocol {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn on_line(&mut self, line: &[u8], ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match parse_typed::<TextLine>(line) {
            Some(TextLine { kind, text }) if kind.0 == "text" => {
                self.text(text.as_ref().map_or("", |t| &t.0), ctx);
                Ok(())
            }
            _ => self.on_message(parse_value(line)?, ctx),
        }
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match message["type"].as_str() {
            Some("text") => {
                self.text(message["text"].as_str().unwrap_or_default(), ctx);
                Ok(())
            }
            Some("pid") | Some("echo") => {
                ctx.transcript
                    .status(message["type"].as_str().unwrap(), Some(message.to_string()));
                Ok(())
            }
            _ => Err(Unparsed("unknown fake line".into())),
        }
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        if let Some(id) = self.message.take() {
            ctx.transcript.complete_item(&id);
        }
        if exit.success() {
            Ok(RunCompletion::new())
        } else {
            Err(exit.early_exit_error())
        }
    }
}

impl std::fmt::Debug for FakeProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeProtocol").finish_non_exhaustive()
    }
}
