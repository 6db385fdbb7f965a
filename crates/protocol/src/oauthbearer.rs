//! The OAUTHBEARER SASL mechanism's messages (RFC 7628, as Kafka uses it
//! since KIP-255), without I/O and without the token's validation, which
//! is the server's policy.
//!
//! The client's one message is a GS2 header, then key=value pairs each
//! ended by %x01, then a last %x01:
//!
//! ```text
//! n,a=alice,\x01auth=Bearer eyJh...\x01traceId=7\x01\x01
//! ```
//!
//! `a=` (the authorization id) is optional; `auth` carries the token after
//! the scheme `Bearer`; the other pairs are SASL extensions (KIP-342).
//! When the server refuses the token it does not fail at once: it sends a
//! JSON error (`{"status":"invalid_token"}`) as a challenge, the client
//! answers a single %x01, and then the server fails the authentication
//! with that JSON as the message.

/// The separator of the key=value pairs.
pub const KVSEP: u8 = 0x01;

/// A client's first (and only) message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInitialResponse {
    /// The authorization id of the GS2 header (`a=`), if any.
    pub authorization_id: Option<String>,
    /// The bearer token.
    pub token: String,
    /// The other key=value pairs (SASL extensions), in order.
    pub extensions: Vec<(String, String)>,
}

impl ClientInitialResponse {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = format!(
            "n,{},",
            self.authorization_id
                .as_deref()
                .map_or(String::new(), |a| format!("a={a}"))
        )
        .into_bytes();
        out.push(KVSEP);
        out.extend_from_slice(format!("auth=Bearer {}", self.token).as_bytes());
        out.push(KVSEP);
        for (k, v) in &self.extensions {
            out.extend_from_slice(format!("{k}={v}").as_bytes());
            out.push(KVSEP);
        }
        out.push(KVSEP);
        out
    }

    /// Parses a client's first message, with the reason it is malformed.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| "OAUTHBEARER client message is not UTF-8".to_string())?;
        let bad = |why: &str| format!("Invalid OAUTHBEARER client first message: {why}");
        // GS2 header: "n," (no channel binding), an optional "a=<authzid>",
        // then ",".
        let rest = text
            .strip_prefix("n,")
            .ok_or_else(|| bad("the GS2 header must start with \"n,\""))?;
        let (authz, rest) = rest
            .split_once(',')
            .ok_or_else(|| bad("the GS2 header does not end with \",\""))?;
        let authorization_id = match authz {
            "" => None,
            a => Some(
                a.strip_prefix("a=")
                    .filter(|a| !a.is_empty())
                    .ok_or_else(|| bad("the GS2 header's second field must be a=<authzid>"))?
                    .to_string(),
            ),
        };
        // kvsep *(key "=" value kvsep) kvsep
        let pairs = rest
            .strip_prefix(KVSEP as char)
            .and_then(|r| r.strip_suffix(KVSEP as char))
            .ok_or_else(|| bad("the key=value pairs must be framed by %x01"))?;
        let mut token = None;
        let mut extensions = Vec::new();
        if !pairs.is_empty() {
            let pairs = pairs
                .strip_suffix(KVSEP as char)
                .ok_or_else(|| bad("each key=value pair must end with %x01"))?;
            for pair in pairs.split(KVSEP as char) {
                let (k, v) = pair
                    .split_once('=')
                    .filter(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphabetic()))
                    .ok_or_else(|| bad("a pair is not key=value with an alphabetic key"))?;
                if k == "auth" {
                    if token.is_some() {
                        return Err(bad("auth appears twice"));
                    }
                    let (scheme, t) = v
                        .split_once(' ')
                        .ok_or_else(|| bad("auth must be \"Bearer <token>\""))?;
                    let t = t.trim_start_matches(' ');
                    if !scheme.eq_ignore_ascii_case("bearer")
                        || t.is_empty()
                        || !t
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                    {
                        return Err(bad("auth must be \"Bearer <token>\""));
                    }
                    token = Some(t.to_string());
                } else {
                    extensions.push((k.to_string(), v.to_string()));
                }
            }
        }
        let token = token.ok_or_else(|| bad("no auth=Bearer <token>"))?;
        Ok(Self {
            authorization_id,
            token,
            extensions,
        })
    }
}

/// The server's error challenge (RFC 7628 section 3.2.2) for `status`,
/// e.g. `invalid_token`, as Kafka writes it.
pub fn error_challenge(status: &str) -> String {
    format!("{{\"status\":\"{status}\"}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_round_trips_and_kafkas_shapes_parse() {
        let m = ClientInitialResponse {
            authorization_id: Some("alice".into()),
            token: "aGVhZA.Ym9keQ.".into(),
            extensions: vec![("traceId".into(), "7".into())],
        };
        assert_eq!(
            m.encode(),
            b"n,a=alice,\x01auth=Bearer aGVhZA.Ym9keQ.\x01traceId=7\x01\x01".to_vec()
        );
        assert_eq!(ClientInitialResponse::parse(&m.encode()).unwrap(), m);
        let plain = ClientInitialResponse::parse(b"n,,\x01auth=Bearer abc.def.\x01\x01").unwrap();
        assert_eq!(plain.authorization_id, None);
        assert_eq!(plain.token, "abc.def.");
        assert!(plain.extensions.is_empty());
        // The scheme is case-insensitive, as Kafka reads it.
        assert!(ClientInitialResponse::parse(b"n,,\x01auth=bearer t\x01\x01").is_ok());
    }

    #[test]
    fn malformed_messages_are_refused_with_a_reason() {
        for bad in [
            &b""[..],
            b"y,,\x01auth=Bearer t\x01\x01",
            b"n,,auth=Bearer t\x01\x01",
            b"n,,\x01auth=Bearer t\x01",
            b"n,,\x01\x01",
            b"n,,\x01auth=Basic t\x01\x01",
            b"n,,\x01auth=Bearer \x01\x01",
            b"n,,\x01auth=Bearer t t\x01\x01",
            b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01",
            b"n,b=x,\x01auth=Bearer t\x01\x01",
            b"n,,\x01auth=Bearer t\x01k1=v\x01\x01",
            b"n,,\x01\xff\x01\x01",
        ] {
            assert!(
                ClientInitialResponse::parse(bad).is_err(),
                "{:?} parsed",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn the_error_challenge_is_kafkas_json() {
        assert_eq!(
            error_challenge("invalid_token"),
            r#"{"status":"invalid_token"}"#
        );
    }
}
