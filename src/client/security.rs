//! Client security: `security.protocol`, TLS through rustls and the client
//! side of SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
//!
//! # Design
//!
//! [`SecuritySettings`] is plain data inside [`ConnectionConfig`]
//! (`ConnectionConfig::security`), so every client (admin, producer, share
//! consumer, metadata cache, runtime) gets it through the one connection
//! path: [`Connection::connect_tcp`] opens TCP, wraps it in TLS when the
//! protocol is `SSL` or `SASL_SSL` ([`tls_connect`]), and
//! [`Connection::new`] negotiates API versions and then authenticates with
//! SASL when the protocol is `SASL_PLAINTEXT` or `SASL_SSL`
//! (the SASL exchange inside `Connection::new`). A connection that fails either step is
//! never handed out.
//!
//! TLS: server certificates are checked against the CA file
//! (`ssl.ca.location`, or Java's `ssl.truststore.location` with
//! `ssl.truststore.type=PEM`) or, without one, the Mozilla roots shipped by
//! `webpki-roots`. Hostname verification is on by default
//! (`ssl.endpoint.identification.algorithm=https`); an empty value turns it
//! off (with a warning) but the chain is still verified. A client
//! certificate is sent when `ssl.certificate.location` and
//! `ssl.key.location` are both set. Any TLS failure is
//! [`ClientError::Tls`], which is not retriable: a wrong CA fails closed,
//! before a single Kafka byte is written.
//!
//! SASL: SaslHandshake v1 names the mechanism, then SaslAuthenticate
//! (the highest version both sides have, v2 from our broker and Kafka)
//! carries the tokens of the state machines in [`crate::protocol::sasl`].
//! A refusal is [`ClientError::Authentication`], fatal, naming the
//! mechanism and user but never the password ([`Password`] does not print).
//!
//! Re-authentication (KIP-368): when SaslAuthenticate v1+ announces a
//! session lifetime, the connection re-authenticates once 85% of it has
//! passed (counted from when the final SaslAuthenticate was sent), lazily,
//! before the next request is queued. Requests queue behind a gate that the
//! re-authentication holds exclusively, so no other request can slip in
//! between its SaslHandshake and SaslAuthenticate frames; requests already
//! queued go out first, in order, as Kafka's brokers expect.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite};

use super::config::ConfigError;
use super::error::ClientError;
use crate::protocol::sasl::SaslMechanism;

#[cfg(doc)]
use super::{config::ConnectionConfig, connection::Connection};

/// `security.protocol`: how a client reaches the brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    /// Plain TCP, no authentication.
    #[default]
    Plaintext,
    /// TLS, no SASL.
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's names, for messages.
    pub const NAMES: &'static [&'static str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

    /// Parses Kafka's name, case-insensitively.
    pub fn from_name(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Self::Plaintext),
            "SSL" => Some(Self::Ssl),
            "SASL_PLAINTEXT" => Some(Self::SaslPlaintext),
            "SASL_SSL" => Some(Self::SaslSsl),
            _ => None,
        }
    }

    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections are wrapped in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// A password that never shows up in `Debug` output or error messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// Wraps a password.
    pub fn new(p: impl Into<String>) -> Self {
        Self(p.into())
    }

    /// The password itself, for the SASL state machines.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

/// SASL credentials: `sasl.mechanism` and the user's name and password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    /// `sasl.mechanism`.
    pub mechanism: SaslMechanism,
    /// `sasl.username`.
    pub username: String,
    /// `sasl.password`.
    pub password: Password,
}

impl SaslCredentials {
    /// Credentials for `mechanism`.
    pub fn new(
        mechanism: SaslMechanism,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        Self {
            mechanism,
            username: username.into(),
            password: Password::new(password),
        }
    }
}

/// TLS settings (librdkafka's names; Java's PEM truststore is accepted too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `ssl.ca.location`: PEM file of CA certificates that may sign the
    /// brokers' certificates; `None` = the Mozilla roots of `webpki-roots`.
    pub ca_location: Option<PathBuf>,
    /// `ssl.certificate.location`: PEM client certificate chain (mTLS).
    pub certificate_location: Option<PathBuf>,
    /// `ssl.key.location`: PEM private key of the client certificate.
    pub key_location: Option<PathBuf>,
    /// `ssl.endpoint.identification.algorithm`: `https` (default, the
    /// broker's certificate must name the host connected to) or empty (off).
    pub endpoint_identification: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        Self {
            ca_location: None,
            certificate_location: None,
            key_location: None,
            endpoint_identification: true,
        }
    }
}

