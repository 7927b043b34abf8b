//! The conformance checks every backend's tests share, and (under `tests/`) the workspace-level
//! conformance suite.
//!
//! [`record`] reads a run's universal events and projects the wrapper view from them, so one run
//! yields both views; [`problems`] lists every way a recorded run breaks the specs in `spec/`;
//! [`assert_conformant`] panics with that list.
//!
//! ```no_run
//! # async fn demo(handle: agent_api::RunHandle) {
//! let run = agent_api_conformance::record(handle).await;
//! agent_api_conformance::assert_conformant(&run);
//! println!("{}", run.assistant_text());
//! # }
//! ```

pub mod caller_tools;
pub mod capabilities;
pub mod fake;
pub mod homes;
pub mod launchers;
pub mod logs;
pub mod props;
pub mod session;
pub mod snapshot;
pub mod source_graph;
pub mod steer;
pub mod through_bwrap;
pub mod typed;

use std::collections::HashSet;
use std::sync::OnceLock;

use agent_api::kit::projection::Projector;
use agent_api::run::within_bounds;
use agent_api::run::Channel;
use agent_api::run::TOOLS_FACET_SCHEMA;
use agent_api::universal::{DecidedBy, ItemStatus, PermissionStatus, UniversalEventBody};
use agent_api::UniversalEvent;
use agent_api::{
    AgentBackend, AgentError, AgentWrapperEvent, AgentWrapperEventKind, PermissionDecision,
    QuestionAnswer, RunCompletion, RunHandle, RunRequest,
};
use futures::StreamExt;
use serde_json::Value;

/// The seed JSON Schema of a universal event, as committed in `spec/universal-schema.json`.
pub const UNIVERSAL_SCHEMA: &str = include_str!("../../../spec/universal-schema.json");

/// Both views of one run and its completion.
#[derive(Debug)]
pub struct RunRecord {
    /// The universal events, in order.
    pub universal: Vec<UniversalEvent>,
    /// The wrapper events projected from them by the shared projection.
    pub wrapper: Vec<AgentWrapperEvent>,
    /// The completion.
    pub completion: Result<RunCompletion, AgentError>,
    /// Whether the backend advertised the tools facet.
    pub tools_structured: bool,
}

/// The labels of the status parts of the item `event` completes (none for other events).
fn status_labels_of(event: &UniversalEvent) -> impl Iterator<Item = &str> {
    event
        .completed_item()
        .into_iter()
        .flat_map(|item| &item.content)
        .filter_map(|p| match p {
            agent_api::universal::ContentPart::Status { label, .. } => Some(label.as_str()),
            _ => None,
        })
}

impl RunRecord {
    /// How long the run went on after the agent's first streamed delta, by the events' own
    /// times (first non-synthetic delta to the last event). A test that cancels (or kills the
    /// connection) at the first delta bounds this rather than the time since the run started,
    /// which also counts the CLI's start-up: a loaded machine stretches that, not the cancel.
    /// Panics when the run streamed no delta or an event's time is not RFC 3339.
    pub fn time_after_first_delta(&self) -> std::time::Duration {
        let time = |event: &UniversalEvent| {
            humantime::parse_rfc3339(&event.time)
                .unwrap_or_else(|e| panic!("event time {:?}: {e}", event.time))
        };
        let first = self
            .universal
            .iter()
            .find(|e| matches!(e.body, UniversalEventBody::ItemDelta(_)) && !e.synthetic)
            .unwrap_or_else(|| panic!("the run streamed no delta: {:?}", self.types()));
        let last = self.universal.last().expect("a delta was found");
        time(last).duration_since(time(first)).unwrap_or_default()
    }

    /// The assistant's answer text as the wrapper view streamed it.
    pub fn assistant_text(&self) -> String {
        self.wrapper
            .iter()
            .filter_map(AgentWrapperEvent::assistant_text)
            .collect()
    }

    /// The text of every completed assistant message that is not reasoning, in order; a message
    /// that only carried tool calls gives an empty string.
    pub fn assistant_messages(&self) -> Vec<String> {
        self.completed_items(agent_api::universal::ItemKind::Message)
            .into_iter()
            .filter(|item| {
                item.role == Some(agent_api::universal::ItemRole::Assistant) && !item.is_reasoning()
            })
            .map(|item| item.text())
            .collect()
    }

