//! SASL mechanisms as pure state machines, shared by the client and the
//! broker: PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802,
//! RFC 7677), the mechanisms Kafka offers without Kerberos or OAuth.
//!
//! No I/O here: the client side turns server challenges into responses,
//! the server side turns client responses into challenges and, at the end,
//! into an authenticated user name. The bytes travel in SaslAuthenticate
//! requests (after a SaslHandshake naming the mechanism).
//!
//! SCRAM in brief: the server stores, per user, a salt, an iteration count,
//! `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
//! `ServerKey = HMAC(SaltedPassword, "Server Key")` with
//! `SaltedPassword = PBKDF2-HMAC(password, salt, iterations)`; the client
//! proves it knows the password without sending it, and the server proves
//! it knows the credential by the final `v=` signature. Channel binding is
//! not used (`n,,` header), as in Kafka.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Fewest PBKDF2 iterations accepted (Kafka's minimum).
pub const MIN_SCRAM_ITERATIONS: u32 = 4096;

/// A SASL mechanism this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SaslMechanism {
    /// User name and password in the clear (use with TLS).
    Plain,
    /// SCRAM with SHA-256.
    ScramSha256,
    /// SCRAM with SHA-512.
    ScramSha512,
}

impl SaslMechanism {
    /// The IANA name used in SaslHandshake and `sasl.mechanism`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// Parses a mechanism name (case-sensitive, as Kafka).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Self::Plain),
            "SCRAM-SHA-256" => Some(Self::ScramSha256),
            "SCRAM-SHA-512" => Some(Self::ScramSha512),
            _ => None,
        }
    }
}

/// Why an exchange failed. The message is for logs; peers only learn
/// "authentication failed".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SASL: {0}")]
pub struct SaslError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, SaslError> {
    Err(SaslError(msg.into()))
}

// ---- PLAIN ----

/// The PLAIN client message: `authzid NUL user NUL password` (empty authzid).
pub fn plain_client_message(user: &str, password: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(user.len() + password.len() + 2);
    v.push(0);
    v.extend_from_slice(user.as_bytes());
    v.push(0);
    v.extend_from_slice(password.as_bytes());
    v
}

/// Parses a PLAIN message into (user, password). An authzid other than
/// empty or the user itself is refused, as Kafka does.
pub fn parse_plain(msg: &[u8]) -> Result<(String, String), SaslError> {
    let parts: Vec<&[u8]> = msg.split(|b| *b == 0).collect();
    if parts.len() != 3 {
        return err("PLAIN message is not authzid NUL user NUL password");
    }
    let s = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| SaslError("not UTF-8".into()));
    let (authz, user, pass) = (s(parts[0])?, s(parts[1])?, s(parts[2])?);
    if user.is_empty() {
        return err("empty user name");
    }
    if !authz.is_empty() && authz != user {
        return err("authorization id differs from the user name");
    }
    Ok((user, pass))
}

/// Compares two byte strings in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

// ---- SCRAM primitives ----

fn hmac(m: SaslMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    match m {
        SaslMechanism::ScramSha512 => {
            let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        _ => {
            let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
    }
}

fn hash(m: SaslMechanism, data: &[u8]) -> Vec<u8> {
    match m {
        SaslMechanism::ScramSha512 => Sha512::digest(data).to_vec(),
        _ => Sha256::digest(data).to_vec(),
    }
}

fn salted_password(m: SaslMechanism, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    match m {
        SaslMechanism::ScramSha512 => {
            let mut out = vec![0u8; 64];
            pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), salt, iterations, &mut out);
            out
        }
        _ => {
            let mut out = vec![0u8; 32];
            pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut out);
            out
        }
    }
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// A user's stored SCRAM credential (what the broker keeps instead of the
/// password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The salt.
    pub salt: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// `H(ClientKey)`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
}

impl ScramCredential {
    /// Derives the credential of `password` with `salt`.
    pub fn derive(m: SaslMechanism, password: &str, salt: Vec<u8>, iterations: u32) -> Self {
        let salted = salted_password(m, password, &salt, iterations);
        Self::from_salted(m, &salted, salt, iterations)
    }

    /// The credential of an already salted password, `Hi(password, salt,
    /// iterations)` as a client computes it for AlterUserScramCredentials
    /// (KIP-554): the broker never sees the password itself.
    pub fn from_salted(m: SaslMechanism, salted: &[u8], salt: Vec<u8>, iterations: u32) -> Self {
        let client_key = hmac(m, salted, b"Client Key");
        Self {
            stored_key: hash(m, &client_key),
            server_key: hmac(m, salted, b"Server Key"),
            salt,
            iterations,
        }
    }