impl TlsSettings {
    /// Trust the CAs in the PEM file at `path`.
    pub fn with_ca_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_location = Some(path.into());
        self
    }

    /// Send the client certificate chain and key in these PEM files.
    pub fn with_client_certificate(
        mut self,
        certificate: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.certificate_location = Some(certificate.into());
        self.key_location = Some(key.into());
        self
    }

    /// Turns hostname verification on or off.
    pub fn with_endpoint_identification(mut self, on: bool) -> Self {
        self.endpoint_identification = on;
        self
    }
}

/// Everything a connection needs to secure itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecuritySettings {
    /// `security.protocol`.
    pub protocol: SecurityProtocol,
    /// TLS settings, used with `SSL` and `SASL_SSL`.
    pub tls: TlsSettings,
    /// SASL credentials, required with `SASL_PLAINTEXT` and `SASL_SSL`.
    pub sasl: Option<SaslCredentials>,
}

impl SecuritySettings {
    /// `PLAINTEXT`.
    pub fn plaintext() -> Self {
        Self::default()
    }

    /// `SSL` with these TLS settings.
    pub fn ssl(tls: TlsSettings) -> Self {
        Self {
            protocol: SecurityProtocol::Ssl,
            tls,
            sasl: None,
        }
    }

    /// `SASL_PLAINTEXT` with these credentials.
    pub fn sasl_plaintext(sasl: SaslCredentials) -> Self {
        Self {
            protocol: SecurityProtocol::SaslPlaintext,
            tls: TlsSettings::default(),
            sasl: Some(sasl),
        }
    }

    /// `SASL_SSL` with these TLS settings and credentials.
    pub fn sasl_ssl(tls: TlsSettings, sasl: SaslCredentials) -> Self {
        Self {
            protocol: SecurityProtocol::SaslSsl,
            tls,
            sasl: Some(sasl),
        }
    }

    /// The SASL credentials a SASL protocol needs, or a configuration error.
    pub(crate) fn sasl_credentials(&self) -> Result<Option<&SaslCredentials>, ClientError> {
        if !self.protocol.uses_sasl() {
            return Ok(None);
        }
        match &self.sasl {
            Some(c) => Ok(Some(c)),
            None => Err(ClientError::Config(format!(
                "security.protocol={} needs sasl.mechanism and credentials \
                 (sasl.username/sasl.password or sasl.jaas.config)",
                self.protocol.name()
            ))),
        }
    }
}

// ---------------------------------------------------------------------------
// Kafka-named properties
// ---------------------------------------------------------------------------

fn config_error(setting: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::new(setting, format!("{setting}: {}", message.into()))
}

/// Reads user name and password from a `sasl.jaas.config` value such as
/// `org.apache.kafka.common.security.scram.ScramLoginModule required
/// username="alice" password="alice-secret";`. The Plain and Scram login
/// modules are accepted; values are double-quoted (with `\"` and `\\`
/// escapes) or bare words. The error never contains the password.
pub fn parse_jaas_config(text: &str) -> Result<(String, Password), ConfigError> {
    const SETTING: &str = "sasl.jaas.config";
    let text = text.trim();
    let (module, rest) = text.split_once(char::is_whitespace).ok_or_else(|| {
        config_error(
            SETTING,
            "expected `<LoginModule> required username=\"...\" password=\"...\";`",
        )
    })?;
    let known = [
        "org.apache.kafka.common.security.plain.PlainLoginModule",
        "org.apache.kafka.common.security.scram.ScramLoginModule",
    ];
    if !known.contains(&module) {
        return Err(config_error(
            SETTING,
            format!(
                "login module {module:?} is not supported (use PlainLoginModule or ScramLoginModule)"
            ),
        ));
    }
    let rest = rest.trim_start();
    let (flag, mut rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if !flag.eq_ignore_ascii_case("required") {
        return Err(config_error(
            SETTING,
            format!("expected the control flag `required` after the login module, got {flag:?}"),
        ));
    }
    let mut username = None;
    let mut password = None;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest == ";" {
            break;
        }
        let Some((key, after)) = rest.split_once('=') else {
            return Err(config_error(
                SETTING,
                "expected key=value options ending with ';'",
            ));
        };
        let key = key.trim();
        let after = after.trim_start();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let Some(end) = end else {
                return Err(config_error(
                    SETTING,
                    format!("unterminated quote in option {key}"),
                ));
            };
            (value, &quoted[end..])
        } else {
            let end = after
                .find(|c: char| c.is_whitespace() || c == ';')
                .unwrap_or(after.len());
            (after[..end].to_string(), &after[end..])
        };
        match key {
            "username" => username = Some(value),
            "password" => password = Some(Password::new(value)),
            _ => {} // other options (e.g. tokenauth) are ignored
        }
        rest = remaining;
    }
    match (username, password) {
        (Some(u), Some(p)) => Ok((u, p)),
        (None, _) => Err(config_error(SETTING, "no username=\"...\" option")),
        (_, None) => Err(config_error(SETTING, "no password=\"...\" option")),
    }
}

