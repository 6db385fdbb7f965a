//! OAUTHBEARER's token check with unsecured JWS tokens: what Kafka's
//! broker does by default for OAUTHBEARER (its
//! OAuthBearerUnsecuredValidatorCallbackHandler), for development
//! clusters. Nothing is signed (`"alg":"none"`), so any client may claim
//! any principal: the broker offers OAUTHBEARER only when told to
//! (`--sasl-oauthbearer-unsecured`), and logs that at start.
//!
//! A token is `base64url(header).base64url(claims).` with an empty
//! signature. The header's `alg` must be `none`. The claims must hold the
//! principal as a string in `sub`, the expiry in `exp` (seconds since the
//! epoch, a number) and, if present, the issue time in `iat` (a number,
//! not after now). The token must not have expired.
//! Every refusal is the RFC 7628 status `invalid_token`, with the reason
//! for the log.

use base64::Engine as _;
use base64::alphabet::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::{Map, Value};

/// base64url with or without padding, as Java's URL decoder reads it.
const B64URL: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A token that passed the check.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidToken {
    /// The principal's name (`sub`).
    pub principal: String,
    /// When it expires, ms since the epoch.
    pub expires_ms: i64,
}

/// The RFC 7628 status of every refusal here.
pub const INVALID_TOKEN: &str = "invalid_token";

fn json_part(part: &str, what: &str) -> Result<Map<String, Value>, String> {
    let bytes = B64URL
        .decode(part)
        .map_err(|e| format!("the {what} is not base64url: {e}"))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(format!("the {what} is not a JSON object")),
        Err(e) => Err(format!("the {what} is not JSON: {e}")),
    }
}

/// A claim that must be a number (a JSON NumericDate), in ms.
fn time_claim(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, String> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .map(|s| Some((s * 1000.0) as i64))
            .ok_or_else(|| format!("the claim {name} is not a number")),
        Some(_) => Err(format!("the claim {name} is not a number")),
    }
}

/// Checks an unsecured JWS `token` at `now_ms`; the reason of a refusal.
pub fn validate_unsecured(token: &str, now_ms: i64) -> Result<ValidToken, String> {
    let mut parts = token.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("an unsecured JWS has three parts separated by '.'".into());
    };
    if !signature.is_empty() {
        return Err("an unsecured JWS has an empty signature".into());
    }
    let header = json_part(header, "header")?;
    if header.get("alg").and_then(Value::as_str) != Some("none") {
        return Err("the header's alg must be \"none\"".into());
    }
    let claims = json_part(claims, "claims")?;
    let principal = match claims.get("sub") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return Err("the principal claim sub is missing or not a string".into()),
    };
    let expires_ms = time_claim(&claims, "exp")?.ok_or("the claim exp is missing")?;
    if now_ms >= expires_ms {
        return Err(format!(
            "the token expired at {expires_ms} ms, it is now {now_ms} ms"
        ));
    }
    // An iat at or before now is before exp, which is after now.
    if time_claim(&claims, "iat")?.is_some_and(|issued_ms| issued_ms > now_ms) {
        return Err("the token's iat is in the future".into());
    }
    Ok(ValidToken {
        principal,
        expires_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(header: &str, claims: &str) -> String {
        format!("{}.{}.", B64URL.encode(header), B64URL.encode(claims))
    }

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn a_valid_token_names_its_principal_and_expiry() {
        let t = token(
            r#"{"alg":"none"}"#,
            r#"{"sub":"alice","exp":1800000060,"iat":1799999990}"#,
        );
        assert_eq!(
            validate_unsecured(&t, NOW).unwrap(),
            ValidToken {
                principal: "alice".into(),
                expires_ms: 1_800_000_060_000
            }
        );
        // Fractional seconds, padding, no iat.
        let padded = format!(
            "{}.{}.",
            base64::engine::general_purpose::URL_SAFE.encode(r#"{"alg":"none"}"#),
            base64::engine::general_purpose::URL_SAFE.encode(r#"{"sub":"bob","exp":1800000000.5}"#)
        );
        assert_eq!(
            validate_unsecured(&padded, NOW).unwrap().expires_ms,
            NOW + 500
        );
    }

    #[test]
    fn tokens_kafka_refuses_are_refused() {
        let cases = [
            token(r#"{"alg":"HS256"}"#, r#"{"sub":"a","exp":1900000000}"#),
            token(r#"{}"#, r#"{"sub":"a","exp":1900000000}"#),
            token(r#"{"alg":"none"}"#, r#"{"exp":1900000000}"#),
            token(r#"{"alg":"none"}"#, r#"{"sub":7,"exp":1900000000}"#),
            token(r#"{"alg":"none"}"#, r#"{"sub":"a"}"#),
            token(r#"{"alg":"none"}"#, r#"{"sub":"a","exp":"soon"}"#),
            // Expired, and expiring exactly now.
            token(r#"{"alg":"none"}"#, r#"{"sub":"a","exp":1799999999}"#),
            token(r#"{"alg":"none"}"#, r#"{"sub":"a","exp":1800000000}"#),
            // Issued in the future, or with an iat that is not a number.
            token(
                r#"{"alg":"none"}"#,
                r#"{"sub":"a","exp":1900000000,"iat":1800000100}"#,
            ),
            token(
                r#"{"alg":"none"}"#,
                r#"{"sub":"a","exp":1900000000,"iat":"x"}"#,
            ),
            token(r#"{"alg":"none"}"#, r#"[1]"#),
            format!(
                "{}sig",
                token(r#"{"alg":"none"}"#, r#"{"sub":"a","exp":1900000000}"#)
            ),
            "a.b".to_string(),
            "%%%.%%%.".to_string(),
        ];
        for t in cases {
            assert!(validate_unsecured(&t, NOW).is_err(), "{t} was accepted");
        }
    }
}
