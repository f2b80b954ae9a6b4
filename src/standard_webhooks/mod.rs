//! The Standard Webhooks key and signature: the one scheme hookinbox both
//! checks (a `standard` source) and makes (every delivery).
//!
//! Owns the key material: a `whsec_…` secret is decoded here and nowhere
//! else, into a [`StandardKey`] that never prints itself, and
//! [`StandardKey::sign`] is the only code that builds a `webhook-signature`.
//! It sits below `config` (which validates `destination_secret` with it) and
//! `verify` (which checks with it), and depends on neither, so neither has to
//! import the other for it. The key knows no headers, clocks or HTTP: callers
//! pass the id, the timestamp and the body. Beside it, `message` builds the
//! delivery contract's headers with it ([`Message`]), so `deliver` and the
//! CLI's `listen` sign the same way without one importing the other.

mod message;

pub use message::{Message, ORIGIN_HEADER, RECONCILED, SIGNATURE_AT, origin_of};

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The decoded key of a Standard Webhooks secret. `Debug` prints
/// `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct StandardKey(Vec<u8>);

/// Why a text is not a Standard Webhooks secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StandardKeyError {
    #[error(
        "a Standard Webhooks secret must be \"whsec_\" followed by base64 (as the sender shows it)"
    )]
    NotBase64,
}

impl StandardKey {
    /// Parses the secret as senders show it: base64 after a `whsec_` prefix.
    /// The prefix is optional because Svix and some senders hand out the bare
    /// base64, and both verify the same bytes.
    pub fn parse(text: &str) -> Result<StandardKey, StandardKeyError> {
        let b64 = text.strip_prefix("whsec_").unwrap_or(text);
        B64.decode(b64)
            .map(StandardKey)
            .map_err(|_| StandardKeyError::NotBase64)
    }

    /// The key bytes, for a verifier that holds the keys of every scheme
    /// alike. Call only where a MAC is computed.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// The `webhook-signature` value for one message:
    /// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
    pub fn sign(&self, webhook_id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(webhook_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", B64.encode(mac.finalize().into_bytes()))
    }
}

/// The keys that sign a destination's deliveries: one, or during a
/// rotation two (at most [`SigningKeys::MAX`]). Each message carries a
/// signature by each, space-separated in one `webhook-signature` as the
/// spec allows, so an app that knows any one of them verifies it.
/// `Debug` prints `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKeys(Vec<StandardKey>);

impl SigningKeys {
    /// The most keys a destination signs with: each is a signature more
    /// on every delivery.
    pub const MAX: usize = 4;

    pub fn one(key: StandardKey) -> SigningKeys {
        SigningKeys(vec![key])
    }

    /// `keys`, in order; `None` when there are none or more than
    /// [`SigningKeys::MAX`].
    pub fn new(keys: Vec<StandardKey>) -> Option<SigningKeys> {
        (1..=Self::MAX)
            .contains(&keys.len())
            .then_some(SigningKeys(keys))
    }

    pub fn keys(&self) -> &[StandardKey] {
        &self.0
    }

    /// The `webhook-signature` value: `v1,<sig>` by each key, in order,
    /// space-separated.
    pub fn sign(&self, webhook_id: &str, timestamp: i64, body: &[u8]) -> String {
        let signed: Vec<String> = self
            .0
            .iter()
            .map(|k| k.sign(webhook_id, timestamp, body))
            .collect();
        signed.join(" ")
    }
}

impl fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{} redacted]", self.0.len())
    }
}

impl fmt::Debug for StandardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks spec; the official Python
    /// `standardwebhooks` package signs it to the same value.
    #[test]
    fn signs_the_spec_example() {
        let key = StandardKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            key.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn the_prefix_is_optional_and_the_rest_must_be_base64() {
        assert_eq!(
            StandardKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            StandardKey::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        );
        assert_eq!(
            StandardKey::parse("whsec_not base64!"),
            Err(StandardKeyError::NotBase64)
        );
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = StandardKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(format!("{key:?}"), "[redacted]");
    }
}