/// Builds [`SecuritySettings`] from Kafka-named properties; `get` returns a
/// property's value if given. Errors name the setting.
pub fn security_from_properties<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
) -> Result<SecuritySettings, ConfigError> {
    let protocol = match get("security.protocol") {
        None => SecurityProtocol::Plaintext,
        Some(v) => SecurityProtocol::from_name(v).ok_or_else(|| {
            config_error(
                "security.protocol",
                format!(
                    "expected one of {}, got {v:?}",
                    SecurityProtocol::NAMES.join(", ")
                ),
            )
        })?,
    };
    let path = |name: &str| {
        get(name)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut tls = TlsSettings {
        ca_location: path("ssl.ca.location"),
        certificate_location: path("ssl.certificate.location"),
        key_location: path("ssl.key.location"),
        endpoint_identification: true,
    };
    if let Some(store) = path("ssl.truststore.location") {
        let kind = get("ssl.truststore.type").unwrap_or("JKS").trim();
        if !kind.eq_ignore_ascii_case("PEM") {
            return Err(config_error(
                "ssl.truststore.type",
                format!(
                    "only PEM truststores are supported (got {kind:?}); \
                     or give the CA file as ssl.ca.location"
                ),
            ));
        }
        if tls.ca_location.is_none() {
            tls.ca_location = Some(store);
        }
    }
    if let Some(v) = get("ssl.endpoint.identification.algorithm") {
        match v.trim().to_ascii_lowercase().as_str() {
            "https" => {}
            "" | "none" => tls.endpoint_identification = false,
            _ => {
                return Err(config_error(
                    "ssl.endpoint.identification.algorithm",
                    format!("expected https or empty, got {v:?}"),
                ));
            }
        }
    }
    if tls.certificate_location.is_some() != tls.key_location.is_some() {
        return Err(config_error(
            "ssl.certificate.location",
            "ssl.certificate.location and ssl.key.location must be given together",
        ));
    }
    let sasl = if protocol.uses_sasl() {
        let mechanism = match get("sasl.mechanism") {
            None => {
                return Err(config_error(
                    "sasl.mechanism",
                    format!(
                        "must be set with security.protocol={} (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)",
                        protocol.name()
                    ),
                ));
            }
            Some(m) => {
                SaslMechanism::from_name(&m.trim().to_ascii_uppercase()).ok_or_else(|| {
                    config_error(
                        "sasl.mechanism",
                        format!("expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got {m:?}"),
                    )
                })?
            }
        };
        let (username, password) = match (get("sasl.username"), get("sasl.password")) {
            (Some(u), Some(p)) => (u.to_string(), Password::new(p)),
            (Some(_), None) => {
                return Err(config_error(
                    "sasl.password",
                    "must be set with sasl.username",
                ));
            }
            (None, Some(_)) => {
                return Err(config_error(
                    "sasl.username",
                    "must be set with sasl.password",
                ));
            }
            (None, None) => match get("sasl.jaas.config") {
                Some(jaas) => parse_jaas_config(jaas)?,
                None => {
                    return Err(config_error(
                        "sasl.jaas.config",
                        format!(
                            "security.protocol={} needs sasl.username and sasl.password, \
                             or sasl.jaas.config",
                            protocol.name()
                        ),
                    ));
                }
            },
        };
        Some(SaslCredentials {
            mechanism,
            username,
            password,
        })
    } else {
        None
    };
    Ok(SecuritySettings {
        protocol,
        tls,
        sasl,
    })
}

/// Whether `name` is one of the security settings read by
/// [`security_from_properties`].
pub fn is_security_setting(name: &str) -> bool {
    SECURITY_SETTINGS.contains(&name)
}

/// The security settings' names.
pub const SECURITY_SETTINGS: &[&str] = &[
    "security.protocol",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.endpoint.identification.algorithm",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
];

/// Security settings by name as given one at a time (a client config's
/// `set`), turned into [`SecuritySettings`] once all are in. Its `Debug`
/// hides `sasl.password` and `sasl.jaas.config`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecurityProperties(std::collections::BTreeMap<String, String>);

impl SecurityProperties {
    /// Records one setting (see [`is_security_setting`]).
    pub fn insert(&mut self, name: &str, value: &str) {
        self.0.insert(name.to_string(), value.to_string());
    }

    /// Whether no security setting was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The settings they describe; errors name the setting.
    pub fn settings(&self) -> Result<SecuritySettings, ConfigError> {
        security_from_properties(|k| self.0.get(k).map(String::as_str))
    }
}

impl std::fmt::Debug for SecurityProperties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in &self.0 {
            if k == "sasl.password" || k == "sasl.jaas.config" {
                m.entry(k, &"[hidden]");
            } else {
                m.entry(k, v);
            }
        }
        m.finish()
    }
}

