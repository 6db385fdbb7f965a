//! Connection settings, named and defaulted after Kafka's client configs.

use std::time::Duration;

use super::backoff::BackoffConfig;
use super::security::{SecurityProtocol, SecuritySettings, security_from_properties};
use crate::protocol::frame::DEFAULT_MAX_FRAME_SIZE;

/// Settings of one broker connection.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionConfig {
    /// `client.id`: sent in the header of every request (default
    /// `"sharestream"`).
    pub client_id: String,
    /// `request.timeout.ms`: how long a request waits for its response
    /// (default 30 s). On expiry the connection is closed, as Kafka's
    /// clients do.
    pub request_timeout: Duration,
    /// `socket.connection.setup.timeout.ms`: how long a TCP connect may take
    /// (default 10 s).
    pub connection_setup_timeout: Duration,
    /// `max.in.flight.requests.per.connection`: requests sent and not yet
    /// answered; further sends wait for a slot (default 5).
    pub max_in_flight_requests: usize,
    /// The largest response frame accepted; a larger length prefix poisons
    /// the connection (default 100 MiB).
    pub max_frame_size: usize,
    /// Spacing of reconnect attempts to one broker
    /// (`reconnect.backoff.ms` / `reconnect.backoff.max.ms`).
    pub reconnect_backoff: BackoffConfig,
    /// `security.protocol`, TLS and SASL settings (default PLAINTEXT).
    pub security: SecuritySettings,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            client_id: "sharestream".to_string(),
            request_timeout: Duration::from_secs(30),
            connection_setup_timeout: Duration::from_secs(10),
            max_in_flight_requests: 5,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            reconnect_backoff: BackoffConfig::reconnect(),
            security: SecuritySettings::default(),
        }
    }
}

impl ConnectionConfig {
    /// Sets `client.id`.
    pub fn with_client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = client_id.into();
        self
    }

    /// Sets `request.timeout.ms`.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets `max.in.flight.requests.per.connection` (at least 1).
    pub fn with_max_in_flight_requests(mut self, n: usize) -> Self {
        self.max_in_flight_requests = n.max(1);
        self
    }

    /// Sets the largest accepted response frame.
    pub fn with_max_frame_size(mut self, bytes: usize) -> Self {
        self.max_frame_size = bytes;
        self
    }

    /// Sets the reconnect backoff.
    pub fn with_reconnect_backoff(mut self, backoff: BackoffConfig) -> Self {
        self.reconnect_backoff = backoff;
        self
    }

    /// Sets `security.protocol` with its TLS and SASL settings.
    pub fn with_security(mut self, security: SecuritySettings) -> Self {
        self.security = security;
        self
    }
}

// ---------------------------------------------------------------------------
// Kafka-named settings
// ---------------------------------------------------------------------------

use std::collections::BTreeMap;

use crate::protocol::records::Compression;

/// A setting that is unknown or whose value does not parse, defined once
/// in the protocol crate (the share consumer and the broker's group
/// configs report the same shape). The message always names the setting.
pub use crate::protocol::ConfigError;

/// What values a setting accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    /// An integer within the inclusive bounds.
    Int {
        /// Smallest value.
        min: i64,
        /// Largest value.
        max: i64,
    },
    /// `true` or `false`.
    Bool,
    /// Any string (a non-empty one when `non_empty`).
    Str {
        /// Whether the empty string is refused.
        non_empty: bool,
    },
    /// A comma-separated, non-empty list of `host:port`.
    HostList,
    /// One of the listed words (compared case-insensitively).
    OneOf(&'static [&'static str]),
}

