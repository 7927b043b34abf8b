//! Signed webhooks (`--webhook URL`): events a filter takes are delivered at least once, in order
//! per session, to each endpoint, signed as the Standard Webhooks specification says.
//!
//! - [`WebhookConfig`]: the endpoints ([`WebhookEndpoint`], parsed from `URL;events=…`), the
//!   secret ([`WebhookSecret`], `whsec_…`) and the retry schedule ([`RetryPolicy`]).
//! - The outbox is the store's ([`crate::store::OutboxRules`]): an event is stored with its
//!   deliveries in one write, so a restart loses none.
//! - [`sign`]: the `webhook-signature` header's value.
//! - The delivery worker (`deliver`) takes the rows due and records every try; the delivery log
//!   (`GET /v1/webhooks/deliveries`, `log`) shows them.

mod deliver;
pub(crate) mod log;
mod sign;

use std::time::Duration;

use axum::http::Uri;
use base64::Engine as _;

pub use sign::sign;

use crate::store::{OutboxRules, OutboxTarget, WebhookEvent};

pub(crate) use deliver::{run, Worker};

/// The longest webhook URL taken.
const MAX_URL: usize = 2048;

/// A webhook setting refused at start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// Not an absolute `http://` or `https://` URL this server can post to.
    #[error("webhook URL `{0}`: give an absolute http:// or https:// URL (host, optional port and path)")]
    Url(String),
    /// The CA file (`--webhook-ca`) cannot be read or holds no usable certificate.
    #[error("webhook CA file: {0}")]
    CaFile(String),
    /// `https://` endpoints with no CA to verify their certificates against (none in the system's
    /// store and no `--webhook-ca`): nothing would ever be delivered.
    #[error("https webhooks: {0}")]
    Tls(String),
    /// A URL with a user name or password in it.
    #[error("webhook URL `{0}`: no user name or password in the URL (the signature authenticates the server)")]
    UserInfo(String),
    /// An event name not known.
    #[error("webhook events `{0}`: each must be one of turn.ended, permission.requested, question.requested, session.ended, error")]
    Events(String),
    /// Something after the URL that is not `events=…`.
    #[error("webhook option `{0}`: the only option is events=NAME[,NAME…]")]
    Option(String),
    /// A secret that is not `whsec_` and base64 of 24 to 64 bytes.
    #[error("webhook secret: give whsec_ followed by the base64 of 24 to 64 random bytes (the Standard Webhooks form)")]
    Secret,
    /// Webhooks with no secret to sign them.
    #[error("--webhook needs a secret to sign with: --webhook-secret-file, AGENT_API_WEBHOOK_SECRET or --webhook-secret (whsec_…)")]
    NoSecret,
}

/// One endpoint: where to post, and which events.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookEndpoint {
    uri: Uri,
    events: Vec<WebhookEvent>,
    key: String,
}

impl std::fmt::Debug for WebhookEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookEndpoint")
            .field("url", &self.shown())
            .field("events", &self.events)
            .finish()
    }
}

