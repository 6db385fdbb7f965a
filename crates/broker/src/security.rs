//! Listener security: SASL authentication per connection and the broker's
//! authorizer.
//!
//! A listener is PLAINTEXT (every connection is `User:ANONYMOUS`),
//! SASL_PLAINTEXT, SSL or SASL_SSL (the same over TLS, see [`BrokerTls`]). On a SASL listener a connection may send only
//! ApiVersions, SaslHandshake (v1) and SaslAuthenticate (v0-2) until it has
//! authenticated; anything else closes it. The mechanisms are PLAIN and
//! SCRAM-SHA-256/512 with users and passwords from the configuration (SCRAM
//! credentials are derived from them at start with a random salt; the
//! passwords are not kept for SCRAM), and SCRAM credentials set or deleted
//! with AlterUserScramCredentials ([`ScramStore`]). After authentication the connection's
//! principal is `User:<name>` for its lifetime.
//!
//! A failed authentication is answered SASL_AUTHENTICATION_FAILED after
//! `auth_failure_delay` (Kafka's `connection.failed.authentication.delay.ms`,
//! slowing password guessing), and the connection is closed. With
//! `reauth_ms` set (Kafka's `connections.max.reauth.ms`) SaslAuthenticate
//! v1+ tells the client the session lifetime; a connection whose session has
//! expired may re-authenticate (SaslHandshake + SaslAuthenticate again, as
//! KIP-368) and is closed if it sends anything else.
//!
//! With `acl_enabled`, every request is checked by the [`Authorizer`]
//! (`acls.json` in the data directory); without it everything is allowed,
//! as a Kafka broker with no `authorizer.class.name`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::acl::{ANONYMOUS, Authorizer};
use super::core::BrokerCore;
pub use super::scram_credentials::{SCRAM_FILE, ScramStore};
use super::server::Close;
use sharestream_protocol::ErrorCode;
use sharestream_protocol::api::{RequestHeaderInfo, encode_response_frame};
use sharestream_protocol::oauthbearer;
use sharestream_protocol::sasl::{
    MIN_SCRAM_ITERATIONS, SaslMechanism, ScramCredential, ScramServer, constant_time_eq,
    parse_plain,
};

/// SaslHandshake's API key.
pub const SASL_HANDSHAKE_KEY: i16 = 17;
/// SaslAuthenticate's API key.
pub const SASL_AUTHENTICATE_KEY: i16 = 36;
/// ApiVersions' API key.
const API_VERSIONS_KEY: i16 = 18;

/// The security protocol of the broker's listener (`security.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListenerProtocol {
    /// No authentication; every connection is `User:ANONYMOUS`.
    #[default]
    Plaintext,
    /// SASL authentication over plain TCP.
    SaslPlaintext,
    /// TLS; connections are `User:ANONYMOUS` (see [`BrokerTls`]).
    Ssl,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl ListenerProtocol {
    /// Parses Kafka's name (`PLAINTEXT`, `SASL_PLAINTEXT`, `SSL`,
    /// `SASL_SSL`), case-insensitively.
    pub fn from_name(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Self::Plaintext),
            "SASL_PLAINTEXT" => Some(Self::SaslPlaintext),
            "SSL" => Some(Self::Ssl),
            "SASL_SSL" => Some(Self::SaslSsl),
            _ => None,
        }
    }

    /// Whether connections must authenticate with SASL.
    pub fn is_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    /// Whether connections are wrapped in TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }
}

/// The TLS side of an `SSL` or `SASL_SSL` listener: the broker's
/// certificate chain and key (PEM files), and optionally the CA that client
/// certificates must chain to (then a client certificate is required:
/// Kafka's `ssl.client.auth=required`).
///
/// With client certificates the principal stays `User:ANONYMOUS` on an
/// `SSL` listener (and the SASL user on `SASL_SSL`): mapping the
/// certificate's subject to a principal is not done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerTls {
    /// PEM certificate chain of the broker (`ssl.keystore.location` in PEM).
    pub cert_path: std::path::PathBuf,
    /// PEM private key of the broker.
    pub key_path: std::path::PathBuf,
    /// PEM CA certificates for client certificates; `None` = no client
    /// certificate asked for.
    pub client_ca_path: Option<std::path::PathBuf>,
    /// Longest a TLS handshake may take before the connection is dropped.
    pub handshake_timeout: Duration,
}