    /// `Hi(password, salt, iterations)`: what a client sends in
    /// AlterUserScramCredentials.
    pub fn salt_password(
        m: SaslMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Vec<u8> {
        salted_password(m, password, salt, iterations)
    }

    /// Derives with a fresh random 32-byte salt.
    pub fn generate(m: SaslMechanism, password: &str, iterations: u32) -> Self {
        let salt: [u8; 32] = rand::random();
        Self::derive(m, password, salt.to_vec(), iterations)
    }
}

/// Escapes a SCRAM user name (`=` → `=3D`, `,` → `=2C`).
fn escape_name(s: &str) -> String {
    s.replace('=', "=3D").replace(',', "=2C")
}

fn unescape_name(s: &str) -> Result<String, SaslError> {
    let out = s.replace("=2C", ",").replace("=3D", "=");
    if s.replace("=2C", "").replace("=3D", "").contains('=') {
        return err("bad escape in user name");
    }
    Ok(out)
}

/// `key=value` attributes of a SCRAM message, in order.
fn attributes(msg: &str) -> Vec<(char, &str)> {
    msg.split(',')
        .filter_map(|part| {
            let mut cs = part.chars();
            let k = cs.next()?;
            let rest = part.get(1..)?;
            rest.strip_prefix('=').map(|v| (k, v))
        })
        .collect()
}

fn attr<'a>(attrs: &[(char, &'a str)], k: char) -> Result<&'a str, SaslError> {
    attrs
        .iter()
        .find(|(key, _)| *key == k)
        .map(|(_, v)| *v)
        .ok_or_else(|| SaslError(format!("missing attribute {k}")))
}

fn new_nonce() -> String {
    let bytes: [u8; 24] = rand::random();
    B64.encode(bytes).replace(',', "-")
}

// ---- SCRAM client ----

/// The client side of a SCRAM exchange.
#[derive(Debug)]
pub struct ScramClient {
    mechanism: SaslMechanism,
    password: String,
    client_first_bare: String,
    client_nonce: String,
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// Starts an exchange; returns the state and the client-first message.
    pub fn start(mechanism: SaslMechanism, user: &str, password: &str) -> (Self, Vec<u8>) {
        Self::start_with_nonce(mechanism, user, password, new_nonce())
    }

    /// As [`start`](Self::start) with a given nonce (tests).
    pub fn start_with_nonce(
        mechanism: SaslMechanism,
        user: &str,
        password: &str,
        nonce: String,
    ) -> (Self, Vec<u8>) {
        let bare = format!("n={},r={nonce}", escape_name(user));
        let first = format!("n,,{bare}").into_bytes();
        (
            Self {
                mechanism,
                password: password.to_string(),
                client_first_bare: bare,
                client_nonce: nonce,
                expected_server_signature: None,
            },
            first,
        )
    }

