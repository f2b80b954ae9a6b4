//! The delivery contract's headers for one event: the Standard Webhooks
//! trio (`webhook-id`, `webhook-timestamp`, `webhook-signature`) and the
//! `hookinbox-*` headers, built beside the key that signs them.
//!
//! Owns which headers an event's delivery carries and in what order, for
//! every sender of the contract: `deliver` (each attempt), `hookinbox
//! listen` (to a local app) and `admin` (an attempt's headers rebuilt for
//! the API). Refuses to send anything or read a clock: callers pass the
//! attempt number and the time.

use super::SigningKeys;

/// The contract's signature header.
const SIGNATURE: &str = "webhook-signature";
/// Where the signature goes among the contract's headers: after
/// `webhook-id` and `webhook-timestamp`, the two it signs. `deliver` keeps
/// the header found here with an attempt.
pub const SIGNATURE_AT: usize = 2;

/// The stored header that says how an event came in, when not as a signed
/// request (which has none).
pub const ORIGIN_HEADER: &str = "hookinbox-origin";
/// [`ORIGIN_HEADER`]'s value for an event fetched by a reconcile pass.
pub const RECONCILED: &str = "reconciled";

/// How a stored event came in, from the headers stored with it: `None` for
/// a signed request, else [`ORIGIN_HEADER`]'s value.
pub fn origin_of(headers: &[(String, String)]) -> Option<&str> {
    headers
        .iter()
        .find(|(name, _)| name == ORIGIN_HEADER)
        .map(|(_, value)| value.as_str())
}

/// One event as the contract's headers describe it to the app.
pub struct Message<'a> {
    /// hookinbox's id: the `webhook-id`.
    pub id: &'a str,
    pub source: &'a str,
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    pub content_type: Option<&'a str>,
    /// How the event came in when not as a signed request (`reconciled`:
    /// fetched from the provider's API): sent as `hookinbox-origin`.
    pub origin: Option<&'a str>,
    pub body: &'a [u8],
}

impl Message<'_> {
    /// The contract's headers for attempt `attempt` at `started_ms`,
    /// signed with each of `key`, without any forwarded provider header: what a
    /// delivery sends, and what `hookinbox listen` sends to a local app.
    pub fn headers(
        &self,
        key: &SigningKeys,
        attempt: u32,
        started_ms: u64,
    ) -> Vec<(String, String)> {
        let timestamp = (started_ms / 1000) as i64;
        let mut headers = self.unsigned(attempt, started_ms);
        headers.insert(
            SIGNATURE_AT,
            (
                SIGNATURE.to_owned(),
                key.sign(self.id, timestamp, self.body),
            ),
        );
        headers
    }

    /// The request's headers as attempt `attempt` at `started_ms` sent
    /// them, from what the attempt kept (`kept`: the signature's start,
    /// the user agent and the forwarded headers, as [`kept`] chose them):
    /// the contract's other headers follow from the event. `None` for an
    /// attempt that kept none (made before they were kept).
    pub fn sent(
        &self,
        attempt: u32,
        started_ms: u64,
        kept: &[(String, String)],
    ) -> Option<Vec<(String, String)>> {
        if kept.is_empty() {
            return None;
        }
        let mut headers = self.unsigned(attempt, started_ms);
        let mut rest = Vec::new();
        for (name, value) in kept {
            if name == SIGNATURE {
                headers.insert(SIGNATURE_AT, (name.clone(), value.clone()));
            } else {
                rest.push((name.clone(), value.clone()));
            }
        }
        headers.extend(rest);
        Some(headers)
    }

    /// The contract's headers but the signature, in the order sent.
    fn unsigned(&self, attempt: u32, started_ms: u64) -> Vec<(String, String)> {
        let timestamp = (started_ms / 1000) as i64;
        let mut headers = vec![
            ("webhook-id".to_owned(), self.id.to_owned()),
            ("webhook-timestamp".to_owned(), timestamp.to_string()),
            ("hookinbox-source".to_owned(), self.source.to_owned()),
            ("hookinbox-event-id".to_owned(), self.event_id.to_owned()),
            ("hookinbox-attempt".to_owned(), attempt.to_string()),
        ];
        if let Some(t) = self.event_type {
            headers.push(("hookinbox-event-type".to_owned(), t.to_owned()));
        }
        if let Some(origin) = self.origin {
            headers.push((ORIGIN_HEADER.to_owned(), origin.to_owned()));
        }
        if let Some(ct) = self.content_type {
            headers.push(("content-type".to_owned(), ct.to_owned()));
        }
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standard_webhooks::StandardKey;

    fn message(body: &[u8]) -> Message<'_> {
        Message {
            id: "msg_1",
            source: "shop",
            event_id: "evt_1",
            event_type: Some("order.paid"),
            content_type: Some("application/json"),
            origin: None,
            body,
        }
    }

    /// What an attempt kept (the signature) and the event rebuild the
    /// headers it sent, in the order sent.
    #[test]
    fn the_headers_sent_are_rebuilt_from_the_signature_kept() {
        let key = StandardKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sent = message(b"{}").headers(&SigningKeys::one(key.clone()), 3, 1_614_265_330_123);
        let names: Vec<&str> = sent.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "webhook-id",
                "webhook-timestamp",
                "webhook-signature",
                "hookinbox-source",
                "hookinbox-event-id",
                "hookinbox-attempt",
                "hookinbox-event-type",
                "content-type",
            ]
        );
        assert_eq!(sent[1].1, "1614265330");
        assert_eq!(
            sent[SIGNATURE_AT].1,
            key.sign("msg_1", 1_614_265_330, b"{}")
        );
        let kept = [sent[SIGNATURE_AT].clone()];
        assert_eq!(
            message(&[]).sent(3, 1_614_265_330_123, &kept),
            Some(sent.clone())
        );
        assert_eq!(message(&[]).sent(3, 1_614_265_330_123, &[]), None);
    }
}