impl BrokerTls {
    /// The broker's certificate and key, no client certificates, a 10 s
    /// handshake timeout.
    pub fn new(
        cert_path: impl Into<std::path::PathBuf>,
        key_path: impl Into<std::path::PathBuf>,
    ) -> Self {
        Self {
            cert_path: cert_path.into(),
            key_path: key_path.into(),
            client_ca_path: None,
            handshake_timeout: Duration::from_secs(10),
        }
    }

    /// Requires client certificates signed by the CAs in `path`.
    pub fn with_client_ca(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.client_ca_path = Some(path.into());
        self
    }

    /// Builds the acceptor; an unreadable or invalid file is an error naming it.
    pub fn acceptor(&self) -> std::io::Result<tokio_rustls::TlsAcceptor> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let bad = |what: &str, path: &std::path::Path, e: &dyn std::fmt::Display| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{what} {}: {e}", path.display()),
            )
        };
        let read_certs = |what: &str, path: &std::path::Path| {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| bad(what, path, &e))?;
            if certs.is_empty() {
                return Err(bad(what, path, &"no PEM certificate found"));
            }
            Ok(certs)
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = read_certs("TLS certificate", &self.cert_path)?;
        let key = PrivateKeyDer::from_pem_file(&self.key_path)
            .map_err(|e| bad("TLS key", &self.key_path, &e))?;
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(std::io::Error::other)?;
        let builder = match &self.client_ca_path {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in read_certs("client CA", ca)? {
                    roots.add(c).map_err(|e| bad("client CA", ca, &e))?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| bad("client CA", ca, &e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| bad("TLS certificate/key", &self.cert_path, &e))?;
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// Security settings of the broker.
#[derive(Debug, Clone)]
pub struct SecurityConfig {
    /// The listener's protocol.
    pub protocol: ListenerProtocol,
    /// Mechanisms offered (`sasl.enabled.mechanisms`).
    pub sasl_mechanisms: Vec<SaslMechanism>,
    /// Also offer OAUTHBEARER, checking unsecured JWS tokens as Kafka's
    /// default validator does (`crate::oauthbearer`): any client may
    /// claim any principal, so it is for development clusters only.
    pub oauthbearer_unsecured: bool,
    /// Users and their passwords (PLAIN checks them; SCRAM credentials are
    /// derived from them).
    pub users: BTreeMap<String, String>,
    /// Principals allowed everything (`super.users`, e.g. `User:admin`).
    pub super_users: Vec<String>,
    /// Whether requests are authorized by ACLs.
    pub acl_enabled: bool,
    /// `allow.everyone.if.no.acl.found`: with ACLs on, a resource that no
    /// ACL covers is open to everyone.
    pub allow_everyone_if_no_acl_found: bool,
    /// Delay before answering a failed authentication.
    pub auth_failure_delay: Duration,
    /// PBKDF2 iterations of the derived SCRAM credentials.
    pub scram_iterations: u32,
    /// Session lifetime announced to clients; `None` = unlimited.
    pub reauth_ms: Option<u64>,
    /// Certificate and key of an `SSL` / `SASL_SSL` listener.
    pub tls: Option<BrokerTls>,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        Self {
            protocol: ListenerProtocol::Plaintext,
            sasl_mechanisms: vec![
                SaslMechanism::Plain,
                SaslMechanism::ScramSha256,
                SaslMechanism::ScramSha512,
            ],
            oauthbearer_unsecured: false,
            users: BTreeMap::new(),
            super_users: Vec::new(),
            acl_enabled: false,
            allow_everyone_if_no_acl_found: false,
            auth_failure_delay: Duration::from_millis(100),
            scram_iterations: MIN_SCRAM_ITERATIONS,
            reauth_ms: None,
            tls: None,
        }
    }
}

/// Credentials and authorizer, built at start; SCRAM credentials change
/// with AlterUserScramCredentials.
#[derive(Debug)]
pub struct SecurityState {
    config: SecurityConfig,
    scram: ScramStore,
    authorizer: Option<Authorizer>,
}

impl SecurityState {
    /// Derives credentials and opens the authorizer (`acls.json` in
    /// `data_dir`, if any).
    pub fn open(
        config: SecurityConfig,
        data_dir: Option<&std::path::Path>,
    ) -> std::io::Result<Self> {
        let mut seeded = HashMap::new();
        for (user, pw) in &config.users {
            for m in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
                if config.sasl_mechanisms.contains(&m) {
                    seeded.insert(
                        (m, user.clone()),
                        ScramCredential::generate(
                            m,
                            pw,
                            config.scram_iterations.max(MIN_SCRAM_ITERATIONS),
                        ),
                    );
                }
            }
        }
        let scram = ScramStore::open(seeded, data_dir.map(|d| d.join(SCRAM_FILE)))?;
        let authorizer = if config.acl_enabled {
            let supers = config.super_users.clone();
            let authorizer = match data_dir {
                Some(d) => Authorizer::open(d.join("acls.json"), supers)?,
                None => Authorizer::new(supers),
            };
            Some(authorizer.allow_everyone_if_no_acl_found(config.allow_everyone_if_no_acl_found))
        } else {
            None
        };
        Ok(Self {
            config,
            scram,
            authorizer,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SecurityConfig {
        &self.config
    }

    /// The authorizer, `None` when ACLs are off.
    pub fn authorizer(&self) -> Option<&Authorizer> {
        self.authorizer.as_ref()
    }

    /// The SCRAM credentials (DescribeUserScramCredentials,
    /// AlterUserScramCredentials).
    pub fn scram(&self) -> &ScramStore {
        &self.scram
    }

    fn check_plain(&self, user: &str, password: &str) -> bool {
        match self.config.users.get(user) {
            Some(pw) => constant_time_eq(pw.as_bytes(), password.as_bytes()),
            None => false,
        }
    }
}

/// The mechanism name of OAUTHBEARER (KIP-255).
const OAUTHBEARER: &str = "OAUTHBEARER";

enum AuthState {
    /// No handshake yet (or re-authentication not started).
    Initial,
    /// SaslHandshake named a mechanism.
    Handshaken(SaslMechanism),
    /// A SCRAM exchange is under way.
    Scram(ScramServer),
    /// SaslHandshake named OAUTHBEARER; after a refused token, the JSON
    /// error sent as the challenge, which the client's %x01 turns into
    /// the failure.
    OAuthBearer(Option<String>),
}

/// One connection's security state: its principal and where its SASL
/// exchange is.
pub struct Session {
    /// This connection's id, unique in the process (share sessions
    /// remember the connection they were last used on, D18).
    connection_id: u64,
    principal: Arc<str>,
    host: Arc<str>,
    authenticated: bool,
    expires: Option<Instant>,
    state: AuthState,
    /// How long the connection must read nothing more, in milliseconds,
    /// after the answer being written: set by a request throttled by a
    /// client quota (KIP-219), taken by the connection's loop.
    mute_ms: std::sync::atomic::AtomicI64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("principal", &self.principal)
            .field("host", &self.host)
            .field("authenticated", &self.authenticated)
            .finish()
    }
}

impl Session {
    /// A new connection from `host` on a listener of `protocol`.
    pub fn new(protocol: ListenerProtocol, host: &str) -> Self {
        static NEXT_CONNECTION_ID: std::sync::atomic::AtomicU64 =
            std::sync::atomic::AtomicU64::new(1);
        Self {
            connection_id: NEXT_CONNECTION_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            principal: Arc::from(ANONYMOUS),
            host: Arc::from(host),
            authenticated: !protocol.is_sasl(),
            expires: None,
            state: AuthState::Initial,
            mute_ms: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// Mutes the connection for `ms` after the current answer (the longest
    /// asked for wins).
    pub fn mute_for(&self, ms: i64) {
        self.mute_ms
            .fetch_max(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The mute asked for since the last call, 0 for none.
    pub fn take_mute(&self) -> i64 {
        self.mute_ms.swap(0, std::sync::atomic::Ordering::Relaxed)
    }

    /// This connection's id, unique in the process.
    pub fn connection_id(&self) -> u64 {
        self.connection_id
    }

    /// The connection's principal (`User:ANONYMOUS` before authentication).
    pub fn principal(&self) -> &Arc<str> {
        &self.principal
    }

    /// The peer's IP.
    pub fn host(&self) -> &Arc<str> {
        &self.host
    }

    /// Whether the connection may send requests other than authentication.
    pub fn may_send(&self, key: i16, now: Instant) -> bool {
        if key == API_VERSIONS_KEY || key == SASL_HANDSHAKE_KEY || key == SASL_AUTHENTICATE_KEY {
            return true;
        }
        self.authenticated && self.expires.is_none_or(|e| now < e)
    }
}

fn encode<R: sharestream_protocol::api::ApiRequest>(
    resp: &R::Response,
    header: &RequestHeaderInfo,
    out: &mut BytesMut,
) -> Result<(), Close> {
    encode_response_frame::<R>(resp, header.api_version, header.correlation_id, out)
        .map_err(|e| Close::Protocol(format!("cannot encode response: {e}")))
}

/// Handles SaslHandshake and SaslAuthenticate for `session`. A failed
/// authentication is answered after the configured delay and then closes
/// the connection (the `Err`).
pub(crate) async fn handle_sasl(
    core: &Arc<BrokerCore>,
    session: &mut Session,
    header: &RequestHeaderInfo,
    mut body: Bytes,
    out: &mut BytesMut,
) -> Result<(), Close> {
    let sec = core.security();
    let version = header.api_version;
    if header.api_key == SASL_HANDSHAKE_KEY {
        if version != 1 {
            return Err(Close::Protocol(format!(
                "SaslHandshake v{version}: only v1 (with SaslAuthenticate) is served"
            )));
        }
        let req = SaslHandshakeRequest::decode(&mut body, version)
            .map_err(|e| Close::Protocol(format!("undecodable SaslHandshake: {e}")))?;
        let offered = &sec.config().sasl_mechanisms;
        let oauth = sec.config().oauthbearer_unsecured;
        let mechanisms = offered
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .chain(oauth.then(|| StrBytes::from_static_str(OAUTHBEARER)))
            .collect();
        let mut resp = SaslHandshakeResponse::default().with_mechanisms(mechanisms);
        if !sec.config().protocol.is_sasl() || !matches!(session.state, AuthState::Initial) {
            resp.error_code = ErrorCode::ILLEGAL_SASL_STATE.0;
            encode::<SaslHandshakeRequest>(&resp, header, out)?;
            return Err(Close::Protocol("SaslHandshake out of order".into()));
        }
        if oauth && req.mechanism.as_str() == OAUTHBEARER {
            session.state = AuthState::OAuthBearer(None);
            return encode::<SaslHandshakeRequest>(&resp, header, out);
        }
        match SaslMechanism::from_name(req.mechanism.as_str()).filter(|m| offered.contains(m)) {
            Some(m) => {
                session.state = AuthState::Handshaken(m);
                encode::<SaslHandshakeRequest>(&resp, header, out)
            }
            None => {
                resp.error_code = ErrorCode::UNSUPPORTED_SASL_MECHANISM.0;
                encode::<SaslHandshakeRequest>(&resp, header, out)?;
                Err(Close::Protocol(format!(
                    "unsupported SASL mechanism {:?}",
                    req.mechanism.as_str()
                )))
            }
        }
    } else {
        let req = SaslAuthenticateRequest::decode(&mut body, version)
            .map_err(|e| Close::Protocol(format!("undecodable SaslAuthenticate: {e}")))?;
        let token = req.auth_bytes;
        let state = std::mem::replace(&mut session.state, AuthState::Initial);
        // A token's expiry bounds the session (KIP-368), as in Kafka.
        let mut token_expires_ms = None;
        let outcome: Result<(Option<String>, Bytes), String> = match state {
            // The client's %x01 after our error challenge: the exchange
            // fails with the error as the message. Anything else is a new
            // first message, as Kafka reads it.
            AuthState::OAuthBearer(Some(refusal)) if token.as_ref() == [oauthbearer::KVSEP] => {
                return fail_with(core, header, out, "OAUTHBEARER: token refused", &refusal).await;
            }
            AuthState::OAuthBearer(_) => {
                let initial = match oauthbearer::ClientInitialResponse::parse(&token) {
                    Ok(m) => m,
                    Err(e) => return fail_with(core, header, out, &e, &e).await,
                };
                match crate::oauthbearer::validate_unsecured(&initial.token, core.now_ms()) {
                    Ok(valid) => {
                        if initial
                            .authorization_id
                            .as_ref()
                            .is_some_and(|a| *a != valid.principal)
                        {
                            let msg = "Authentication failed: Client requested an authorization \
                                       id that is different from the token's principal name";
                            return fail_with(core, header, out, msg, msg).await;
                        }
                        token_expires_ms = Some(valid.expires_ms);
                        Ok((Some(valid.principal), Bytes::new()))
                    }
                    Err(reason) => {
                        tracing::debug!(%reason, "OAUTHBEARER token refused");
                        let challenge =
                            oauthbearer::error_challenge(crate::oauthbearer::INVALID_TOKEN);
                        session.state = AuthState::OAuthBearer(Some(challenge.clone()));
                        Ok((None, Bytes::from(challenge)))
                    }
                }
            }
            AuthState::Handshaken(SaslMechanism::Plain) => match parse_plain(&token) {
                Ok((user, pw)) if sec.check_plain(&user, &pw) => Ok((Some(user), Bytes::new())),
                Ok((user, _)) => Err(format!("PLAIN: bad credentials for {user:?}")),
                Err(e) => Err(e.to_string()),
            },
            AuthState::Handshaken(m) => {
                let mut server = ScramServer::new(m);
                match server.server_first(&token, |u| sec.scram.get(m, u)) {
                    Ok(first) => {
                        session.state = AuthState::Scram(server);
                        Ok((None, Bytes::from(first)))
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            AuthState::Scram(mut server) => match server.server_final(&token) {
                Ok((user, fin)) => Ok((Some(user), Bytes::from(fin))),
                Err(e) => Err(e.to_string()),
            },
            AuthState::Initial => Err("SaslAuthenticate before SaslHandshake".to_string()),
        };
        match outcome {
            Ok((user, bytes)) => {
                let mut resp = SaslAuthenticateResponse::default().with_auth_bytes(bytes);
                if let Some(user) = user {
                    let principal = format!("User:{user}");
                    if session.authenticated && *session.principal != *principal {
                        // KIP-368: re-authentication may not change the principal.
                        return fail(core, header, out, "re-authentication changed the principal")
                            .await;
                    }
                    session.principal = Arc::from(principal.as_str());
                    session.authenticated = true;
                    core.metrics().add("sasl_authentication_successes", 1);
                    if let Some(ms) = sec.config().reauth_ms {
                        // With re-authentication on, a session lasts no
                        // longer than its OAUTHBEARER token (KIP-368).
                        let ms = token_expires_ms.map_or(ms, |exp| {
                            ms.min(exp.saturating_sub(core.now_ms()).max(0) as u64)
                        });
                        session.expires = Some(Instant::now() + Duration::from_millis(ms));
                        if version >= 1 {
                            resp.session_lifetime_ms = ms as i64;
                        }
                    }
                    tracing::debug!(%principal, "authenticated");
                }
                encode::<SaslAuthenticateRequest>(&resp, header, out)
            }
            Err(reason) => fail(core, header, out, &reason).await,
        }
    }
}

async fn fail(
    core: &Arc<BrokerCore>,
    header: &RequestHeaderInfo,
    out: &mut BytesMut,
    reason: &str,
) -> Result<(), Close> {
    fail_with(
        core,
        header,
        out,
        reason,
        "Authentication failed: invalid credentials",
    )
    .await
}

/// A failed authentication whose message to the client is `message`
/// (`reason` is for the log).
async fn fail_with(
    core: &Arc<BrokerCore>,
    header: &RequestHeaderInfo,
    out: &mut BytesMut,
    reason: &str,
    message: &str,
) -> Result<(), Close> {
    core.metrics().add("sasl_authentication_failures", 1);
    tokio::time::sleep(core.security().config().auth_failure_delay).await;
    let resp = SaslAuthenticateResponse::default()
        .with_error_code(ErrorCode::SASL_AUTHENTICATION_FAILED.0)
        .with_error_message(Some(StrBytes::from_string(message.to_string())));
    encode::<SaslAuthenticateRequest>(&resp, header, out)?;
    Err(Close::Protocol(format!("authentication failed: {reason}")))
}
