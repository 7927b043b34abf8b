//! Runnable examples for `agent_api`; see the `[[example]]` entries of this package:
//!
//! - `stream_events`: run a prompt through a gateway and print the wrapper events as they stream.
//! - `answer_permissions`: read the universal transcript and answer permission requests and questions.