    /// Every completed item of one kind, in order.
    pub fn completed_items(
        &self,
        kind: agent_api::universal::ItemKind,
    ) -> Vec<agent_api::universal::UniversalItem> {
        self.universal
            .iter()
            .filter_map(UniversalEvent::completed_item)
            .filter(|item| item.kind == kind)
            .cloned()
            .collect()
    }

    /// The text the wrapper view streamed on `channel`.
    pub fn text_on(&self, channel: &Channel) -> String {
        self.wrapper
            .iter()
            .filter_map(|e| e.text_on(channel))
            .collect()
    }

    /// The labels of every completed status item, in order.
    pub fn status_labels(&self) -> Vec<String> {
        self.universal
            .iter()
            .filter_map(|e| status_labels_of(e).next().map(str::to_string))
            .collect()
    }

    /// Whether a status item labelled `label` completes before the run's terminal error (and
    /// there is one).
    pub fn status_before_terminal_error(&self, label: &str) -> bool {
        let status = self
            .universal
            .iter()
            .position(|e| status_labels_of(e).any(|l| l == label));
        let terminal = self
            .universal
            .iter()
            .position(UniversalEvent::is_terminal_error);
        matches!((status, terminal), (Some(s), Some(t)) if s < t)
    }

    /// The dotted types of the universal events, in order.
    pub fn types(&self) -> Vec<&'static str> {
        self.universal
            .iter()
            .map(UniversalEvent::type_name)
            .collect()
    }

    /// The run's story ([`Story`]).
    pub fn story(&self) -> Story {
        use agent_api::universal::ItemKind;
        let mut story = Story::default();
        for event in &self.universal {
            let (line, entry) = match (event.completed_item(), event.permission()) {
                (Some(item), _) => match item.kind {
                    ItemKind::Message => (&mut story.messages, format!("{:?}", item.role)),
                    ItemKind::ToolCall | ItemKind::ToolResult => {
                        (&mut story.tools, format!("{:?}", item.kind))
                    }
                    _ => continue,
                },
                (None, Some(p)) if event.type_name() == "permission.resolved" => {
                    (&mut story.tools, format!("permission {:?}", p.status))
                }
                _ => continue,
            };
            if line.last() != Some(&entry) {
                line.push(entry);
            }
        }
        // A tool call and the decision on its permission can reach the SDK on two channels (the
        // agent's output, and a permission relay through a far launcher): which completes first is
        // timing, so a decision is told before the call it follows directly.
        for at in 1..story.tools.len() {
            if story.tools[at].starts_with("permission ") && story.tools[at - 1] == "ToolCall" {
                story.tools.swap(at - 1, at);
            }
        }
        story
    }

    /// The universal events of one type.
    pub fn of_type<'a>(
        &'a self,
        type_name: &'a str,
    ) -> impl Iterator<Item = &'a UniversalEvent> + 'a {
        self.universal
            .iter()
            .filter(move |e| e.type_name() == type_name)
    }

    /// The wrapper events of one kind.
    pub fn wrapper_of(
        &self,
        kind: AgentWrapperEventKind,
    ) -> impl Iterator<Item = &AgentWrapperEvent> {
        self.wrapper.iter().filter(move |e| e.kind == kind)
    }
}

/// What happened in a run, told so that two runs of one scenario compare equal: its messages (by
/// role) in order, and its tool calls, permission decisions and tool results in order, each a run of
/// the same entry counted once. The two lines are kept apart because how they interleave depends on
/// timing (a message may complete before or after the permission is decided); left out is what
/// varies between runs: status and system items (a CLI's warnings about where it runs), delta
/// chunking, and the text of tool output (process ids, timings). A permission decision is told
/// before the tool call it directly follows, since the two may arrive on different channels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Story {
    /// One entry per message: its role.
    pub messages: Vec<String>,
    /// Tool calls, permission decisions and tool results.
    pub tools: Vec<String>,
}