impl SettingKind {
    fn check(&self, name: &str, value: &str) -> Result<(), ConfigError> {
        match *self {
            SettingKind::Int { min, max } => {
                let expected = if min == 0 && max == i64::from(i32::MAX) {
                    "a non-negative integer".to_string()
                } else if max == i64::from(i32::MAX) || max == i64::MAX {
                    format!("an integer >= {min}")
                } else {
                    format!("an integer in {min}..={max}")
                };
                match value.trim().parse::<i64>() {
                    Ok(v) if v >= min && v <= max => Ok(()),
                    _ => Err(ConfigError::invalid(name, &expected, value)),
                }
            }
            SettingKind::Bool => match value.trim() {
                "true" | "false" => Ok(()),
                _ => Err(ConfigError::invalid(name, "true or false", value)),
            },
            SettingKind::Str { non_empty } => {
                if non_empty && value.trim().is_empty() {
                    Err(ConfigError::invalid(name, "a non-empty string", value))
                } else {
                    Ok(())
                }
            }
            SettingKind::HostList => {
                let ok = !value.trim().is_empty()
                    && value.split(',').all(|hp| {
                        let hp = hp.trim();
                        match hp.rsplit_once(':') {
                            Some((h, p)) => !h.is_empty() && p.parse::<u16>().is_ok(),
                            None => false,
                        }
                    });
                if ok {
                    Ok(())
                } else {
                    Err(ConfigError::invalid(
                        name,
                        "a comma-separated list of host:port",
                        value,
                    ))
                }
            }
            SettingKind::OneOf(words) => {
                if words.iter().any(|w| w.eq_ignore_ascii_case(value.trim())) {
                    Ok(())
                } else {
                    Err(ConfigError::invalid(
                        name,
                        &format!("one of {}", words.join(", ")),
                        value,
                    ))
                }
            }
        }
    }
}

/// One known setting: its Kafka name, accepted values and default.
#[derive(Debug, Clone, Copy)]
pub struct SettingDef {
    /// Kafka's name, e.g. `linger.ms`.
    pub name: &'static str,
    /// Accepted values.
    pub kind: SettingKind,
    /// The default as text, `None` when unset by default.
    pub default: Option<&'static str>,
}

const NON_NEG: SettingKind = SettingKind::Int {
    min: 0,
    max: i32::MAX as i64,
};
const POSITIVE: SettingKind = SettingKind::Int {
    min: 1,
    max: i32::MAX as i64,
};
const NAME: SettingKind = SettingKind::Str { non_empty: true };

macro_rules! settings {
    ($($name:literal => $kind:expr, $default:expr;)*) => {
        &[$(SettingDef { name: $name, kind: $kind, default: $default }),*]
    };
}

/// Settings shared by every client (connections, retries, metadata).
pub const COMMON_SETTINGS: &[SettingDef] = settings! {
    "bootstrap.servers" => SettingKind::HostList, None;
    "client.id" => SettingKind::Str { non_empty: false }, Some("sharestream");
    "request.timeout.ms" => POSITIVE, Some("30000");
    "socket.connection.setup.timeout.ms" => POSITIVE, Some("10000");
    "max.in.flight.requests.per.connection" => POSITIVE, Some("5");
    "reconnect.backoff.ms" => NON_NEG, Some("50");
    "reconnect.backoff.max.ms" => NON_NEG, Some("1000");
    "retry.backoff.ms" => NON_NEG, Some("100");
    "retry.backoff.max.ms" => NON_NEG, Some("1000");
    "metadata.max.age.ms" => NON_NEG, Some("300000");
    "default.api.timeout.ms" => POSITIVE, Some("60000");
    "security.protocol" => SettingKind::OneOf(SecurityProtocol::NAMES), Some("PLAINTEXT");
    "ssl.ca.location" => SettingKind::Str { non_empty: false }, None;
    "ssl.certificate.location" => SettingKind::Str { non_empty: false }, None;
    "ssl.key.location" => SettingKind::Str { non_empty: false }, None;
    "ssl.endpoint.identification.algorithm" => SettingKind::OneOf(&["https", ""]), Some("https");
    "ssl.truststore.location" => SettingKind::Str { non_empty: false }, None;
    "ssl.truststore.type" => SettingKind::OneOf(&["PEM", "JKS", "PKCS12"]), Some("JKS");
    "sasl.mechanism" => SettingKind::OneOf(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]), None;
    "sasl.username" => NAME, None;
    "sasl.password" => SettingKind::Str { non_empty: false }, None;
    "sasl.jaas.config" => NAME, None;
};

/// Settings whose values are secrets: never printed.
const SECRET_SETTINGS: &[&str] = &["sasl.password", "sasl.jaas.config"];