// ---------------------------------------------------------------------------
// TLS
// ---------------------------------------------------------------------------

fn tls_error(what: impl std::fmt::Display) -> ClientError {
    ClientError::Tls(what.to_string())
}

fn read_certs(setting: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| tls_error(format!("{setting} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(tls_error(format!(
            "{setting} {}: no PEM certificate found",
            path.display()
        )));
    }
    Ok(certs)
}

/// The rustls client configuration these settings describe (reads the PEM
/// files named in them).
pub fn tls_client_config(tls: &TlsSettings) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    match &tls.ca_location {
        Some(path) => {
            for cert in read_certs("ssl.ca.location", path)? {
                roots
                    .add(cert)
                    .map_err(|e| tls_error(format!("ssl.ca.location {}: {e}", path.display())))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?;
    let builder = if tls.endpoint_identification {
        builder.with_root_certificates(roots)
    } else {
        tracing::warn!(
            "ssl.endpoint.identification.algorithm is empty: broker host names are not verified"
        );
        let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(tls_error)?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoHostnameVerifier { inner }))
    };
    let config = match (&tls.certificate_location, &tls.key_location) {
        (Some(cert), Some(key)) => {
            let chain = read_certs("ssl.certificate.location", cert)?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| tls_error(format!("ssl.key.location {}: {e}", key.display())))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| tls_error(format!("client certificate: {e}")))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The host part of `host:port`, `[v6]:port` or a bare host.
pub(crate) fn host_of(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[')
        && let Some((host, _)) = rest.split_once(']')
    {
        return host;
    }
    match address.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() && !h.contains(':') => h,
        _ => address,
    }
}

/// Runs the TLS handshake over `stream` as a client of `host`.
pub async fn tls_connect<S>(
    stream: S,
    host: &str,
    tls: &TlsSettings,
) -> Result<tokio_rustls::client::TlsStream<S>, ClientError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let config = tls_client_config(tls)?;
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| tls_error(format!("{host:?} is not a valid TLS server name: {e}")))?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, stream)
        .await
        .map_err(|e| tls_error(format!("TLS handshake with {host} failed: {e}")))
}

