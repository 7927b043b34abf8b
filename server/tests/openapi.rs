//! `/v1/openapi.json` holds the reference's API: every path, method, parameter, status code and
//! schema, with at least its required fields and enum values.

mod common;

use std::collections::BTreeSet;

use common::*;
use serde_json::Value;

fn reference() -> Value {
    serde_json::from_str(include_str!("reference/sandbox-agent-v0.1.2-openapi.json")).unwrap()
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A schema with its `allOf` members (references resolved among `schemas`) merged into one object:
/// a flattened struct is served as `allOf`, and its fields are the schema's own.
fn merged(schema: &Value, schemas: &Value) -> Value {
    let Some(members) = schema["allOf"].as_array() else {
        return schema.clone();
    };
    let (mut properties, mut required) = (serde_json::Map::new(), Vec::new());
    for member in members {
        let member = match member["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
        {
            Some(name) => merged(&schemas[name], schemas),
            None => merged(member, schemas),
        };
        properties.extend(
            member["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        required.extend(member["required"].as_array().cloned().unwrap_or_default());
    }
    serde_json::json!({ "properties": properties, "required": required })
}

#[tokio::test]
async fn our_openapi_document_holds_every_path_method_and_required_field_of_the_reference() {
    let api = start(agent_api_server::ServerConfig::default().with_token("t")).await;
    let served = api.get("/v1/openapi.json").await;
    assert_eq!(served.status, 200);
    let ours = served.json();
    let reference = reference();
    let mut missing = Vec::new();

    for (path, operations) in reference["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let Some(mine) = ours["paths"][path].get(method) else {
                missing.push(format!("{method} {path}"));
                continue;
            };
            assert_eq!(
                mine["operationId"], operation["operationId"],
                "{method} {path}"
            );
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                let found = mine["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["name"] == parameter["name"] && p["in"] == parameter["in"]);
                if !found {
                    missing.push(format!(
                        "{method} {path}: parameter {} in {}",
                        parameter["name"], parameter["in"]
                    ));
                }
            }
            for status in operation["responses"].as_object().unwrap().keys() {
                if mine["responses"].get(status).is_none() {
                    missing.push(format!("{method} {path}: response {status}"));
                }
            }
            if let Some(body) =
                operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].as_str()
            {
                if mine["requestBody"]["content"]["application/json"]["schema"]["$ref"] != body {
                    missing.push(format!("{method} {path}: request body {body}"));
                }
            }
        }
    }

    for (name, schema) in reference["components"]["schemas"].as_object().unwrap() {
        let Some(mine) = ours["components"]["schemas"].get(name) else {
            missing.push(format!("schema {name}"));
            continue;
        };
        let mine = &merged(mine, &ours["components"]["schemas"]);
        for field in strings(&schema["required"]).difference(&strings(&mine["required"])) {
            missing.push(format!("schema {name}: required field {field}"));
        }
        for field in schema["properties"]
            .as_object()
            .into_iter()
            .flat_map(|p| p.keys())
        {
            if mine["properties"].get(field).is_none() {
                missing.push(format!("schema {name}: field {field}"));
            }
        }
        for value in strings(&schema["enum"]).difference(&strings(&mine["enum"])) {
            missing.push(format!("schema {name}: enum value {value}"));
        }
    }
    assert!(
        missing.is_empty(),
        "missing from /v1/openapi.json:\n{}",
        missing.join("\n")
    );
    assert!(
        ours["components"]["securitySchemes"]["token"].is_object(),
        "the bearer token is declared"
    );
}