/// Reads a whole run as universal events and projects the wrapper view from them.
pub async fn record(handle: RunHandle) -> RunRecord {
    record_answering(handle, Answers::none()).await
}

/// How [`record_answering`] answers the run's HITL requests as they arrive.
#[derive(Debug, Clone, Default)]
pub struct Answers {
    /// The decision for every `permission.requested` (`None`: leave it unanswered).
    pub permission: Option<PermissionDecision>,
    /// The answer to every `question.requested` (`None`: leave it unanswered).
    pub question: Option<QuestionAnswer>,
    /// Cancel the run at the first `permission.requested` instead of deciding it.
    pub cancel_at_permission: bool,
    /// Cancel the run at its first `item.delta` from the agent (a turn cancelled while the agent
    /// streams; the SDK's own synthetic deltas do not count).
    pub cancel_at_delta: bool,
}

impl Answers {
    /// Answer nothing.
    pub fn none() -> Self {
        Self::default()
    }

    /// Decide every permission request with `decision`.
    pub fn permissions(decision: PermissionDecision) -> Self {
        Self {
            permission: Some(decision),
            ..Self::default()
        }
    }

    /// Cancel the run when it first asks for a permission (to prove a pending request does not
    /// keep a cancelled run alive).
    pub fn cancel_at_permission() -> Self {
        Self {
            cancel_at_permission: true,
            ..Self::default()
        }
    }

    /// Cancel the run at its first streamed delta.
    pub fn cancel_at_delta() -> Self {
        Self {
            cancel_at_delta: true,
            ..Self::default()
        }
    }

    /// Also answer every question with `text`.
    pub fn with_answer(mut self, text: &str) -> Self {
        self.question = Some(QuestionAnswer::Text(text.to_string()));
        self
    }
}

/// Like [`record`], answering permission requests and questions through the run's control as
/// they arrive. A control call that fails panics (the run offered that id, so it must take it).
pub async fn record_answering(handle: RunHandle, answers: Answers) -> RunRecord {
    let mut projector = Projector::new(handle.agent_kind().clone(), handle.tools_structured());
    let tools_structured = handle.tools_structured();
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let mut universal: Vec<UniversalEvent> = Vec::new();
    while let Some(event) = events.next().await {
        match &event.body {
            UniversalEventBody::PermissionRequested(_) if answers.cancel_at_permission => {
                control.cancel()
            }
            UniversalEventBody::ItemDelta(_) if answers.cancel_at_delta && !event.synthetic => {
                control.cancel()
            }
            UniversalEventBody::PermissionRequested(p) => {
                if let Some(decision) = answers.permission.clone() {
                    control
                        .respond_permission(&p.permission_id, decision)
                        .await
                        .expect("the run takes its own permission id");
                }
            }
            UniversalEventBody::QuestionRequested(q) => {
                if let Some(answer) = answers.question.clone() {
                    control
                        .answer_question(&q.question_id, answer)
                        .await
                        .expect("the run takes its own question id");
                }
            }
            _ => {}
        }
        universal.push(event);
    }
    let completion = completion.await;
    let wrapper = universal
        .iter()
        .flat_map(|e| projector.project(e))
        .collect();
    RunRecord {
        universal,
        wrapper,
        completion,
        tools_structured,
    }
}

/// Runs `request` on `backend`, deciding each permission with `decision` (`None`: the policy
/// decides), cancelling at the agent's first delta when asked.
pub async fn drive(
    backend: &dyn AgentBackend,
    request: RunRequest,
    decision: Option<PermissionDecision>,
    cancel_at_delta: bool,
) -> RunRecord {
    let handle = backend.run(request).await.expect("run starts");
    record_answering(
        handle,
        Answers {
            permission: decision,
            cancel_at_delta,
            ..Answers::none()
        },
    )
    .await
}

