//! A GitHub App's credential: the JWT it signs with its private key, which
//! every call about the App's own webhook carries (`Authorization: Bearer`).
//! RS256 over `{"alg":"RS256","typ":"JWT"}` and `{"iat", "exp", "iss"}`:
//! issued a minute in the past (GitHub's advice against clock drift), for 9
//! minutes (GitHub takes at most 10), the App's ID as the issuer ("Generating
//! a JSON Web Token (JWT) for a GitHub App").
//!
//! Owns making the token and when to make it anew: at each pass's start,
//! and within a minute of its expiry. The token and the key never reach a
//! log line or an error.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use reqwest::header::HeaderValue;

use super::client::ApiError;
use crate::clock::Clock;
use crate::config::AppKey;

/// Issued this long before now: GitHub's advice against a clock ahead of
/// its own.
const BACKDATE_S: u64 = 60;
/// Valid this long from now: under GitHub's limit of 10 minutes.
const LIFETIME_S: u64 = 540;
/// Made anew when it has less than this left: a call must not arrive with
/// an expired token, and a pass can wait out a 429 of a minute.
const RENEW_WITHIN_S: u64 = 60;

pub(super) struct AppJwt {
    app_id: u64,
    key: AppKey,
    clock: Clock,
    /// When the token the client carries expires (Unix seconds).
    expires_s: u64,
}

impl AppJwt {
    pub(super) fn new(app_id: u64, key: AppKey, clock: Clock) -> AppJwt {
        AppJwt {
            app_id,
            key,
            clock,
            expires_s: 0,
        }
    }

    /// A new token when `fresh` is asked or the last one is about to
    /// expire; `None` while the last one serves.
    pub(super) fn renew(&mut self, fresh: bool) -> Result<Option<HeaderValue>, ApiError> {
        let now_s = self.clock.now_ms() / 1000;
        if !fresh && now_s + RENEW_WITHIN_S < self.expires_s {
            return Ok(None);
        }
        let expires_s = now_s + LIFETIME_S;
        let jwt = sign(self.app_id, &self.key, now_s - BACKDATE_S, expires_s)
            // The key passed ring's checks at load; signing fails only if
            // the system's random source does (ring blinds with it).
            .ok_or(ApiError::Refused { status: 0 })?;
        let value = super::client::credential(&format!("Bearer {jwt}"))?;
        self.expires_s = expires_s;
        Ok(Some(value))
    }
}

/// The JWT `header.claims.signature`, each part base64url without padding.
fn sign(app_id: u64, key: &AppKey, iat: u64, exp: u64) -> Option<String> {
    let header = B64URL.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = B64URL.encode(format!(r#"{{"iat":{iat},"exp":{exp},"iss":"{app_id}"}}"#));
    let signed = format!("{header}.{claims}");
    let pair = key.pair();
    let mut signature = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut signature,
    )
    .ok()?;
    Some(format!("{signed}.{}", B64URL.encode(signature)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;

    use super::AppJwt;
    use crate::clock::Clock;
    use crate::config::AppKey;

    /// A key as GitHub hands it out, made by the `openssl` CLI.
    fn key(dir: &std::path::Path) -> AppKey {
        let path = dir.join("app.pem");
        let out = std::process::Command::new("openssl")
            .args(["genrsa", "-traditional", "-out"])
            .arg(&path)
            .arg("2048")
            .output()
            .expect("the openssl CLI");
        assert!(out.status.success(), "{out:?}");
        AppKey::read(&path).unwrap()
    }

    #[test]
    fn the_jwt_is_rs256_of_the_app_and_made_anew_a_minute_before_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let key = key(dir.path());
        let (clock, skew) = Clock::skewed();
        let mut app = AppJwt::new(42, key.clone(), clock.clone());
        let value = app.renew(false).unwrap().expect("the first is made");
        assert!(value.is_sensitive());
        let jwt = value
            .to_str()
            .unwrap()
            .strip_prefix("Bearer ")
            .unwrap()
            .to_owned();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header = B64URL.decode(parts[0]).unwrap();
        assert_eq!(header, br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims: serde_json::Value =
            serde_json::from_slice(&B64URL.decode(parts[1]).unwrap()).unwrap();
        let now = clock.now_ms() / 1000;
        let (iat, exp) = (
            claims["iat"].as_u64().unwrap(),
            claims["exp"].as_u64().unwrap(),
        );
        assert_eq!(claims["iss"], "42");
        // Issued a minute back (the second may have turned since), for 10
        // minutes from then.
        assert!((now - 61..=now - 60).contains(&iat), "{claims}");
        assert_eq!(exp - iat, 600);
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            key.pair().public().as_ref(),
        );
        public
            .verify(
                format!("{}.{}", parts[0], parts[1]).as_bytes(),
                &B64URL.decode(parts[2]).unwrap(),
            )
            .expect("the App's public key verifies it");

        // Kept while more than a minute is left; made anew after.
        assert!(app.renew(false).unwrap().is_none());
        skew.advance(Duration::from_secs(470));
        assert!(app.renew(false).unwrap().is_none());
        skew.advance(Duration::from_secs(15));
        assert!(app.renew(false).unwrap().is_some());
        // A pass asks for a fresh one whatever is left.
        assert!(app.renew(true).unwrap().is_some());
    }
}