impl WebhookEndpoint {
    /// Parses `URL` or `URL;events=NAME[,NAME…]` (every event when none is named). The URL is
    /// hostile until checked: absolute `http://` or `https://`, a host, no user name or
    /// password, no fragment, at most 2048 bytes of visible ASCII. An `https://` endpoint is
    /// only ever posted to over TLS, its certificate verified ([`WebhookConfig::with_ca_file`]).
    ///
    /// ```
    /// use agent_api_server::webhooks::WebhookEndpoint;
    /// let hook = WebhookEndpoint::parse("http://127.0.0.1:9000/hooks;events=turn.ended,error").unwrap();
    /// assert_eq!(hook.events().len(), 2);
    /// assert!(WebhookEndpoint::parse("https://hooks.example.com/in").unwrap().is_https());
    /// assert!(WebhookEndpoint::parse("http://user:pw@example.com/").is_err());
    /// assert!(WebhookEndpoint::parse("ftp://example.com/").is_err());
    /// assert!(WebhookEndpoint::parse("http://example.com/;events=item.delta").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Self, WebhookError> {
        let shown = || agent_api::display::line(text, 128);
        let (url, options) = match text.split_once(';') {
            Some((url, options)) => (url, Some(options)),
            None => (text, None),
        };
        if url.len() > MAX_URL
            || url.is_empty()
            || !url.bytes().all(|b| b.is_ascii_graphic())
            || url.contains('#')
        {
            return Err(WebhookError::Url(shown()));
        }
        let uri: Uri = url.parse().map_err(|_| WebhookError::Url(shown()))?;
        let authority = uri.authority().ok_or_else(|| WebhookError::Url(shown()))?;
        if authority.as_str().contains('@') {
            return Err(WebhookError::UserInfo(shown()));
        }
        match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
            Some("http" | "https") => {}
            _ => return Err(WebhookError::Url(shown())),
        }
        if authority.host().is_empty() {
            return Err(WebhookError::Url(shown()));
        }
        let events = match options {
            None => WebhookEvent::ALL.to_vec(),
            Some(options) => {
                let Some(names) = options.trim().strip_prefix("events=") else {
                    return Err(WebhookError::Option(agent_api::display::line(options, 128)));
                };
                let mut events = Vec::new();
                for name in names.split(',').map(str::trim) {
                    let event = WebhookEvent::parse(name).ok_or_else(|| {
                        WebhookError::Events(agent_api::display::line(names, 128))
                    })?;
                    if !events.contains(&event) {
                        events.push(event);
                    }
                }
                events
            }
        };
        let key = endpoint_key(&uri.to_string());
        Ok(Self { uri, events, key })
    }

    /// The events it takes.
    pub fn events(&self) -> &[WebhookEvent] {
        &self.events
    }

    /// Its URL as shown in the delivery log and the logs: the query left out (it may hold a
    /// token of the receiver's).
    pub fn shown(&self) -> String {
        let scheme = self.uri.scheme_str().unwrap_or("http");
        let authority = self.uri.authority().map_or("", |a| a.as_str());
        format!("{scheme}://{authority}{}", self.uri.path())
    }

    /// Its key in the store's outbox: the first 16 bytes of the URL's SHA-256, in hex (the same
    /// URL after a restart finds its rows again; the store holds no URL).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether it is posted to over TLS (`https://`).
    pub fn is_https(&self) -> bool {
        self.uri
            .scheme_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("https"))
    }

    pub(crate) fn uri(&self) -> &Uri {
        &self.uri
    }
}

fn endpoint_key(url: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(url.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The signing secret: the bytes of `whsec_<base64>`. Never shown (`Debug` says `<redacted>`).
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(Vec<u8>);

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

impl WebhookSecret {
    /// Parses `whsec_` followed by the standard base64 of 24 to 64 bytes.
    ///
    /// ```
    /// use agent_api_server::webhooks::WebhookSecret;
    /// assert!(WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_ok());
    /// assert!(WebhookSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
    /// assert!(WebhookSecret::parse("whsec_c2hvcnQ=").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Self, WebhookError> {
        let encoded = text
            .trim()
            .strip_prefix("whsec_")
            .ok_or(WebhookError::Secret)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| WebhookError::Secret)?;
        if !(24..=64).contains(&bytes.len()) {
            return Err(WebhookError::Secret);
        }
        Ok(Self(bytes))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// When a failed delivery is tried again: after `base`, doubling each time up to `cap`, each
/// delay drawn at random between its half and itself (jitter, so that endpoints coming back are
/// not hit by every server at once); after `max_attempts` tries the row is given up
/// (`abandoned` in the delivery log) and the session's next one goes. Default: 1 s doubling to
/// 5 min, 40 tries (about two and a half hours of an endpoint down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// The first delay.
    pub base: Duration,
    /// The longest delay.
    pub cap: Duration,
    /// The tries of one row before it is given up.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(300),
            max_attempts: 40,
        }
    }
}

impl RetryPolicy {
    /// A policy: `base` doubling to `cap`, `max_attempts` tries.
    pub fn new(base: Duration, cap: Duration, max_attempts: u32) -> Self {
        Self {
            base,
            cap: cap.max(base),
            max_attempts: max_attempts.max(1),
        }
    }

    /// The delay after the `attempt`th failed try (from 1), before jitter: `base·2^(attempt−1)`,
    /// at most `cap`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use agent_api_server::webhooks::RetryPolicy;
    /// let policy = RetryPolicy::default();
    /// assert_eq!(policy.delay(1), Duration::from_secs(1));
    /// assert_eq!(policy.delay(4), Duration::from_secs(8));
    /// assert_eq!(policy.delay(30), Duration::from_secs(300));
    /// ```
    pub fn delay(&self, attempt: u32) -> Duration {
        let doubled = self
            .base
            .checked_mul(1u32 << attempt.saturating_sub(1).min(30))
            .unwrap_or(self.cap);
        doubled.min(self.cap)
    }