/// Producer settings.
pub const PRODUCER_SETTINGS: &[SettingDef] = settings! {
    "acks" => SettingKind::OneOf(&["all", "-1", "0", "1"]), Some("all");
    "linger.ms" => NON_NEG, Some("5");
    "batch.size" => NON_NEG, Some("16384");
    "compression.type" => SettingKind::OneOf(&["none", "gzip", "snappy", "lz4", "zstd"]), Some("none");
    "enable.idempotence" => SettingKind::Bool, Some("true");
    "retries" => NON_NEG, Some("2147483647");
    "delivery.timeout.ms" => POSITIVE, Some("120000");
    "max.block.ms" => NON_NEG, Some("60000");
    "buffer.memory" => SettingKind::Int { min: 0, max: i64::MAX }, Some("33554432");
    "max.request.size" => POSITIVE, Some("1048576");
    "transactional.id" => NAME, None;
    "transaction.timeout.ms" => POSITIVE, Some("60000");
    "partitioner.ignore.keys" => SettingKind::Bool, Some("false");
};

/// Share consumer settings (the consumer reads them; listed here so that
/// one properties file can configure a whole application).
pub const CONSUMER_SETTINGS: &[SettingDef] = settings! {
    "group.id" => NAME, None;
    "max.poll.records" => POSITIVE, Some("500");
    "share.acknowledgement.mode" => SettingKind::OneOf(&["implicit", "explicit"]), Some("implicit");
    "share.acquire.mode" => SettingKind::OneOf(&["batch_optimized", "record_limit"]), Some("batch_optimized");
};

/// Every table of known settings. A new client kind adds its table here.
pub const ALL_SETTINGS: &[&[SettingDef]] = &[COMMON_SETTINGS, PRODUCER_SETTINGS, CONSUMER_SETTINGS];

/// The definition of a known setting.
pub fn setting_def(name: &str) -> Option<&'static SettingDef> {
    ALL_SETTINGS
        .iter()
        .flat_map(|t| t.iter())
        .find(|d| d.name == name)
}

/// Validated settings under Kafka's names, as read from a properties file or
/// a list of `(key, value)` pairs.
///
/// Every name must be in one of the [`ALL_SETTINGS`] tables and every value
/// must parse as its [`SettingKind`]; the first offender is reported by
/// name. Typed views ([`ProducerConfig::from_client_config`], the
/// consumer's) read from it, falling back to the documented defaults.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientConfig {
    values: BTreeMap<String, String>,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in &self.values {
            if SECRET_SETTINGS.contains(&k.as_str()) {
                m.entry(k, &"[hidden]");
            } else {
                m.entry(k, v);
            }
        }
        m.finish()
    }
}

impl ClientConfig {
    /// An empty configuration (all defaults).
    pub fn new() -> Self {
        Self::default()
    }

    /// Validates and collects `(name, value)` pairs; a later pair overrides
    /// an earlier one.
    pub fn from_properties<K, V>(
        props: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ConfigError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut c = Self::new();
        for (k, v) in props {
            c.set(k.as_ref(), v.as_ref())?;
        }
        Ok(c)
    }