    /// Answers the server-first message with the client-final message.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, SaslError> {
        let sf = std::str::from_utf8(server_first).map_err(|_| SaslError("not UTF-8".into()))?;
        let a = attributes(sf);
        if let Ok(e) = attr(&a, 'e') {
            return err(format!("server error: {e}"));
        }
        let nonce = attr(&a, 'r')?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return err("server nonce does not extend the client nonce");
        }
        let salt = B64
            .decode(attr(&a, 's')?)
            .map_err(|_| SaslError("bad salt".into()))?;
        let iterations: u32 = attr(&a, 'i')?
            .parse()
            .map_err(|_| SaslError("bad iteration count".into()))?;
        if iterations < MIN_SCRAM_ITERATIONS {
            return err(format!(
                "iteration count {iterations} below {MIN_SCRAM_ITERATIONS}"
            ));
        }
        let m = self.mechanism;
        let salted = salted_password(m, &self.password, &salt, iterations);
        let client_key = hmac(m, &salted, b"Client Key");
        let stored_key = hash(m, &client_key);
        let without_proof = format!("c={},r={nonce}", B64.encode("n,,"));
        let auth_message = format!("{},{sf},{without_proof}", self.client_first_bare);
        let signature = hmac(m, &stored_key, auth_message.as_bytes());
        let proof = xor(&client_key, &signature);
        let server_key = hmac(m, &salted, b"Server Key");
        self.expected_server_signature = Some(hmac(m, &server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message (the server's proof).
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), SaslError> {
        let sf = std::str::from_utf8(server_final).map_err(|_| SaslError("not UTF-8".into()))?;
        let a = attributes(sf);
        if let Ok(e) = attr(&a, 'e') {
            return err(format!("server error: {e}"));
        }
        let v = B64
            .decode(attr(&a, 'v')?)
            .map_err(|_| SaslError("bad server signature".into()))?;
        match &self.expected_server_signature {
            Some(exp) if constant_time_eq(exp, &v) => Ok(()),
            _ => err("server signature does not match: the server does not know the credential"),
        }
    }
}

// ---- SCRAM server ----

/// Where the server side of a SCRAM exchange is.
#[derive(Debug)]
pub enum ScramServer {
    /// Waiting for the client-first message.
    Initial {
        /// The mechanism.
        mechanism: SaslMechanism,
    },
    /// Server-first sent; waiting for the client-final message.
    SentFirst {
        /// The mechanism.
        mechanism: SaslMechanism,
        /// The user claimed in client-first.
        user: String,
        /// Its credential, `None` for an unknown user (the exchange goes on
        /// with a fake salt so unknown users look like wrong passwords).
        credential: Option<ScramCredential>,
        /// `client-first-bare,server-first`.
        auth_prefix: String,
        /// The combined nonce.
        nonce: String,
    },
}

impl ScramServer {
    /// A new exchange.
    pub fn new(mechanism: SaslMechanism) -> Self {
        Self::Initial { mechanism }
    }

    /// Handles the client-first message; `lookup` finds a user's credential.
    /// Returns the server-first message.
    pub fn server_first(
        &mut self,
        client_first: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<Vec<u8>, SaslError> {
        let Self::Initial { mechanism } = *self else {
            return err("client-first message out of order");
        };
        let cf = std::str::from_utf8(client_first).map_err(|_| SaslError("not UTF-8".into()))?;
        let mut parts = cf.splitn(3, ',');
        let (cbind, authzid, bare) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        if cbind != "n" && cbind != "y" {
            return err("channel binding is not supported");
        }
        let a = attributes(bare);
        if a.iter().any(|(k, _)| *k == 'm') {
            return err("mandatory extensions are not supported");
        }
        let user = unescape_name(attr(&a, 'n')?)?;
        if user.is_empty() {
            return err("empty user name");
        }
        if let Some(z) = authzid.strip_prefix("a=")
            && unescape_name(z)? != user
        {
            return err("authorization id differs from the user name");
        }
        let client_nonce = attr(&a, 'r')?;
        if client_nonce.is_empty() {
            return err("empty client nonce");
        }
        let credential = lookup(&user);
        let (salt, iterations) = match &credential {
            Some(c) => (c.salt.clone(), c.iterations),
            // Unknown user: a salt derived from the name, so repeated
            // probes see a stable answer.
            None => (
                hash(mechanism, user.as_bytes())[..16].to_vec(),
                MIN_SCRAM_ITERATIONS,
            ),
        };
        let nonce = format!("{client_nonce}{}", new_nonce());
        let server_first = format!("r={nonce},s={},i={iterations}", B64.encode(salt));
        *self = Self::SentFirst {
            mechanism,
            user,
            credential,
            auth_prefix: format!("{bare},{server_first}"),
            nonce,
        };
        Ok(server_first.into_bytes())
    }

    /// Handles the client-final message: on success the authenticated user
    /// and the server-final message.
    pub fn server_final(&mut self, client_final: &[u8]) -> Result<(String, Vec<u8>), SaslError> {
        let Self::SentFirst {
            mechanism,
            user,
            credential,
            auth_prefix,
            nonce,
        } = &*self
        else {
            return err("client-final message out of order");
        };
        let m = *mechanism;
        let cf = std::str::from_utf8(client_final).map_err(|_| SaslError("not UTF-8".into()))?;
        let Some(idx) = cf.rfind(",p=") else {
            return err("client-final without proof");
        };
        let without_proof = &cf[..idx];
        let a = attributes(cf);
        if attr(&a, 'r')? != nonce {
            return err("nonce mismatch");
        }
        let cbind = B64
            .decode(attr(&a, 'c')?)
            .map_err(|_| SaslError("bad channel binding".into()))?;
        if !cbind.starts_with(b"n,") && !cbind.starts_with(b"y,") {
            return err("bad channel binding");
        }
        let proof = B64
            .decode(attr(&a, 'p')?)
            .map_err(|_| SaslError("bad proof".into()))?;
        let Some(cred) = credential else {
            return err(format!("unknown user {user}"));
        };
        let auth_message = format!("{auth_prefix},{without_proof}");
        let signature = hmac(m, &cred.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return err("bad proof length");
        }
        let client_key = xor(&proof, &signature);
        if !constant_time_eq(&hash(m, &client_key), &cred.stored_key) {
            return err(format!("wrong password for {user}"));
        }
        let server_signature = hmac(m, &cred.server_key, auth_message.as_bytes());
        let user = user.clone();
        Ok((
            user,
            format!("v={}", B64.encode(server_signature)).into_bytes(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_round_trips_and_checks_authzid() {
        let m = plain_client_message("alice", "s3cret");
        assert_eq!(parse_plain(&m).unwrap(), ("alice".into(), "s3cret".into()));
        assert!(parse_plain(b"bob\0alice\0pw").is_err());
        assert!(parse_plain(b"alice\0alice\0pw").is_ok());
        assert!(parse_plain(b"alice\0pw").is_err());
        assert!(parse_plain(b"\0\0pw").is_err());
    }

    /// RFC 7677's SCRAM-SHA-256 test vector (user, password, nonces, salt).
    #[test]
    fn scram_sha256_matches_the_rfc_7677_vector() {
        let m = SaslMechanism::ScramSha256;
        let (mut c, first) =
            ScramClient::start_with_nonce(m, "user", "pencil", "rOprNGfwEbeRWgbNEkqO".into());
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let fin = c.client_final(server_first).unwrap();
        assert_eq!(
            String::from_utf8(fin).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(c.verify_server_final(b"v=AAAA").is_err());
    }

    fn exchange(
        m: SaslMechanism,
        user: &str,
        pw: &str,
        stored_pw: &str,
    ) -> Result<String, SaslError> {
        let cred = ScramCredential::generate(m, stored_pw, 4096);
        let mut server = ScramServer::new(m);
        let (mut client, first) = ScramClient::start(m, user, pw);
        let sf = server.server_first(&first, |u| (u == "alice").then(|| cred.clone()))?;
        let cf = client.client_final(&sf)?;
        let (who, fin) = server.server_final(&cf)?;
        client.verify_server_final(&fin)?;
        Ok(who)
    }

    #[test]
    fn scram_client_and_server_agree_for_both_hashes() {
        for m in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
            assert_eq!(exchange(m, "alice", "pw", "pw").unwrap(), "alice");
            assert!(exchange(m, "alice", "wrong", "pw").is_err());
            assert!(exchange(m, "mallory", "pw", "pw").is_err());
        }
    }

    #[test]
    fn scram_server_refuses_tampering_and_bad_order() {
        let m = SaslMechanism::ScramSha256;
        let cred = ScramCredential::generate(m, "pw", 4096);
        let mut server = ScramServer::new(m);
        assert!(server.server_final(b"c=biws,r=x,p=AAAA").is_err());
        let (mut client, first) = ScramClient::start(m, "alice", "pw");
        let sf = server.server_first(&first, |_| Some(cred.clone())).unwrap();
        let cf = String::from_utf8(client.client_final(&sf).unwrap()).unwrap();
        // A different nonce is refused.
        let bad = cf.replacen("r=", "r=X", 1);
        assert!(server.server_final(bad.as_bytes()).is_err());
        // A client refuses a server that lowers the iteration count.
        let (mut c2, _) = ScramClient::start_with_nonce(m, "alice", "pw", "abc".into());
        assert!(c2.client_final(b"r=abcdef,s=AAAA,i=1").is_err());
        // ... or does not extend its nonce.
        assert!(c2.client_final(b"r=zzz,s=AAAA,i=4096").is_err());
    }

    #[test]
    fn user_names_are_escaped() {
        let m = SaslMechanism::ScramSha256;
        let cred = ScramCredential::generate(m, "pw", 4096);
        let mut server = ScramServer::new(m);
        let (mut client, first) = ScramClient::start(m, "a=b,c", "pw");
        assert!(String::from_utf8_lossy(&first).contains("n=a=3Db=2Cc"));
        let sf = server
            .server_first(&first, |u| (u == "a=b,c").then(|| cred.clone()))
            .unwrap();
        let (who, _) = server
            .server_final(&client.client_final(&sf).unwrap())
            .unwrap();
        assert_eq!(who, "a=b,c");
    }
}
