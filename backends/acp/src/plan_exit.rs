//! Plan mode's exit over ACP. An agent in plan mode asks to leave it with a
//! `session/request_permission` for its exit-plan tool; the caller sees the typed question every
//! backend asks for it ([`agent_api::kit::hitl::QuestionRequest::exit_plan`]: the plan in its
//! text, [`EXIT_PLAN_OPTIONS`]), and the answer goes back as the permission's outcome: the first
//! option selects the agent's option that leaves plan mode for its default mode, anything else
//! its rejection (the agent stays in plan mode). What marks the request is the agent's own
//! ([`ExitPlan`], in its [`crate::AgentCli`]).

use std::path::PathBuf;

use agent_api::kit::bounds::utf8_prefix;
use agent_api::kit::hitl::EXIT_PLAN_OPTIONS;
use agent_api::{PermissionDecision, QuestionAnswer};
use agent_client_protocol_schema::{PermissionOption, ToolCallUpdateFields, ToolKind};
use serde_json::Value;

use crate::fs::ConfinedFs;

/// How an agent asks over `session/request_permission` to leave plan mode, and where its plan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExitPlan {
    /// A `switch_mode` tool call whose raw input holds the plan as `plan`.
    SwitchModeWithPlan,
    /// A tool call titled `<prefix><path>` (such as `Requesting plan approval for: `), the plan
    /// in the file at `path`.
    PlanFileTitled(&'static str),
}

/// Where the plan of a recognized request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlanSource {
    /// Its text.
    Text(String),
    /// A file the agent names.
    File(PathBuf),
}

impl ExitPlan {
    /// The plan of `fields` when they are this agent's request to leave plan mode.
    pub(crate) fn recognize(self, fields: &ToolCallUpdateFields) -> Option<PlanSource> {
        match self {
            ExitPlan::SwitchModeWithPlan => {
                if fields.kind != Some(ToolKind::SwitchMode) {
                    return None;
                }
                let plan = fields
                    .raw_input
                    .as_ref()
                    .and_then(|input| input.get("plan"))
                    .and_then(Value::as_str);
                Some(PlanSource::Text(plan.unwrap_or_default().to_string()))
            }
            ExitPlan::PlanFileTitled(prefix) => {
                let path = fields.title.as_deref()?.strip_prefix(prefix)?;
                Some(PlanSource::File(PathBuf::from(path)))
            }
        }
    }
}

/// The plan's text for the question: a named file is read only through the run's confined file
/// system (inside the working directory, bounded, no link followed); any other is named, not read.
pub(crate) fn plan_text(source: PlanSource, fs: Option<&ConfinedFs>) -> String {
    match source {
        PlanSource::Text(text) => text,
        PlanSource::File(path) => {
            let shown = utf8_prefix(&path.display().to_string(), 512).to_string();
            match fs.map(|fs| fs.read_text(&path)) {
                Some(Ok(text)) => text,
                Some(Err(refusal)) => format!("(the plan file {shown} cannot be shown: {refusal})"),
                None => {
                    format!("(the plan is in {shown}; this run does not read the agent's files)")
                }
            }
        }
    }
}

/// Whether `answer` approves the plan (its first option).
pub(crate) fn approves(answer: &QuestionAnswer) -> bool {
    matches!(answer, QuestionAnswer::Text(text) if text == EXIT_PLAN_OPTIONS[0])
}

/// The option that answers the exit question: approving selects the agent's `proceed_once`
/// (back to its default mode, each later write asked again, where the agent names it so), else
/// its first allow option; anything else its reject option.
pub(crate) fn option(options: &[PermissionOption], approved: bool) -> Option<&PermissionOption> {
    if approved {
        options
            .iter()
            .find(|o| o.option_id.0.as_ref() == "proceed_once")
            .or_else(|| crate::permission_options::pick_option(options, &PermissionDecision::Allow))
    } else {
        crate::permission_options::pick_option(options, &PermissionDecision::Deny { message: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::PermissionOptionKind;
    use serde_json::json;

    fn fields(value: Value) -> ToolCallUpdateFields {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn each_agents_request_is_recognized_and_no_other() {
        let switch_mode = fields(
            json!({"kind": "switch_mode", "title": "Plan:", "rawInput": {"plan": "1. Write it"}}),
        );
        assert_eq!(
            ExitPlan::SwitchModeWithPlan.recognize(&switch_mode),
            Some(PlanSource::Text("1. Write it".into()))
        );
        let edit = fields(json!({"kind": "edit", "title": "Plan:", "rawInput": {"plan": "x"}}));
        assert_eq!(ExitPlan::SwitchModeWithPlan.recognize(&edit), None);
        let prefix = "Requesting plan approval for: ";
        let titled = fields(
            json!({"kind": "other", "title": "Requesting plan approval for: /w/plans/p.md"}),
        );
        assert_eq!(
            ExitPlan::PlanFileTitled(prefix).recognize(&titled),
            Some(PlanSource::File("/w/plans/p.md".into()))
        );
        let shell = fields(json!({"kind": "execute", "title": "rm -rf /"}));
        assert_eq!(ExitPlan::PlanFileTitled(prefix).recognize(&shell), None);
    }

    #[test]
    fn a_plan_file_is_read_only_inside_the_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plan.md"), "1. Write plan.txt").unwrap();
        let fs = ConfinedFs::new(dir.path()).unwrap();
        assert_eq!(
            plan_text(PlanSource::File(dir.path().join("plan.md")), Some(&fs)),
            "1. Write plan.txt"
        );
        let outside = plan_text(PlanSource::File("/etc/passwd".into()), Some(&fs));
        assert!(
            outside.starts_with("(the plan file /etc/passwd cannot be shown")
                && !outside.contains("root:"),
            "{outside}"
        );
        assert!(plan_text(PlanSource::File("/etc/passwd".into()), None).contains("does not read"));
    }

    #[test]
    fn approval_selects_proceed_once_and_anything_else_the_rejection() {
        let options: Vec<PermissionOption> = serde_json::from_value(json!([
            {"optionId": "restore_previous", "name": "Yes, restore", "kind": "allow_once"},
            {"optionId": "proceed_always", "name": "Yes, auto", "kind": "allow_always"},
            {"optionId": "proceed_once", "name": "Yes", "kind": "allow_once"},
            {"optionId": "cancel", "name": "No", "kind": "reject_once"}
        ]))
        .unwrap();
        assert!(approves(&QuestionAnswer::Text(EXIT_PLAN_OPTIONS[0].into())));
        assert!(
            !approves(&QuestionAnswer::Text("not yet".into()))
                && !approves(&QuestionAnswer::Reject)
        );
        assert_eq!(
            option(&options, true)
                .map(|o| o.option_id.0.to_string())
                .as_deref(),
            Some("proceed_once")
        );
        assert_eq!(
            option(&options, false).map(|o| o.kind),
            Some(PermissionOptionKind::RejectOnce)
        );
    }
}
