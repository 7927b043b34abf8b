//! Modes and variants (issue 41): every backend advertises `agent_api.request.modes` exactly when
//! it lists modes, and `agent_api.request.variants` exactly when it lists variants; a listed value
//! passes validation, an unlisted one is refused before spawn naming the valid ones, and a mode
//! or variant on a backend that lists none is refused naming the capability.

use std::sync::Arc;

use agent_api::capabilities as caps;
use agent_api::request::{variants_for, AgentMode};
use agent_api::{AgentBackend, AgentError, RunRequest};

fn backends() -> Vec<Arc<dyn AgentBackend>> {
    vec![
        Arc::new(agent_api_scripted::ScriptedBackend::new()),
        Arc::new(agent_api_claude_code::ClaudeCodeBackend::new(Default::default())),
        Arc::new(agent_api_codex::CodexBackend::new(Default::default())),
        Arc::new(agent_api_opencode::OpenCodeBackend::new(Default::default())),
        Arc::new(agent_api_acp::AcpBackend::gemini(Default::default())),
        Arc::new(agent_api_acp::AcpBackend::qwen(Default::default())),
        Arc::new(agent_api_acp::AcpBackend::generic(Default::default())),
        Arc::new(agent_api_amp::AmpBackend::new(Default::default())),
    ]
}

#[test]
fn capabilities_follow_the_lists_and_every_listed_value_validates() {
    for backend in backends() {
        let kind = backend.kind();
        let caps_set = backend.capabilities();
        assert_eq!(
            caps_set.contains(caps::MODES),
            !backend.modes().is_empty(),
            "{kind}: modes advertised but not listed, or listed but not advertised"
        );
        assert_eq!(
            caps_set.contains(caps::VARIANTS),
            !backend.variants().is_empty(),
            "{kind}: variants advertised but not listed, or listed but not advertised"
        );
        let mappings = backend.option_mappings();
        for (id, listed) in [(caps::MODES, !backend.modes().is_empty()), (caps::VARIANTS, !backend.variants().is_empty())] {
            assert_eq!(mappings.iter().any(|m| m.capability == id), listed, "{kind}: {id} has no row in spec/options.md");
        }
        for mode in backend.modes() {
            // Amp's modes need its API key to run; validation is what is checked here.
            let request = RunRequest::new("x").with_mode(mode.mode());
            assert!(backend.validate(&request).is_ok(), "{kind}: listed mode {} refused", mode.id);
        }
        for set in backend.variants() {
            let model = set.models.first().copied();
            for value in variants_for(backend.variants(), model) {
                let mut request = RunRequest::new("x").with_variant(*value);
                if let Some(model) = model {
                    request = request.with_model(model);
                }
                assert!(backend.validate(&request).is_ok(), "{kind}: listed variant {value} for {model:?} refused");
            }
        }
        backend
            .validate(&RunRequest::new("x").with_mode(AgentMode::Default))
            .unwrap_or_else(|e| panic!("{kind}: the default mode refused: {e}"));
    }
}

#[test]
fn unknown_values_are_refused_naming_the_valid_ones_or_the_capability() {
    for backend in backends() {
        let kind = backend.kind();
        let err = backend.validate(&RunRequest::new("x").with_mode(AgentMode::parse("no-such-mode"))).unwrap_err();
        match (&err, backend.modes().is_empty()) {
            (AgentError::UnknownMode { valid, .. }, false) => {
                assert_eq!(valid.len(), backend.modes().len() + 1, "{kind}: {err}");
                assert!(err.to_string().contains("default"), "{kind}: {err}");
            }
            (AgentError::UnsupportedCapability { capability, .. }, true) => assert_eq!(capability, caps::MODES, "{kind}"),
            _ => panic!("{kind}: {err}"),
        }
        let err = backend.validate(&RunRequest::new("x").with_variant("no-such-variant")).unwrap_err();
        match (&err, backend.variants().is_empty()) {
            (AgentError::UnknownVariant { valid, .. }, false) => assert!(!valid.is_empty(), "{kind}: {err}"),
            (AgentError::UnsupportedCapability { capability, .. }, true) => assert_eq!(capability, caps::VARIANTS, "{kind}"),
            _ => panic!("{kind}: {err}"),
        }
    }
}