    /// Parses Java-style properties text (`name=value` lines, `#` or `!`
    /// comments, blank lines ignored).
    pub fn parse_properties(text: &str) -> Result<Self, ConfigError> {
        let mut pairs = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .or_else(|| line.split_once(':'))
                .ok_or_else(|| ConfigError::new(line, format!("{line}: expected name=value")))?;
            pairs.push((k.trim().to_string(), v.trim().to_string()));
        }
        Self::from_properties(pairs)
    }

    /// Sets one setting after validating its name and value.
    pub fn set(&mut self, name: &str, value: &str) -> Result<&mut Self, ConfigError> {
        let def = setting_def(name).ok_or_else(|| ConfigError::unknown(name))?;
        def.kind.check(name, value)?;
        self.values
            .insert(name.to_string(), value.trim().to_string());
        Ok(self)
    }

    /// The value given for `name`, if any (no default).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value given for `name`, or its default.
    pub fn get_or_default(&self, name: &str) -> Option<&str> {
        self.get(name)
            .or_else(|| setting_def(name).and_then(|d| d.default))
    }

    /// An integer setting (given or default).
    pub fn get_i64(&self, name: &str) -> Option<i64> {
        self.get_or_default(name).and_then(|v| v.parse().ok())
    }

    /// A boolean setting (given or default).
    pub fn get_bool(&self, name: &str) -> Option<bool> {
        self.get_or_default(name).map(|v| v == "true")
    }

    /// A duration setting in milliseconds (given or default).
    pub fn get_millis(&self, name: &str) -> Option<Duration> {
        self.get_i64(name)
            .map(|ms| Duration::from_millis(ms as u64))
    }

    /// Every setting given explicitly, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// `bootstrap.servers` split into `host:port` entries (empty if unset).
    pub fn bootstrap_servers(&self) -> Vec<String> {
        self.get("bootstrap.servers")
            .map(split_hosts)
            .unwrap_or_default()
    }

    /// `security.protocol` with its TLS and SASL settings; errors name the
    /// setting (and never show a password).
    pub fn security(&self) -> Result<SecuritySettings, ConfigError> {
        security_from_properties(|name| self.get(name))
    }

    /// The connection settings these properties describe, security
    /// included.
    pub fn connection_config(&self) -> Result<ConnectionConfig, ConfigError> {
        let mut c = ConnectionConfig::default();
        if let Some(id) = self.get("client.id") {
            c.client_id = id.to_string();
        }
        c.request_timeout = self
            .get_millis("request.timeout.ms")
            .unwrap_or(c.request_timeout);
        c.connection_setup_timeout = self
            .get_millis("socket.connection.setup.timeout.ms")
            .unwrap_or(c.connection_setup_timeout);
        c.max_in_flight_requests = self
            .get_i64("max.in.flight.requests.per.connection")
            .map(|n| n as usize)
            .unwrap_or(c.max_in_flight_requests);
        if self.get("reconnect.backoff.ms").is_some()
            || self.get("reconnect.backoff.max.ms").is_some()
        {
            c.reconnect_backoff = BackoffConfig {
                initial: self
                    .get_millis("reconnect.backoff.ms")
                    .unwrap_or(c.reconnect_backoff.initial),
                max: self
                    .get_millis("reconnect.backoff.max.ms")
                    .unwrap_or(c.reconnect_backoff.max),
                ..c.reconnect_backoff
            };
        }
        c.security = self.security()?;
        Ok(c)
    }
}

