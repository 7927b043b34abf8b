//! The backend's method and item tables match the schema the 0.169.0 CLI printed (`schema/`), so
//! every notification, server request and item type of the protocol has a mapping.

use std::collections::BTreeSet;

use agent_api_codex::schema::{
    ThreadItem, ITEM_TYPES, NOTIFICATION_METHODS, SERVER_REQUEST_METHODS,
};
use serde_json::{json, Value};

fn schema(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schema")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn methods(schema: &Value) -> BTreeSet<String> {
    schema["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|v| {
            v["properties"]["method"]["enum"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn every_schema_notification_is_known() {
    let want = methods(&schema("ServerNotification.json"));
    let have: BTreeSet<String> = NOTIFICATION_METHODS.iter().map(|s| s.to_string()).collect();
    assert_eq!(want, have);
}

#[test]
fn every_schema_server_request_is_known() {
    let want = methods(&schema("ServerRequest.json"));
    let have: BTreeSet<String> = SERVER_REQUEST_METHODS
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(want, have);
}

#[test]
fn every_schema_item_type_is_known_and_parses_from_its_required_fields() {
    let notifications = schema("ServerNotification.json");
    let variants = notifications["definitions"]["ThreadItem"]["oneOf"]
        .as_array()
        .unwrap();
    let want: BTreeSet<String> = variants
        .iter()
        .map(|v| {
            v["properties"]["type"]["enum"][0]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let have: BTreeSet<String> = ITEM_TYPES.iter().map(|s| s.to_string()).collect();
    assert_eq!(want, have);
    for kind in ITEM_TYPES {
        let item: Result<ThreadItem, _> = serde_json::from_value(json!({"type": kind, "id": "x"}));
        assert!(item.is_ok(), "{kind}: {:?}", item.err());
    }
}
