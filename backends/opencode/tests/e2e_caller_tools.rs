//! End to end with the real OpenCode on the bench: a caller-defined tool served over MCP (through
//! OpenCode's config, `OPENCODE_CONFIG_CONTENT`) on each interface. One test, alone in its file, so
//! no other server of this process starts meanwhile (the check finds the tool server by its port).

mod common;

use agent_api::{PermissionPolicy, RunRequest};
use agent_api_conformance::caller_tools::{assert_gone_after_cancel, assert_round_trip};
use agent_api_opencode::Interface;
use common::*;

#[tokio::test]
async fn a_caller_tool_round_trips_on_every_interface_and_its_server_goes_with_the_run() {
    // Over ACP the call's kind is `other`; the SDK names it by the call's title.
    for interface in [Interface::Run, Interface::Serve, Interface::Acp] {
        let Some((_server, sandbox)) = setup("caller_tool").await else {
            return;
        };
        let request = || {
            RunRequest::new("what is the forecast in Paris?")
                .with_permissions(PermissionPolicy::ApproveAll)
        };
        assert_round_trip(&backend(&sandbox, interface), request()).await;
        if interface == Interface::Run {
            assert_gone_after_cancel(&backend(&sandbox, interface), request()).await;
        }
    }
}