fn split_hosts(list: &str) -> Vec<String> {
    list.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `acks`: how many replicas must have the records before a send succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acks {
    /// `acks=0`: no response is awaited (no offsets, no idempotence).
    None,
    /// `acks=1`: the leader wrote them.
    Leader,
    /// `acks=all` (`-1`): every in-sync replica has them.
    #[default]
    All,
}

impl Acks {
    /// The value in a Produce request.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Settings of a producer, typed. Build with [`ProducerConfig::builder`] or
/// read from Kafka-named properties with
/// [`ProducerConfig::from_client_config`].
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerConfig {
    /// `bootstrap.servers`.
    pub bootstrap_servers: Vec<String>,
    /// Connection settings (`client.id`, `request.timeout.ms`, ...).
    pub connection: ConnectionConfig,
    /// `acks` (default all).
    pub acks: Acks,
    /// `linger.ms`: how long a batch waits for more records (default 5 ms).
    pub linger: Duration,
    /// `batch.size`: bytes after which a batch is sent at once (default 16 KiB).
    pub batch_size: usize,
    /// `compression.type` (default none).
    pub compression: Compression,
    /// `enable.idempotence` (default true; requires `acks=all`).
    pub enable_idempotence: bool,
    /// `retries`.
    pub retries: u32,
    /// `retry.backoff.ms` / `retry.backoff.max.ms`.
    pub retry_backoff: BackoffConfig,
    /// `delivery.timeout.ms`: a record not acknowledged by then fails.
    pub delivery_timeout: Duration,
    /// `max.block.ms` (default 60 s): how long `send` may wait, in all, for
    /// the metadata of its topic and for room in `buffer.memory`; also how
    /// long the idempotent producer's start and coordinator lookups may
    /// take.
    pub max_block: Duration,
    /// `buffer.memory` (default 32 MiB): the bytes of records the producer
    /// holds, queued or in flight, before `send` waits for room.
    pub buffer_memory: u64,
    /// `max.request.size` (default 1 MiB, as Java's): the largest record
    /// `send` accepts (its encoded size); a larger one fails at once with
    /// [`ProducerError::RecordTooLargeForRequest`](crate::client::ProducerError::RecordTooLargeForRequest),
    /// before it takes a sequence number.
    pub max_request_size: u64,
    /// `transactional.id`: enables the transactional API.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms` (default 60 s).
    pub transaction_timeout: Duration,
    /// `partitioner.ignore.keys`: place keyed records like unkeyed ones.
    pub partitioner_ignore_keys: bool,
    /// `max.in.flight.requests.per.connection`, per partition for the
    /// idempotent producer (at most 5).
    pub max_in_flight_per_partition: usize,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self::from_client_config(&ClientConfig::new()).expect("defaults are valid")
    }
}

impl ProducerConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> ProducerConfigBuilder {
        ProducerConfigBuilder {
            config: ProducerConfig::default(),
        }
    }

    /// Validated Kafka-named properties to a producer config. Settings of
    /// other clients (e.g. `group.id`) are accepted and ignored, as Kafka's
    /// clients do with a warning.
    pub fn from_client_config(c: &ClientConfig) -> Result<Self, ConfigError> {
        let acks = match c.get_or_default("acks").unwrap_or("all") {
            "0" => Acks::None,
            "1" => Acks::Leader,
            _ => Acks::All,
        };
        let compression = match c
            .get_or_default("compression.type")
            .unwrap_or("none")
            .to_ascii_lowercase()
            .as_str()
        {
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => Compression::None,
        };
        let ms = |n: &str| c.get_millis(n).unwrap_or_default();
        let transactional_id = c.get("transactional.id").map(str::to_string);
        let idempotence_given = c.get("enable.idempotence").is_some();
        let mut enable_idempotence = c.get_bool("enable.idempotence").unwrap_or(true);
        if !idempotence_given && acks != Acks::All {
            // Kafka turns the default idempotence off when acks is not all.
            enable_idempotence = false;
        }
        if enable_idempotence && acks != Acks::All {
            return Err(ConfigError::new(
                "acks",
                "acks: must be all (-1) when enable.idempotence=true",
            ));
        }
        if transactional_id.is_some() && !enable_idempotence {
            return Err(ConfigError::new(
                "enable.idempotence",
                "enable.idempotence: cannot be false when transactional.id is set",
            ));
        }
        let max_in_flight = c
            .get_i64("max.in.flight.requests.per.connection")
            .unwrap_or(5) as usize;
        if enable_idempotence && max_in_flight > 5 {
            return Err(ConfigError::new(
                "max.in.flight.requests.per.connection",
                "max.in.flight.requests.per.connection: must be at most 5 with idempotence",
            ));
        }
        Ok(Self {
            bootstrap_servers: c.bootstrap_servers(),
            connection: c.connection_config()?,
            acks,
            linger: ms("linger.ms"),
            batch_size: c.get_i64("batch.size").unwrap_or(16384) as usize,
            compression,
            enable_idempotence,
            retries: c.get_i64("retries").unwrap_or(i64::from(i32::MAX)) as u32,
            retry_backoff: BackoffConfig {
                initial: ms("retry.backoff.ms"),
                max: ms("retry.backoff.max.ms"),
                ..BackoffConfig::retry()
            },
            delivery_timeout: ms("delivery.timeout.ms"),
            max_block: ms("max.block.ms"),
            buffer_memory: c.get_i64("buffer.memory").unwrap_or(32 << 20) as u64,
            max_request_size: c.get_i64("max.request.size").unwrap_or(1 << 20) as u64,
            transactional_id,
            transaction_timeout: ms("transaction.timeout.ms"),
            partitioner_ignore_keys: c.get_bool("partitioner.ignore.keys").unwrap_or(false),
            max_in_flight_per_partition: max_in_flight.clamp(1, 5),
        })
    }

    /// Parses `(name, value)` pairs straight into a producer config.
    pub fn from_properties<K: AsRef<str>, V: AsRef<str>>(
        props: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ConfigError> {
        Self::from_client_config(&ClientConfig::from_properties(props)?)
    }
}

/// Typed builder of a [`ProducerConfig`].
#[derive(Debug, Clone)]
pub struct ProducerConfigBuilder {
    config: ProducerConfig,
}

impl ProducerConfigBuilder {
    /// `bootstrap.servers` as a comma-separated list.
    pub fn bootstrap_servers(mut self, servers: impl AsRef<str>) -> Self {
        self.config.bootstrap_servers = split_hosts(servers.as_ref());
        self
    }

    /// `client.id`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.config.connection.client_id = id.into();
        self
    }

    /// `acks`.
    pub fn acks(mut self, acks: Acks) -> Self {
        self.config.acks = acks;
        self
    }

    /// `linger.ms`.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.config.linger = linger;
        self
    }

    /// `batch.size` in bytes.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.config.batch_size = bytes;
        self
    }

    /// `compression.type`.
    pub fn compression(mut self, c: Compression) -> Self {
        self.config.compression = c;
        self
    }

    /// `enable.idempotence`.
    pub fn enable_idempotence(mut self, on: bool) -> Self {
        self.config.enable_idempotence = on;
        self
    }

    /// `transactional.id` (turns idempotence on).
    pub fn transactional_id(mut self, id: impl Into<String>) -> Self {
        self.config.transactional_id = Some(id.into());
        self.config.enable_idempotence = true;
        self
    }

    /// `transaction.timeout.ms`.
    pub fn transaction_timeout(mut self, t: Duration) -> Self {
        self.config.transaction_timeout = t;
        self
    }

    /// `request.timeout.ms`.
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.config.connection.request_timeout = t;
        self
    }

    /// `delivery.timeout.ms`.
    pub fn delivery_timeout(mut self, t: Duration) -> Self {
        self.config.delivery_timeout = t;
        self
    }

    /// `max.block.ms`.
    pub fn max_block(mut self, t: Duration) -> Self {
        self.config.max_block = t;
        self
    }

    /// `buffer.memory` in bytes.
    pub fn buffer_memory(mut self, bytes: u64) -> Self {
        self.config.buffer_memory = bytes;
        self
    }

    /// `max.request.size` in bytes.
    pub fn max_request_size(mut self, bytes: u64) -> Self {
        self.config.max_request_size = bytes;
        self
    }

    /// `retries`.
    pub fn retries(mut self, n: u32) -> Self {
        self.config.retries = n;
        self
    }

    /// `retry.backoff.ms` / `retry.backoff.max.ms`.
    pub fn retry_backoff(mut self, b: BackoffConfig) -> Self {
        self.config.retry_backoff = b;
        self
    }

    /// `security.protocol` with its TLS and SASL settings.
    pub fn security(mut self, security: SecuritySettings) -> Self {
        self.config.connection.security = security;
        self
    }

    /// `partitioner.ignore.keys`.
    pub fn partitioner_ignore_keys(mut self, on: bool) -> Self {
        self.config.partitioner_ignore_keys = on;
        self
    }

    /// The config, checked as [`ProducerConfig::from_client_config`] checks it.
    pub fn build(self) -> Result<ProducerConfig, ConfigError> {
        let c = self.config;
        if c.bootstrap_servers.is_empty() {
            return Err(ConfigError::new(
                "bootstrap.servers",
                "bootstrap.servers: must be set",
            ));
        }
        if c.enable_idempotence && c.acks != Acks::All {
            return Err(ConfigError::new(
                "acks",
                "acks: must be all (-1) when enable.idempotence=true",
            ));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod settings_tests {
    use super::*;

    #[test]
    fn unknown_and_invalid_settings_are_named() {
        let e = ClientConfig::from_properties([("lingr.ms", "5")]).unwrap_err();
        assert_eq!(e.to_string(), "unknown setting 'lingr.ms'");
        assert_eq!(e.setting, "lingr.ms");
        let e = ClientConfig::from_properties([("linger.ms", "x")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "linger.ms: expected a non-negative integer, got \"x\""
        );
        let e = ClientConfig::from_properties([("linger.ms", "-1")]).unwrap_err();
        assert_eq!(e.setting, "linger.ms");
        let e = ClientConfig::from_properties([("acks", "2")]).unwrap_err();
        assert!(e.to_string().starts_with("acks: expected one of"), "{e}");
        let e = ClientConfig::from_properties([("bootstrap.servers", "localhost")]).unwrap_err();
        assert_eq!(e.setting, "bootstrap.servers");
        let e = ClientConfig::from_properties([("enable.idempotence", "yes")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "enable.idempotence: expected true or false, got \"yes\""
        );
        let e = ClientConfig::from_properties([("max.poll.records", "0")]).unwrap_err();
        assert_eq!(e.setting, "max.poll.records");
        let e = ClientConfig::from_properties([("buffer.memory", "-1")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "buffer.memory: expected an integer >= 0, got \"-1\""
        );
        let e = ClientConfig::from_properties([("buffer.memory", "32MB")]).unwrap_err();
        assert_eq!(e.setting, "buffer.memory");
        let e = ClientConfig::from_properties([("max.block.ms", "-5")]).unwrap_err();
        assert_eq!(e.setting, "max.block.ms");
    }

    #[test]
    fn buffer_memory_and_max_block_defaults_are_javas() {
        let p = ProducerConfig::default();
        assert_eq!(p.buffer_memory, 32 * 1024 * 1024);
        assert_eq!(p.max_block, Duration::from_secs(60));
        // A long, as in Java: more than 2 GiB is accepted.
        let p = ProducerConfig::from_properties([
            ("buffer.memory", "8589934592"),
            ("max.block.ms", "0"),
        ])
        .unwrap();
        assert_eq!(p.buffer_memory, 8 << 30);
        assert_eq!(p.max_block, Duration::ZERO);
        let built = ProducerConfig::builder()
            .bootstrap_servers("h:1")
            .buffer_memory(1 << 20)
            .build()
            .unwrap();
        let parsed = ProducerConfig::from_properties([
            ("bootstrap.servers", "h:1"),
            ("buffer.memory", "1048576"),
        ])
        .unwrap();
        assert_eq!(built, parsed);
    }

    #[test]
    fn properties_to_producer_config() {
        let text = "# app\nbootstrap.servers=a:9092, b:9093\nclient.id=app-1\nlinger.ms=20\n\
                    transactional.id=tx-1\ntransaction.timeout.ms=10000\ncompression.type=lz4\n\
                    group.id=g\nmax.poll.records=10\n";
        let c = ClientConfig::parse_properties(text).unwrap();
        let p = ProducerConfig::from_client_config(&c).unwrap();
        assert_eq!(p.bootstrap_servers, vec!["a:9092", "b:9093"]);
        assert_eq!(p.connection.client_id, "app-1");
        assert_eq!(p.linger, Duration::from_millis(20));
        assert_eq!(p.transactional_id.as_deref(), Some("tx-1"));
        assert_eq!(p.transaction_timeout, Duration::from_secs(10));
        assert_eq!(p.compression, Compression::Lz4);
        assert!(p.enable_idempotence);
        assert_eq!(c.get_i64("max.poll.records"), Some(10));
        assert_eq!(c.get("group.id"), Some("g"));
    }

    #[test]
    fn contradictory_settings_are_errors() {
        let e = ProducerConfig::from_properties([("acks", "1"), ("enable.idempotence", "true")])
            .unwrap_err();
        assert_eq!(e.setting, "acks");
        // acks=1 without an explicit idempotence setting turns it off.
        assert!(
            !ProducerConfig::from_properties([("acks", "1")])
                .unwrap()
                .enable_idempotence
        );
        let e = ProducerConfig::from_properties([
            ("transactional.id", "t"),
            ("enable.idempotence", "false"),
        ])
        .unwrap_err();
        assert_eq!(e.setting, "enable.idempotence");
    }

    #[test]
    fn builder_matches_properties() {
        let built = ProducerConfig::builder()
            .bootstrap_servers("h:1")
            .client_id("c")
            .linger(Duration::from_millis(7))
            .transactional_id("t")
            .build()
            .unwrap();
        let parsed = ProducerConfig::from_properties([
            ("bootstrap.servers", "h:1"),
            ("client.id", "c"),
            ("linger.ms", "7"),
            ("transactional.id", "t"),
        ])
        .unwrap();
        assert_eq!(built, parsed);
        assert_eq!(
            ProducerConfig::builder().build().unwrap_err().setting,
            "bootstrap.servers"
        );
    }
}