    /// [`RetryPolicy::delay`] with jitter: drawn uniformly between its half and itself.
    pub(crate) fn jittered(&self, attempt: u32) -> Duration {
        let delay = self.delay(attempt);
        let mut bytes = [0u8; 8];
        // Without randomness the delay is the longest: never sooner than asked.
        if getrandom::fill(&mut bytes).is_err() {
            return delay;
        }
        let fraction = (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64;
        delay.mul_f64(0.5 + fraction / 2.0)
    }
}

/// The webhooks of a server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WebhookConfig {
    /// Where events go.
    pub endpoints: Vec<WebhookEndpoint>,
    /// What signs them.
    pub secret: WebhookSecret,
    /// When failed deliveries are tried again.
    pub retry: RetryPolicy,
    /// How long one delivery may take, connecting included (default 10 s): past it the try
    /// failed (`timeout`).
    pub timeout: Duration,
    /// How often the outbox is looked at for rows due (default 500 ms).
    pub poll: Duration,
    /// The CAs `https://` endpoints' certificates are verified against instead of the system's
    /// (`--webhook-ca`).
    ca: Option<CaFile>,
}

/// A CA file read at start: its path (what is shown) and its certificates.
#[derive(Clone, PartialEq, Eq)]
struct CaFile {
    path: std::path::PathBuf,
    certs: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl std::fmt::Debug for CaFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CaFile").field(&self.path).finish()
    }
}

impl WebhookConfig {
    /// Webhooks to `endpoints`, signed with `secret`, with the default retry schedule, a 10 s
    /// timeout and a 500 ms poll.
    pub fn new(endpoints: Vec<WebhookEndpoint>, secret: WebhookSecret) -> Self {
        Self {
            endpoints,
            secret,
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(10),
            poll: Duration::from_millis(500),
            ca: None,
        }
    }

    /// Verifies `https://` endpoints' certificates against the CAs of the PEM file `path` (a
    /// private receiver's CA) instead of the system's; read now, once. A file that cannot be read
    /// or holds no certificate is refused.
    ///
    /// ```
    /// use agent_api_server::webhooks::{WebhookConfig, WebhookError, WebhookSecret};
    /// let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    /// let refused = WebhookConfig::new(vec![], secret).with_ca_file("/nonexistent/ca.pem");
    /// assert!(matches!(refused, Err(WebhookError::CaFile(_))));
    /// ```
    pub fn with_ca_file(mut self, path: impl AsRef<std::path::Path>) -> Result<Self, WebhookError> {
        let path = path.as_ref();
        let certs = crate::tls::read_ca_file(path, "--webhook-ca")
            .map_err(|e| WebhookError::CaFile(e.to_string()))?;
        self.ca = Some(CaFile {
            path: path.to_path_buf(),
            certs,
        });
        Ok(self)
    }

    /// Whether these webhooks can be delivered as configured: an `https://` endpoint needs a CA
    /// to verify its certificate against (`--webhook-ca`, else the system's store). A server
    /// started anyway records each such try as failed (`tls`) and sends nothing.
    pub fn check(&self) -> Result<(), WebhookError> {
        if self.endpoints.iter().any(WebhookEndpoint::is_https) {
            self.tls()?;
        }
        Ok(())
    }

    /// The TLS client configuration for `https://` endpoints: certificates verified against the
    /// CA file's CAs, else the system's.
    pub(crate) fn tls(&self) -> Result<rustls::ClientConfig, WebhookError> {
        let label = self
            .ca
            .as_ref()
            .map_or_else(|| "system".to_string(), |ca| ca.path.display().to_string());
        let roots = crate::tls::roots(self.ca.as_ref().map(|ca| ca.certs.as_slice()), &label)
            .map_err(|e| WebhookError::CaFile(e.to_string()))?;
        if roots.is_empty() {
            return Err(WebhookError::Tls(
                "this system has no CA certificate to verify the endpoints' with: name a PEM file with --webhook-ca FILE".into(),
            ));
        }
        let provider = crate::tls::provider();
        let verifier = crate::tls::verifier(roots, provider.clone())
            .map_err(|e| WebhookError::Tls(e.to_string()))?;
        crate::tls::client_config(verifier, provider).map_err(|e| WebhookError::Tls(e.to_string()))
    }