/// The run asked one permission, and it was resolved once: approved or denied, by `by`.
pub fn assert_one_permission(run: &RunRecord, approved: bool, by: DecidedBy) {
    assert_eq!(
        run.of_type("permission.requested").count(),
        1,
        "{:?}",
        run.types()
    );
    let resolved: Vec<_> = run.of_type("permission.resolved").collect();
    assert_eq!(resolved.len(), 1, "{:?}", run.types());
    let status = resolved[0].permission().map(|p| p.status);
    let expected = if approved {
        PermissionStatus::Approved
    } else {
        PermissionStatus::Denied
    };
    assert_eq!(
        (status, resolved[0].decided_by()),
        (Some(expected), Some(by))
    );
}

/// Runs `request` (in plan mode) on `backend`, answering plan mode's exit question with
/// `answer`; checks the run is conformant and asked that question ([`assert_exit_plan_asked`])
/// with `plan` in it. Returns the run and its final text.
pub async fn run_answering_exit_plan(
    backend: &dyn AgentBackend,
    request: RunRequest,
    answer: &str,
    plan: &str,
) -> (RunRecord, String) {
    let handle = backend
        .run(request.with_mode(agent_api::request::AgentMode::Plan))
        .await
        .expect("run starts");
    let run = record_answering(handle, Answers::none().with_answer(answer)).await;
    assert_conformant(&run);
    assert_exit_plan_asked(&run, plan);
    let text = run
        .completion
        .as_ref()
        .expect("the run ends well")
        .final_text
        .clone()
        .unwrap_or_default();
    (run, text)
}

/// The run asked plan mode's exit as its one typed question (`plan` in its text, the options
/// every backend offers for it), and no permission.
pub fn assert_exit_plan_asked(run: &RunRecord, plan: &str) {
    let asked: Vec<_> = run
        .universal
        .iter()
        .filter_map(UniversalEvent::question_request)
        .collect();
    assert_eq!(asked.len(), 1, "{:?}", run.types());
    assert!(
        asked[0].prompt.contains(plan),
        "the plan is not in the question: {:?}",
        asked[0].prompt
    );
    assert_eq!(asked[0].options, agent_api::kit::hitl::EXIT_PLAN_OPTIONS);
    assert_eq!(
        run.of_type("permission.requested").count(),
        0,
        "{:?}",
        run.types()
    );
}

fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let schema: Value =
            serde_json::from_str(UNIVERSAL_SCHEMA).expect("spec/universal-schema.json is JSON");
        jsonschema::validator_for(&schema).expect("spec/universal-schema.json is a valid schema")
    })
}