/// Verifies the chain and signatures as usual but accepts a certificate
/// that does not name the host (`ssl.endpoint.identification.algorithm=`).
#[derive(Debug)]
struct NoHostnameVerifier {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for NoHostnameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The fraction of the session lifetime after which a connection
/// re-authenticates (Kafka's clients pick 85-95% at random; the low end
/// leaves the most room for requests already queued).
pub const REAUTH_FRACTION: f64 = 0.85;

/// When to re-authenticate a session of `lifetime` that started at `start`.
pub fn reauth_deadline(start: tokio::time::Instant, lifetime: Duration) -> tokio::time::Instant {
    start + lifetime.mul_f64(REAUTH_FRACTION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn props(pairs: &[(&str, &str)]) -> Result<SecuritySettings, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        security_from_properties(|k| m.get(k).map(String::as_str))
    }

    #[test]
    fn protocol_names_are_case_insensitive_and_bad_ones_named() {
        assert_eq!(
            SecurityProtocol::from_name("sasl_ssl"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert_eq!(props(&[]).unwrap(), SecuritySettings::plaintext());
        assert_eq!(
            props(&[("security.protocol", "ssl")]).unwrap().protocol,
            SecurityProtocol::Ssl
        );
        let e = props(&[("security.protocol", "TLS")]).unwrap_err();
        assert_eq!(e.setting, "security.protocol");
        assert!(e.message.contains("SASL_SSL"), "{e}");
    }

    #[test]
    fn sasl_from_username_password_and_from_jaas() {
        let s = props(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "pw"),
        ])
        .unwrap();
        assert_eq!(
            s.sasl,
            Some(SaslCredentials::new(
                SaslMechanism::ScramSha512,
                "alice",
                "pw"
            ))
        );
        let s = props(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required \
                 username=\"bob\" password=\"s3\\\"cr;et\";",
            ),
        ])
        .unwrap();
        let c = s.sasl.unwrap();
        assert_eq!(c.username, "bob");
        assert_eq!(c.password.expose(), "s3\"cr;et");
        assert!(!format!("{c:?}").contains("s3"));
    }

    #[test]
    fn sasl_errors_name_the_setting_and_hide_the_password() {
        let e = props(&[("security.protocol", "SASL_PLAINTEXT")]).unwrap_err();
        assert_eq!(e.setting, "sasl.mechanism");
        let e = props(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "GSSAPI"),
        ])
        .unwrap_err();
        assert_eq!(e.setting, "sasl.mechanism");
        let e = props(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
        ])
        .unwrap_err();
        assert_eq!(e.setting, "sasl.jaas.config");
        let e = parse_jaas_config(
            "com.sun.security.auth.module.Krb5LoginModule required password=\"topsecret\";",
        )
        .unwrap_err();
        assert_eq!(e.setting, "sasl.jaas.config");
        assert!(!e.message.contains("topsecret"), "{e}");
        let e = parse_jaas_config(
            "org.apache.kafka.common.security.scram.ScramLoginModule required password=\"topsecret\";",
        )
        .unwrap_err();
        assert!(e.message.contains("username"), "{e}");
        assert!(!e.message.contains("topsecret"), "{e}");
        let e = parse_jaas_config(
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"topsecret;",
        )
        .unwrap_err();
        assert!(!e.message.contains("topsecret"), "{e}");
    }

    #[test]
    fn tls_settings_from_properties() {
        let s = props(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", "/ca.pem"),
            ("ssl.endpoint.identification.algorithm", ""),
        ])
        .unwrap();
        assert_eq!(s.tls.ca_location.as_deref(), Some(Path::new("/ca.pem")));
        assert!(!s.tls.endpoint_identification);
        let s = props(&[
            ("security.protocol", "SSL"),
            ("ssl.truststore.location", "/t.pem"),
            ("ssl.truststore.type", "PEM"),
        ])
        .unwrap();
        assert_eq!(s.tls.ca_location.as_deref(), Some(Path::new("/t.pem")));
        let e = props(&[("ssl.truststore.location", "/t.jks")]).unwrap_err();
        assert_eq!(e.setting, "ssl.truststore.type");
        let e = props(&[("ssl.certificate.location", "/c.pem")]).unwrap_err();
        assert_eq!(e.setting, "ssl.certificate.location");
        let e = props(&[("ssl.endpoint.identification.algorithm", "ldap")]).unwrap_err();
        assert_eq!(e.setting, "ssl.endpoint.identification.algorithm");
    }

    #[test]
    fn host_of_addresses() {
        assert_eq!(host_of("broker-1:9092"), "broker-1");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9092"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }

    #[test]
    fn missing_ca_file_is_a_tls_error_naming_the_setting() {
        let e = tls_client_config(&TlsSettings::default().with_ca_location("/nonexistent/ca.pem"))
            .unwrap_err();
        assert!(matches!(e, ClientError::Tls(_)), "{e:?}");
        assert!(e.to_string().contains("ssl.ca.location"), "{e}");
        assert!(!e.is_retriable());
        // System roots need no file.
        tls_client_config(&TlsSettings::default()).unwrap();
    }

    #[test]
    fn reauth_deadline_is_before_expiry() {
        let t0 = tokio::time::Instant::now();
        let d = reauth_deadline(t0, Duration::from_millis(1000));
        assert_eq!(d - t0, Duration::from_millis(850));
    }
}

