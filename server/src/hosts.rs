//! Host names and web origins, as a request or the operator gives them: what [`crate::guard`]
//! checks a request against and what the configuration accepts (`--allowed-host`,
//! `--cors-origin`).

use axum::http::{header, HeaderMap};

/// The `Host` the request names (HTTP/1.1's header, or an absolute URI's authority).
pub(crate) fn request_host(headers: &HeaderMap, uri: &axum::http::Uri) -> Option<String> {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| uri.authority().map(|a| a.as_str().to_string()))
}

/// The host of `host[:port]` (an IPv6 address in brackets kept without them), lower-cased.
fn host_part(authority: &str) -> Option<String> {
    let authority = authority.trim();
    let host = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let port_ok = match after.strip_prefix(':') {
            Some(port) => port.bytes().all(|b| b.is_ascii_digit()),
            None => after.is_empty(),
        };
        if !port_ok {
            return None;
        }
        inside
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            Some(_) => return None,
            None => authority,
        }
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Whether a `Host` names this server: an IP address (a browser sends one only for a page of
/// that very address), `localhost`, or one of `allowed`.
pub(crate) fn host_allowed(authority: &str, allowed: &[String]) -> bool {
    let Some(host) = host_part(authority) else {
        return false;
    };
    host.parse::<std::net::IpAddr>().is_ok()
        || host == "localhost"
        || allowed.iter().any(|name| name.eq_ignore_ascii_case(&host))
}

/// Whether `origin` (`scheme://authority`) is the page of the very server the request names.
pub(crate) fn same_origin(origin: &str, host: &str) -> bool {
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    authority.is_some_and(|authority| authority.eq_ignore_ascii_case(host.trim()))
}

/// Whether `origin` is one web origin: `http` or `https`, a host, an optional port, nothing else.
pub(crate) fn is_origin(origin: &str) -> bool {
    let Some(authority) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    host_part(authority)
        .is_some_and(|host| host.parse::<std::net::IpAddr>().is_ok() || is_host_name(&host))
        && axum::http::HeaderValue::from_str(origin).is_ok()
}

/// Whether `name` is a DNS host name: labels of letters, digits and `-`, dot-separated.
pub(crate) fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_addresses_localhost_or_configured_names() {
        let allowed = ["agents.example.com".to_string()];
        for host in [
            "127.0.0.1:2468",
            "[::1]:80",
            "localhost:9",
            "LOCALHOST",
            "10.1.2.3",
            "Agents.Example.com:443",
        ] {
            assert!(host_allowed(host, &allowed), "{host}");
        }
        for host in [
            "evil.example:2468",
            "127.0.0.1.nip.io",
            "localhost.evil",
            "",
            "[::1",
            "a:b:c",
        ] {
            assert!(!host_allowed(host, &allowed), "{host}");
        }
    }

    #[test]
    fn origins_are_one_http_origin() {
        for origin in [
            "http://localhost:3000",
            "https://app.example",
            "http://[::1]:8",
        ] {
            assert!(is_origin(origin), "{origin}");
        }
        for origin in [
            "*",
            "null",
            "app.example",
            "https://app.example/path",
            "ftp://x",
            "https://",
            "https://a b",
        ] {
            assert!(!is_origin(origin), "{origin}");
        }
        assert!(same_origin("http://127.0.0.1:2468", "127.0.0.1:2468"));
        assert!(!same_origin("http://evil.example", "127.0.0.1:2468"));
        assert!(!same_origin("null", "127.0.0.1:2468"));
    }
}
