//! The scripted backend's one-pass typed parse says what its `Value` path says, line kind by
//! line kind, including lines the typed parse must hand over (a field missing, `null` input,
//! an unknown type, extra fields).

use agent_api::kit::Protocol;
use agent_api_conformance::typed::assert_typed_matches_value;
use agent_api_scripted::protocol::ScriptedProtocol;

#[test]
fn every_line_kind_converts_the_same_on_both_paths() {
    let lines: &[&[u8]] = &[
        br#"{"type":"session","id":"s-1","model":"m"}"#,
        br#"{"type":"text_delta","message_id":"m1","text":"Hel"}"#,
        br#"{"text":"lo","type":"text_delta","message_id":"m1","extra":{"x":[1,2]}}"#,
        br#"{"type":"message_done","message_id":"m1","text":"Hello"}"#,
        br#"{"type":"reasoning_delta","id":"r1","text":"hmm"}"#,
        br#"{"type":"reasoning_done","id":"r1"}"#,
        br#"{"type":"tool_call","call_id":"c1","name":"shell","message_id":"m1","input":{"command":"ls"}}"#,
        br#"{"type":"tool_call","call_id":"c2","name":"shell","message_id":"m1","input":null}"#,
        br#"{"type":"permission_request","request_id":"p1","call_id":"c1","summary":"ls"}"#,
        br#"{"type":"tool_result","call_id":"c1","exit_code":0,"stdout":"ok\n","denied":false}"#,
        br#"{"type":"tool_result","call_id":"c2","exit_code":1,"stdout":"","denied":true}"#,
        br#"{"type":"tool_result","call_id":"c3","exit_code":1,"stdout":""}"#,
        br#"{"type":"question","question_id":"q1","prompt":"which?","options":["a","b"]}"#,
        br#"{"type":"error","message":"boom","code":"server_error"}"#,
        br#"{"type":"text_delta","message_id":"m2"}"#,
        br#"{"type":"text_delta","message_id":"m1","text":"esc\u00e9aped \"quote\""}"#,
        br#"{"type":"text_delta","message_id":"m1","text":"a","exit_code":"not a number"}"#,
        br#"{"type":"text_delta","message_id":"m1","text":"a","text":"twice"}"#,
        br#"{"type":"text_delta","message_id":"m1","text":"a","type":"done"}"#,
        br#"{"type":"text_delta","message_id":7,"text":"a"}"#,
        br#"{"type":"message_done","message_id":"m1"}"#,
        br#"{"type":"message_done","message_id":"m1","text":"a","type":"text_delta"}"#,
        br#"{"type":"tool_call","call_id":"c4","name":"shell","message_id":"m1"}"#,
        br#"{"type":"tool_call","call_id":"c5","name":"shell","message_id":"m1","input":{"command":"ls"},"exit_code":"x"}"#,
        br#"{"type":"tool_result","call_id":"c4","exit_code":"zero","stdout":"","denied":false}"#,
        br#"{"type":"tool_result","call_id":"c5","exit_code":0,"stdout":"a
b","denied":false,"extra":[1]}"#,
        br#"{"type":"tool_result" ,"call_id":"c6","exit_code":0,"stdout":"","denied":false}"#,
        br#"{"type":"no_such_line","message_id":"m2"}"#,
        br#"{"type":"done","status":"success","input_tokens":3,"output_tokens":4}"#,
    ];
    assert_typed_matches_value(
        || Box::new(ScriptedProtocol::replaying()) as Box<dyn Protocol>,
        lines,
    );
}
