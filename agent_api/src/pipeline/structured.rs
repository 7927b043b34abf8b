//! Structured output: the final answer as a JSON value that fits the request's schema, for every
//! agent. Where the CLI validates natively (a `--json-schema` flag, an `outputSchema` field) the
//! agent is held to the schema by its own CLI; elsewhere [`prompt_with_schema`] puts the schema
//! in the prompt. Either way the driver checks the answer with [`conform`] when the run ends: a
//! non-conforming answer is [`AgentError::StructuredOutput`].
//!
//! ```
//! use agent_api::kit::structured::conform;
//! use agent_api::RunCompletion;
//! let schema = serde_json::json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}});
//! # #[cfg(feature = "structured-output")] {
//! let done = conform(&schema, RunCompletion::new().with_final_text("```json\n{\"n\": 3}\n```")).unwrap();
//! assert_eq!(done.structured_output, Some(serde_json::json!({"n": 3})));
//! assert!(conform(&schema, RunCompletion::new().with_final_text("{\"n\": \"three\"}")).is_err());
//! # }
//! // Without the `structured-output` feature there is no validator: every check is refused.
//! # #[cfg(not(feature = "structured-output"))]
//! assert!(matches!(
//!     conform(&schema, RunCompletion::new().with_final_text("{}")),
//!     Err(agent_api::AgentError::FeatureNotBuilt { .. })
//! ));
//! ```

use serde_json::Value;

use crate::guards::bounds::{truncate_message, MESSAGE_BOUND};
use crate::vocabulary::error::AgentError;
use crate::vocabulary::run::RunCompletion;

/// Checks `schema` before spawn: a schema that is not valid JSON Schema is refused, and so is any
/// schema when this build has no `structured-output` feature.
pub fn check_schema(schema: &Value) -> Result<(), AgentError> {
    compile(schema).map(drop)
}

#[cfg(feature = "structured-output")]
fn compile(schema: &Value) -> Result<jsonschema::Validator, AgentError> {
    jsonschema::validator_for(schema).map_err(|e| AgentError::InvalidRequest {
        reason: format!(
            "the output schema is not a valid JSON Schema: {}",
            truncate_message(&e.to_string(), MESSAGE_BOUND)
        ),
    })
}

/// `prompt` followed by the instruction to answer with JSON that fits `schema`: the SDK's way of
/// asking for structured output from an agent whose CLI has no schema flag.
pub fn prompt_with_schema(prompt: &str, schema: &Value) -> String {
    format!(
        "{prompt}\n\nEnd your work with a final answer that is only a JSON value (no prose, no code fence) fitting this JSON Schema:\n{schema}"
    )
}

/// `request` as an agent without a schema flag gets it: the output schema, if any, in the prompt.
pub fn ask_in_prompt(
    mut request: crate::vocabulary::request::RunRequest,
) -> crate::vocabulary::request::RunRequest {
    if let Some(schema) = &request.portable.output_schema {
        request.prompt.text = prompt_with_schema(&request.prompt.text, schema);
    }
    request
}

#[cfg(not(feature = "structured-output"))]
fn compile(_: &Value) -> Result<std::convert::Infallible, AgentError> {
    crate::vocabulary::capability::check_built(agent_api_capabilities::OUTPUT_SCHEMA)?;
    unreachable!("OUTPUT_SCHEMA is unbuilt without the structured-output feature")
}

/// Checks a successful run's answer against `schema` and stores the parsed value in
/// [`RunCompletion::structured_output`]. The value is what the agent reported as structured
/// output, if anything, else the final text parsed as JSON (inside a Markdown code fence or not).
pub fn conform(schema: &Value, mut completion: RunCompletion) -> Result<RunCompletion, AgentError> {
    let failed = |reason: String| AgentError::StructuredOutput {
        reason: truncate_message(&reason, MESSAGE_BOUND),
    };
    let value = match completion.structured_output.take() {
        Some(value) => value,
        None => {
            let text = completion
                .final_text
                .as_deref()
                .ok_or_else(|| failed("the agent gave no final answer".into()))?;
            serde_json::from_str(unfence(text))
                .map_err(|e| failed(format!("the final answer is not JSON ({e})")))?
        }
    };
    #[cfg(feature = "structured-output")]
    if let Err(error) = compile(schema)?.validate(&value) {
        let path = error.instance_path().to_string();
        let at = if path.is_empty() {
            String::new()
        } else {
            format!(" (at {path})")
        };
        return Err(failed(format!("{error}{at}")));
    }
    #[cfg(not(feature = "structured-output"))]
    compile(schema)?;
    completion.structured_output = Some(value);
    Ok(completion)
}

/// The text inside a Markdown code fence (```` ```json … ``` ````), or the trimmed text.
fn unfence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

#[cfg(all(test, not(feature = "structured-output")))]
mod without_the_feature {
    use super::*;

    #[test]
    fn a_schema_is_refused_before_spawn_naming_the_feature() {
        let error = check_schema(&serde_json::json!({"type": "object"})).unwrap_err();
        assert!(
            matches!(&error, AgentError::FeatureNotBuilt { feature, .. } if feature == "structured-output"),
            "{error}"
        );
        // The request that carries such a schema is refused by the contract's checks
        // (`contract/backend.rs`), which call this one.
    }

    #[test]
    fn a_backend_does_not_advertise_what_this_build_cannot_do() {
        let set = crate::CapabilitySet::from_ids([
            agent_api_capabilities::RUN,
            agent_api_capabilities::OUTPUT_SCHEMA,
        ]);
        let set = set.in_this_build();
        assert!(
            set.contains(agent_api_capabilities::RUN)
                && !set.contains(agent_api_capabilities::OUTPUT_SCHEMA)
        );
    }
}

#[cfg(all(test, feature = "structured-output"))]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}, "additionalProperties": false})
    }

    #[test]
    fn the_agents_own_structured_value_wins_over_the_text() {
        let mut completion = RunCompletion::new().with_final_text("Done.");
        completion.structured_output = Some(json!({"city": "Lyon"}));
        assert_eq!(
            conform(&schema(), completion).unwrap().structured_output,
            Some(json!({"city": "Lyon"}))
        );
    }

    #[test]
    fn non_conforming_or_missing_answers_are_one_typed_error_with_the_reason() {
        for (text, needle) in [
            (Some("{\"town\": \"Lyon\"}"), "town"),
            (Some("Lyon"), "not JSON"),
            (Some("```json\n{\"city\": 3}\n```"), "string"),
            (None, "no final answer"),
        ] {
            let completion = RunCompletion {
                final_text: text.map(str::to_string),
                ..RunCompletion::new()
            };
            match conform(&schema(), completion) {
                Err(AgentError::StructuredOutput { reason }) => {
                    assert!(reason.contains(needle), "{text:?}: {reason}")
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn fenced_and_bare_json_both_parse() {
        assert_eq!(unfence("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(unfence("  {\"a\":1}\n"), "{\"a\":1}");
        assert_eq!(unfence("```\n[1]\n```"), "[1]");
    }

    #[test]
    fn an_invalid_schema_is_refused_before_spawn() {
        assert!(matches!(
            compile(&json!({"type": 12})),
            Err(AgentError::InvalidRequest { .. })
        ));
    }
}
