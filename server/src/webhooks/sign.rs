//! The Standard Webhooks signature: `v1,` and the base64 of the HMAC-SHA256 of
//! `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the secret's bytes.

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};

use super::WebhookSecret;

/// The `webhook-signature` header of a delivery: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
///
/// ```
/// use agent_api_server::webhooks::{sign, WebhookSecret};
/// // The specification's own test vector.
/// let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
/// assert_eq!(
///     sign(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#),
///     "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
/// );
/// ```
pub fn sign(secret: &WebhookSecret, id: &str, timestamp: i64, body: &[u8]) -> String {
    // Any key length is valid for HMAC: this cannot fail.
    let Ok(mut mac) = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.bytes()) else {
        unreachable!("HMAC takes keys of any length")
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_different_body_id_or_time_signs_differently() {
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let base = sign(&secret, "evt_1", 10, b"{}");
        assert_ne!(base, sign(&secret, "evt_2", 10, b"{}"));
        assert_ne!(base, sign(&secret, "evt_1", 11, b"{}"));
        assert_ne!(base, sign(&secret, "evt_1", 10, b"{ }"));
        assert!(base.starts_with("v1,"));
    }
}
