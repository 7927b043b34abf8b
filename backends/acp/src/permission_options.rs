//! Which of the options an agent offers with a permission request answers a decision: ACP names
//! each option's kind (allow once, allow always, reject once, reject always), not its meaning to
//! this run. The request handler and the exit-plan question both choose through it.

use agent_api::PermissionDecision;
use agent_client_protocol_schema::{PermissionOption, PermissionOptionKind};

/// The option to select for `decision`, by the option's kind; `None` answers `cancelled`.
pub(crate) fn pick_option<'a>(
    options: &'a [PermissionOption],
    decision: &PermissionDecision,
) -> Option<&'a PermissionOption> {
    let preference: &[PermissionOptionKind] = match decision {
        PermissionDecision::Cancel => &[],
        PermissionDecision::AllowForSession => &[
            PermissionOptionKind::AllowAlways,
            PermissionOptionKind::AllowOnce,
        ],
        d if d.is_approval() => &[
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ],
        _ => &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ],
    };
    preference
        .iter()
        .find_map(|kind| options.iter().find(|o| o.kind == *kind))
}