/// Schema errors of one universal event (empty when it is valid).
pub fn schema_errors(event: &UniversalEvent) -> Vec<String> {
    let value = serde_json::to_value(event).expect("events serialize");
    validator()
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Every way the recorded run breaks the specs: schema, sequence, lifecycle, bounds, facet,
/// terminal-error and safety rules. Empty for a conformant run.
pub fn problems(run: &RunRecord) -> Vec<String> {
    let mut out = Vec::new();
    universal_problems(&run.universal, &mut out);
    wrapper_problems(run, &mut out);
    out
}

pub(crate) fn universal_problems(events: &[UniversalEvent], out: &mut Vec<String>) {
    for (i, event) in events.iter().enumerate() {
        if event.sequence != i as u64 + 1 {
            out.push(format!(
                "event {i} has sequence {} (want {})",
                event.sequence,
                i + 1
            ));
        }
        if event.synthetic != (event.source == agent_api::universal::EventSource::Daemon) {
            out.push(format!(
                "event {} synthetic flag does not mirror its source",
                event.sequence
            ));
        }
        for error in schema_errors(event) {
            out.push(format!(
                "event {} ({}) fails the schema: {error}",
                event.sequence,
                event.type_name()
            ));
        }
        if let UniversalEventBody::AgentUnparsed(u) = &event.body {
            out.push(format!(
                "event {} is agent.unparsed: {} ({})",
                event.sequence, u.error, u.location
            ));
        }
    }
    if events.first().map(UniversalEvent::type_name) != Some("session.started") {
        out.push("the transcript does not start with session.started".into());
    }
    if events.last().map(UniversalEvent::type_name) != Some("session.ended") {
        out.push("the transcript does not end with session.ended".into());
    }
    if events
        .iter()
        .filter(|e| e.type_name() == "session.ended")
        .count()
        > 1
    {
        out.push("more than one session.ended".into());
    }
    let mut open = HashSet::new();
    for event in events {
        match &event.body {
            UniversalEventBody::ItemStarted(d) if !open.insert(d.item.item_id.clone()) => {
                out.push(format!("item {} started twice", d.item.item_id));
            }
            UniversalEventBody::ItemDelta(d) if !open.contains(&*d.item_id) => {
                out.push(format!("delta for item {} that is not open", d.item_id))
            }
            UniversalEventBody::ItemCompleted(d) => {
                if !open.remove(&d.item.item_id) {
                    out.push(format!(
                        "item {} completed without starting",
                        d.item.item_id
                    ));
                }
                if d.item.status == ItemStatus::InProgress {
                    out.push(format!(
                        "item {} completed with status in_progress",
                        d.item.item_id
                    ));
                }
            }
            _ => {}
        }
    }
    for id in open {
        out.push(format!("item {id} is still in progress at the end"));
    }
    approved_calls_have_tool_items(events, out);
    permission_commands_match_their_calls(events, out);
}

/// One failure is one error event: the run's terminal error is not preceded by an `error` event the
/// agent reported with nothing the agent did in between (the same failure, told twice). Errors the
/// agent reports and then goes on from stay: they are not what the run failed of.
pub fn failure_reported_once(events: &[UniversalEvent], out: &mut Vec<String>) {
    let Some(terminal) = events.iter().position(UniversalEvent::is_terminal_error) else {
        return;
    };
    for event in events[..terminal].iter().rev() {
        match &event.body {
            UniversalEventBody::Error(e) => {
                out.push(format!(
                    "error event {} ({:?}) reports the failure the terminal error reports again",
                    event.sequence, e.message
                ));
                return;
            }
            _ if event.source == agent_api::universal::EventSource::Agent => return,
            _ => {}
        }
    }
}

/// A permission that names its tool call (`call_id`) names the same shell command as that call's
/// typed `ToolMeta.command`: an allow-list written against `PermissionDetails::command` decides on
/// what will run (issue 39). A call whose items carry no command is not checked; the call's items
/// are read whenever they come (some agents give the command only on the result).
pub fn permission_commands_match_their_calls(events: &[UniversalEvent], out: &mut Vec<String>) {
    let mut commands: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for event in events {
        if let UniversalEventBody::ItemStarted(d) | UniversalEventBody::ItemCompleted(d) =
            &event.body
        {
            let result_of = d.item.content.iter().find_map(|p| match p {
                agent_api::universal::ContentPart::ToolResult { call_id, .. } => {
                    Some(call_id.as_str())
                }
                _ => None,
            });
            let call_id = d.item.tool_call().map(|c| c.call_id).or(result_of);
            if let (Some(call_id), Some(command)) = (
                call_id,
                d.item.tool.as_ref().and_then(|t| t.command.as_deref()),
            ) {
                commands.entry(call_id).or_insert(command);
            }
        }
    }
    for event in events {
        let Some(p) = event.permission_request() else {
            continue;
        };
        let Some(call_id) = p.details.call_id.as_deref() else {
            continue;
        };
        if let Some(&command) = commands.get(call_id) {
            if p.details.command.as_deref() != Some(command) {
                out.push(format!(
                    "permission {} names command {:?}, but its tool call {call_id} runs {command:?}",
                    p.permission_id, p.details.command
                ));
            }
        }
    }
}

/// An approved permission that names its tool call (`call_id`) is followed through: the tool call
/// shows in the transcript as a tool call item with that `call_id`, so a caller can link the two.
fn approved_calls_have_tool_items(events: &[UniversalEvent], out: &mut Vec<String>) {
    let calls: HashSet<&str> = events
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::ItemStarted(d) | UniversalEventBody::ItemCompleted(d) => {
                d.item.tool_call().map(|c| c.call_id)
            }
            _ => None,
        })
        .collect();
    for event in events {
        if let UniversalEventBody::PermissionResolved(p) = &event.body {
            let approved = p.status == agent_api::universal::PermissionStatus::Approved;
            if let Some(call_id) = p
                .details
                .call_id
                .as_deref()
                .filter(|id| approved && !calls.contains(id))
            {
                out.push(format!(
                    "approved permission {} names tool call {call_id}, which no tool call item has",
                    p.permission_id
                ));
            }
        }
    }
}

