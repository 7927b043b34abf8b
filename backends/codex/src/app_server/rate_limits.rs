//! `account/rateLimits/updated`: Codex's account limits as they change. Most updates only say how
//! much of a window is used; one whose limit is reached (`rateLimitReachedType`, a window at 100 %,
//! or `spendControlReached`) becomes a `rate_limited` status saying when the earliest reached
//! window resets.

use agent_api::kit::rate_limit::RateLimitNotice;
use serde_json::Value;

/// The notice of an update whose limit is reached; `None` while there is room.
pub(super) fn reached(params: &Value) -> Option<RateLimitNotice> {
    let limits = params.get("rateLimits")?;
    let windows: Vec<&Value> = ["primary", "secondary"]
        .iter()
        .filter_map(|name| limits.get(name))
        .filter(|w| !w.is_null())
        .collect();
    let full = |w: &&&Value| {
        w.get("usedPercent")
            .and_then(Value::as_f64)
            .is_some_and(|used| used >= 100.0)
    };
    let flagged = |key: &str| {
        limits
            .get(key)
            .is_some_and(|v| !v.is_null() && v != &Value::Bool(false))
    };
    let full_windows: Vec<&Value> = windows.iter().filter(full).copied().collect();
    if full_windows.is_empty()
        && !flagged("rateLimitReachedType")
        && !flagged("spendControlReached")
    {
        return None;
    }
    let resets = |w: &&Value| w.get("resetsAt").and_then(Value::as_u64);
    let mut notice = RateLimitNotice::default();
    // The reached windows' reset, else any window's: the earliest time a retry can work.
    notice.resets_at = full_windows
        .iter()
        .filter_map(resets)
        .min()
        .or_else(|| windows.iter().filter_map(resets).min());
    Some(notice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_reached_limit_is_a_notice_with_its_reset_time() {
        let room = json!({"rateLimits": {"primary": {"usedPercent": 42.0, "windowDurationMins": 300, "resetsAt": 1_800_000_000u64}, "secondary": null, "rateLimitReachedType": null}});
        assert_eq!(reached(&room), None);
        assert_eq!(
            reached(
                &json!({"rateLimits": {"limitId": "codex", "primary": null, "secondary": null}})
            ),
            None,
            "a recorded empty update"
        );
        let full = json!({"rateLimits": {
            "primary": {"usedPercent": 100.0, "resetsAt": 1_800_000_300u64},
            "secondary": {"usedPercent": 20.0, "resetsAt": 1_800_000_100u64}}});
        let notice = reached(&full).expect("a full window");
        assert_eq!(
            notice.resets_at,
            Some(1_800_000_300),
            "the full window's reset, not the other's"
        );
        assert_eq!(
            notice.to_string(),
            "rate limited; resets at 1800000300 (Unix time)"
        );
        let flagged = json!({"rateLimits": {"primary": {"usedPercent": 80.0, "resetsAt": 5u64}, "rateLimitReachedType": "workspace"}});
        assert_eq!(reached(&flagged).and_then(|n| n.resets_at), Some(5));
    }
}