#[cfg(test)]
mod reauth_tests {
    use super::*;
    use crate::client::config::ConnectionConfig;
    use crate::client::connection::Connection;
    use crate::client::test_peer::{ScriptedPeer, all_apis_except, answered_topic, metadata_for};
    use kafka_protocol::messages::{
        MetadataRequest, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
        SaslHandshakeResponse,
    };

    /// Plays the broker's side of a PLAIN exchange announcing `lifetime_ms`.
    async fn serve_plain<S>(peer: &mut ScriptedPeer<S>, lifetime_ms: i64)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let h = peer.recv().await;
        assert_eq!(h.header.api_key, 17, "SaslHandshake first");
        assert_eq!(h.header.api_version, 1);
        peer.respond::<SaslHandshakeRequest>(
            &SaslHandshakeResponse::default(),
            1,
            h.header.correlation_id,
        )
        .await;
        let a = peer.recv().await;
        assert_eq!(a.header.api_key, 36, "then SaslAuthenticate");
        peer.respond::<SaslAuthenticateRequest>(
            &SaslAuthenticateResponse::default().with_session_lifetime_ms(lifetime_ms),
            a.header.api_version,
            a.header.correlation_id,
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn reauthenticates_at_85_percent_before_the_next_request_and_nothing_interleaves() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let config = ConnectionConfig::default().with_security(SecuritySettings::sasl_plaintext(
            SaslCredentials::new(SaslMechanism::Plain, "alice", "pw"),
        ));
        let peer = tokio::spawn(async move {
            let mut peer = ScriptedPeer::new(server);
            peer.handshake(&all_apis_except(&[])).await;
            serve_plain(&mut peer, 1000).await;
            for _ in 0..2 {
                let r = peer.recv().await;
                assert_eq!(r.header.api_key, 3, "no re-authentication before 85%");
                peer.answer_metadata(&r, &r.metadata_topic()).await;
            }
            // After 85% of the lifetime: the exchange comes first, whole.
            serve_plain(&mut peer, 1000).await;
            for _ in 0..2 {
                let r = peer.recv().await;
                assert_eq!(r.header.api_key, 3, "Metadata only after re-authentication");
                peer.answer_metadata(&r, &r.metadata_topic()).await;
            }
            peer
        });
        let conn = Connection::new(client, &config).await.unwrap();
        assert_eq!(conn.sasl_authentications(), 1);
        let a = conn.send(&metadata_for("a")).await.unwrap();
        assert_eq!(answered_topic(&a), "a");
        // Just before 85%: no re-authentication yet.
        tokio::time::advance(Duration::from_millis(845)).await;
        conn.send(&metadata_for("a2")).await.unwrap();
        assert_eq!(conn.sasl_authentications(), 1);
        tokio::time::advance(Duration::from_millis(10)).await;
        let (mb, mc) = (metadata_for("b"), metadata_for("c"));
        let (b, c) = tokio::join!(conn.send(&mb), conn.send::<MetadataRequest>(&mc));
        assert_eq!(answered_topic(&b.unwrap()), "b");
        assert_eq!(answered_topic(&c.unwrap()), "c");
        assert_eq!(conn.sasl_authentications(), 2);
        peer.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn no_lifetime_means_no_reauthentication() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let config = ConnectionConfig::default().with_security(SecuritySettings::sasl_plaintext(
            SaslCredentials::new(SaslMechanism::Plain, "alice", "pw"),
        ));
        let peer = tokio::spawn(async move {
            let mut peer = ScriptedPeer::new(server);
            peer.handshake(&all_apis_except(&[])).await;
            serve_plain(&mut peer, 0).await;
            let r = peer.recv().await;
            assert_eq!(r.header.api_key, 3);
            peer.answer_metadata(&r, &r.metadata_topic()).await;
            peer
        });
        let conn = Connection::new(client, &config).await.unwrap();
        tokio::time::advance(Duration::from_secs(3600)).await;
        conn.send(&metadata_for("x")).await.unwrap();
        assert_eq!(conn.sasl_authentications(), 1);
        peer.await.unwrap();
    }
}