    /// Sets the retry schedule.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets how long one delivery may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how often the outbox is looked at.
    pub fn with_poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// What the store's outbox takes.
    pub(crate) fn rules(&self) -> OutboxRules {
        OutboxRules::new(
            self.endpoints
                .iter()
                .map(|endpoint| OutboxTarget {
                    endpoint: endpoint.key.clone(),
                    events: endpoint.events.clone(),
                })
                .collect(),
        )
    }

    /// The endpoint whose key is `key`.
    pub(crate) fn endpoint(&self, key: &str) -> Option<&WebhookEndpoint> {
        self.endpoints.iter().find(|e| e.key == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_urls_get_a_typed_error() {
        let cases = [
            ("", "url"),
            ("example.com/hook", "url"),
            ("/hook", "url"),
            ("file:///etc/passwd", "url"),
            ("javascript:alert(1)", "url"),
            ("http://exa mple.com/", "url"),
            ("http://example.com/\u{7}", "url"),
            ("http://example.com/#frag", "url"),
            ("http://u:p@example.com/", "userinfo"),
            ("http://u@example.com/", "userinfo"),
            ("http://example.com/;events=", "events"),
            ("http://example.com/;events=turn.ended,nope", "events"),
            ("http://example.com/;retry=5", "option"),
        ];
        for (text, want) in cases {
            let got = match WebhookEndpoint::parse(text) {
                Err(WebhookError::Url(_)) => "url",
                Err(WebhookError::UserInfo(_)) => "userinfo",
                Err(WebhookError::Events(_)) => "events",
                Err(WebhookError::Option(_)) => "option",
                other => panic!("{text:?}: {other:?}"),
            };
            assert_eq!(got, want, "{text:?}");
        }
        let long = format!("http://example.com/{}", "a".repeat(MAX_URL));
        assert!(matches!(
            WebhookEndpoint::parse(&long),
            Err(WebhookError::Url(_))
        ));
    }

    #[test]
    fn an_endpoint_keeps_its_events_and_shows_no_query() {
        let hook =
            WebhookEndpoint::parse("http://127.0.0.1:9/in?token=s3cret;events=turn.ended").unwrap();
        assert_eq!(hook.events(), [WebhookEvent::TurnEnded]);
        assert_eq!(hook.shown(), "http://127.0.0.1:9/in");
        assert!(!format!("{hook:?}").contains("s3cret"));
        assert_eq!(hook.key().len(), 32);
        let secure = WebhookEndpoint::parse("https://hooks.example.com:8443/in?k=v").unwrap();
        assert!(secure.is_https() && !hook.is_https());
        assert_eq!(secure.shown(), "https://hooks.example.com:8443/in");
        let all = WebhookEndpoint::parse("http://127.0.0.1:9/in").unwrap();
        assert_eq!(all.events(), WebhookEvent::ALL);
        assert_ne!(all.key(), hook.key());
    }

    #[test]
    fn secrets_are_the_standard_form_and_never_shown() {
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(secret.bytes().len(), 24);
        assert_eq!(format!("{secret:?}"), "WebhookSecret(<redacted>)");
        for bad in [
            "",
            "whsec_",
            "whsec_!!!!",
            "whsec_c2hvcnQ=",
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ] {
            assert_eq!(
                WebhookSecret::parse(bad),
                Err(WebhookError::Secret),
                "{bad}"
            );
        }
    }

    #[test]
    fn retry_delays_double_to_the_cap_and_jitter_stays_within_half() {
        let policy = RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(1), 5);
        assert_eq!(policy.delay(1), Duration::from_millis(100));
        assert_eq!(policy.delay(2), Duration::from_millis(200));
        assert_eq!(policy.delay(5), Duration::from_secs(1));
        assert_eq!(policy.delay(u32::MAX), Duration::from_secs(1));
        for attempt in 1..8 {
            let delay = policy.delay(attempt);
            let jittered = policy.jittered(attempt);
            assert!(jittered <= delay && jittered >= delay / 2, "{jittered:?}");
        }
    }
}