pub(crate) fn wrapper_problems(run: &RunRecord, out: &mut Vec<String>) {
    for (i, event) in run.wrapper.iter().enumerate() {
        if !within_bounds(event) {
            out.push(format!("wrapper event {i} breaks a bound"));
        }
        let is_tool = matches!(
            event.kind,
            AgentWrapperEventKind::ToolCall | AgentWrapperEventKind::ToolResult
        );
        if is_tool && run.tools_structured {
            let schema = event
                .data
                .as_ref()
                .and_then(|d| d.get("schema"))
                .and_then(Value::as_str);
            let dropped = event
                .data
                .as_ref()
                .is_some_and(|d| d.get("dropped").is_some());
            if schema != Some(TOOLS_FACET_SCHEMA) && !dropped {
                out.push(format!(
                    "wrapper event {i} ({:?}) has no tools facet",
                    event.kind
                ));
            }
        }
    }
    let errors: Vec<usize> = run
        .wrapper
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == AgentWrapperEventKind::Error)
        .map(|(i, _)| i)
        .collect();
    match &run.completion {
        Ok(_) if !errors.is_empty() => out.push(format!(
            "a successful run has {} Error events",
            errors.len()
        )),
        Err(e) => {
            if errors.len() != 1 {
                out.push(format!(
                    "a failed run has {} Error events (want exactly 1)",
                    errors.len()
                ));
            } else {
                let message = run.wrapper[errors[0]].message.clone().unwrap_or_default();
                let expected = agent_api::kit::bounds::truncate_message(
                    &e.to_string(),
                    agent_api::kit::bounds::MESSAGE_BOUND,
                );
                if message != expected {
                    out.push(format!("terminal Error message {message:?} differs from the completion error {expected:?}"));
                }
                // Only status events about the session's end may follow the terminal error.
                if run.wrapper[errors[0] + 1..]
                    .iter()
                    .any(|e| e.kind != AgentWrapperEventKind::Status)
                {
                    out.push("events other than the session end follow the terminal Error".into());
                }
            }
        }
        Ok(_) => {}
    }
}

/// Panics with every problem of the run, if it has any.
pub fn assert_conformant(run: &RunRecord) {
    let problems = problems(run);
    assert!(
        problems.is_empty(),
        "the run breaks the specs:\n- {}",
        problems.join("\n- ")
    );
}

#[cfg(test)]
mod tests {
    use agent_api::kit::hitl::{Hitl, PermissionRequest};
    use agent_api::kit::transcript::{NewItem, Transcript};
    use agent_api::request::ToolCategory;
    use agent_api::universal::PermissionDetails;
    use agent_api::PermissionPolicy;

    /// A transcript with one approved permission for `call_1`, and a tool call item for `item_call_id`.
    fn approved_call(item_call_id: Option<&str>) -> Vec<String> {
        let mut t = Transcript::new("sess_1".into(), false);
        let mut hitl: Hitl<(), ()> = Hitl::live(PermissionPolicy::ApproveAll);
        let details = PermissionDetails::default().call_id(Some("call_1"));
        hitl.request_permission(
            &mut t,
            PermissionRequest::new("p1", ToolCategory::Shell, "shell: ls").details(details),
            (),
        );
        if let Some(call_id) = item_call_id {
            let id = t.start_item(NewItem::tool_call("shell", "{}", call_id));
            t.complete_item(&id);
        }
        t.end(agent_api::kit::transcript::SessionEnd::completed());
        let events: Vec<_> = t.drain().collect();
        let mut out = Vec::new();
        super::universal_problems(&events, &mut out);
        out
    }

    #[test]
    fn an_approved_permission_must_name_a_tool_call_of_the_transcript() {
        assert_eq!(approved_call(Some("call_1")), Vec::<String>::new());
        let problems = approved_call(Some("call_2"));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("call_1"), "{problems:?}");
        assert_eq!(approved_call(None).len(), 1);
    }
}
