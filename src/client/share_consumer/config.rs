//! [`ShareConsumerConfig`]: the share consumer's settings under Kafka's
//! names, with Kafka's defaults, and a typed builder.

use std::time::Duration;

use crate::client::config::{ConnectionConfig, setting_def};
use crate::client::security::{SecurityProperties, is_security_setting};
pub use crate::protocol::share::AcquireMode;

/// `share.acknowledgement.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AcknowledgementMode {
    /// `implicit` (Kafka's default): every record a poll returned is
    /// accepted at the next poll (or by `commit_sync`/`commit_async`);
    /// calling `acknowledge` is an error.
    #[default]
    Implicit,
    /// `explicit`: every record a poll returned must be acknowledged before
    /// the next poll, or that poll fails (as Kafka's Java consumer throws
    /// IllegalStateException). Required for transactions (D12).
    Explicit,
}

impl AcknowledgementMode {
    /// From Kafka's config value (`implicit` or `explicit`, any case).
    pub fn parse(value: &str) -> Option<Self> {
        match value.to_ascii_lowercase().as_str() {
            "implicit" => Some(Self::Implicit),
            "explicit" => Some(Self::Explicit),
            _ => None,
        }
    }

    /// Kafka's config value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Implicit => "implicit",
            Self::Explicit => "explicit",
        }
    }
}

/// Settings of a share consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareConsumerConfig {
    /// `group.id`: the share group (required).
    pub group_id: String,
    /// `client.id` (default `"sharestream"`).
    pub client_id: String,
    /// The member id this consumer joins with. `None` (the default): a
    /// fresh UUID, as Kafka's clients do. A stable one (the runtime derives
    /// it from `application.instance.id`) lets a restarted process take
    /// over its dead predecessor's membership at once: its join at epoch 0
    /// replaces the old member, whose acquired records are released,
    /// instead of waiting for that member's session to time out.
    pub member_id: Option<String>,
    /// `bootstrap.servers`: `host:port` of brokers to ask for metadata.
    pub bootstrap_servers: Vec<String>,
    /// `max.poll.records` (default 500): the most records one poll returns;
    /// also sent as ShareFetch MaxRecords.
    pub max_poll_records: usize,
    /// `share.acknowledgement.mode` (default implicit).
    pub acknowledgement_mode: AcknowledgementMode,
    /// `share.acquire.mode` (default `batch_optimized`, as Kafka's): with
    /// `record_limit` (KIP-1206, ShareFetch v2, Kafka 4.2+) the broker
    /// acquires at most `max.poll.records` records per fetch, splitting
    /// batches, so that many members of one partition share its records
    /// evenly; with `batch_optimized` it hands out whole batches.
    pub acquire_mode: AcquireMode,
    /// `fetch.max.wait.ms` (default 500 ms): how long a broker may hold a
    /// ShareFetch that has not reached `fetch.min.bytes`.
    pub fetch_max_wait: Duration,
    /// `fetch.min.bytes` (default 1).
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes` (default 52428800): the most a ShareFetch to one
    /// leader asks for.
    pub fetch_max_bytes: i32,
    /// `max.partition.fetch.bytes` (default 1048576): a ShareFetch asks
    /// for at most this much per partition it fetches from (ShareFetch v1+
    /// has no per-partition limit, so it bounds the request's MaxBytes;
    /// D38).
    pub max_partition_fetch_bytes: i32,
    /// `default.api.timeout.ms` (default 60 s): bound of `commit_sync` and
    /// `close` when no timeout is given.
    pub default_api_timeout: Duration,
    /// `request.timeout.ms` (default 30 s).
    pub request_timeout: Duration,
    /// The connection settings the consumer's connections are opened with;
    /// `client.id` and `request.timeout.ms` above are copied into it.
    pub connection: ConnectionConfig,
    /// Security settings given by name through [`ShareConsumerConfig::set`]
    /// (`security.protocol`, `ssl.*`, `sasl.*`); [`validate`](Self::validate)
    /// turns them into `connection.security`.
    pub security_properties: SecurityProperties,
}

impl Default for ShareConsumerConfig {
    fn default() -> Self {
        Self {
            group_id: String::new(),
            client_id: "sharestream".to_string(),
            member_id: None,
            bootstrap_servers: Vec::new(),
            max_poll_records: 500,
            acknowledgement_mode: AcknowledgementMode::Implicit,
            acquire_mode: AcquireMode::BatchOptimized,
            fetch_max_wait: Duration::from_millis(500),
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            max_partition_fetch_bytes: 1_048_576,
            default_api_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            connection: ConnectionConfig::default(),
            security_properties: SecurityProperties::default(),
        }
    }
}

/// A problem with a setting: the same type as the client's
/// `client::ConfigError`, defined once in the protocol crate.
pub use crate::protocol::ConfigError;

/// `invalid value "<value>" for configuration <name>: <reason>`.
fn refused(name: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::new(
        name,
        format!("invalid value {value:?} for configuration {name}: {reason}"),
    )
}

impl ShareConsumerConfig {
    /// A builder for the share group `group_id`.
    pub fn builder(group_id: impl Into<String>) -> ShareConsumerConfigBuilder {
        ShareConsumerConfigBuilder {
            config: ShareConsumerConfig {
                group_id: group_id.into(),
                ..Default::default()
            },
        }
    }

    /// Sets one setting by Kafka's name from its string form (e.g. from a
    /// properties file). Unknown names are refused.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let bad = |name: &'static str, reason: &'static str| refused(name, value, reason);
        let ms = |name: &'static str| {
            value
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad(name, "not a number of milliseconds"))
        };
        let int = |name: &'static str| {
            value
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| bad(name, "not a non-negative 32-bit integer"))
        };
        if let Some(def) = setting_def(name).filter(|_| is_security_setting(name)) {
            // Checked together (they depend on each other) by `validate`.
            self.security_properties.insert(def.name, value);
            if let Ok(s) = self.security_properties.settings() {
                self.connection.security = s;
            }
            return Ok(());
        }
        match name {
            "group.id" => self.group_id = value.to_string(),
            "client.id" => self.client_id = value.to_string(),
            "bootstrap.servers" => {
                self.bootstrap_servers = value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            "max.poll.records" => {
                self.max_poll_records = value
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|v| *v >= 1 && *v <= i32::MAX as usize)
                    .ok_or_else(|| bad("max.poll.records", "must be at least 1"))?
            }
            "share.acknowledgement.mode" => {
                self.acknowledgement_mode = AcknowledgementMode::parse(value).ok_or_else(|| {
                    bad("share.acknowledgement.mode", "must be implicit or explicit")
                })?
            }
            "share.acquire.mode" => {
                self.acquire_mode = match value.trim().to_ascii_lowercase().as_str() {
                    "batch_optimized" => AcquireMode::BatchOptimized,
                    "record_limit" => AcquireMode::RecordLimit,
                    _ => {
                        return Err(bad(
                            "share.acquire.mode",
                            "must be batch_optimized or record_limit",
                        ));
                    }
                }
            }
            "fetch.max.wait.ms" => self.fetch_max_wait = ms("fetch.max.wait.ms")?,
            "fetch.min.bytes" => self.fetch_min_bytes = int("fetch.min.bytes")?,
            "fetch.max.bytes" => self.fetch_max_bytes = int("fetch.max.bytes")?,
            "max.partition.fetch.bytes" => {
                self.max_partition_fetch_bytes = int("max.partition.fetch.bytes")?
            }
            "default.api.timeout.ms" => self.default_api_timeout = ms("default.api.timeout.ms")?,
            "request.timeout.ms" => self.request_timeout = ms("request.timeout.ms")?,
            _ => {
                return Err(ConfigError::new(
                    name,
                    format!("unknown setting '{name}': not a share consumer configuration"),
                ));
            }
        }
        Ok(())
    }

    /// Checks the settings that have no usable default, and the security
    /// settings given by name.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.security_properties.is_empty() {
            let given = self.security_properties.settings().map_err(|e| {
                let name = setting_def(&e.setting).map_or("security.protocol", |d| d.name);
                refused(name, &e.message, "invalid security settings")
            })?;
            if given != self.connection.security {
                return Err(refused(
                    "security.protocol",
                    "",
                    "security settings given both by name and in `connection`",
                ));
            }
        }
        if self.group_id.is_empty() {
            return Err(refused("group.id", "", "a share consumer needs a group id"));
        }
        if self.max_poll_records == 0 {
            return Err(refused("max.poll.records", "0", "must be at least 1"));
        }
        Ok(())
    }

    /// The connection settings with `client.id` and `request.timeout.ms`
    /// applied.
    pub fn connection_config(&self) -> ConnectionConfig {
        self.connection
            .clone()
            .with_client_id(self.client_id.clone())
            .with_request_timeout(self.request_timeout)
    }
}

/// Builds a [`ShareConsumerConfig`]; the group id is given up front, every
/// other setting has Kafka's default.
#[derive(Debug, Clone)]
pub struct ShareConsumerConfigBuilder {
    config: ShareConsumerConfig,
}

impl ShareConsumerConfigBuilder {
    /// `client.id`.
    pub fn client_id(mut self, v: impl Into<String>) -> Self {
        self.config.client_id = v.into();
        self
    }

    /// See [`ShareConsumerConfig::member_id`].
    pub fn member_id(mut self, v: impl Into<String>) -> Self {
        self.config.member_id = Some(v.into());
        self
    }
    /// `bootstrap.servers`.
    pub fn bootstrap_servers<S: Into<String>>(mut self, v: impl IntoIterator<Item = S>) -> Self {
        self.config.bootstrap_servers = v.into_iter().map(Into::into).collect();
        self
    }
    /// `max.poll.records`.
    pub fn max_poll_records(mut self, v: usize) -> Self {
        self.config.max_poll_records = v;
        self
    }
    /// `share.acknowledgement.mode`.
    pub fn acknowledgement_mode(mut self, v: AcknowledgementMode) -> Self {
        self.config.acknowledgement_mode = v;
        self
    }
    /// `fetch.max.wait.ms`.
    pub fn fetch_max_wait(mut self, v: Duration) -> Self {
        self.config.fetch_max_wait = v;
        self
    }
    /// `fetch.min.bytes`.
    pub fn fetch_min_bytes(mut self, v: i32) -> Self {
        self.config.fetch_min_bytes = v;
        self
    }
    /// `fetch.max.bytes`.
    pub fn fetch_max_bytes(mut self, v: i32) -> Self {
        self.config.fetch_max_bytes = v;
        self
    }
    /// `share.acquire.mode`.
    pub fn acquire_mode(mut self, v: AcquireMode) -> Self {
        self.config.acquire_mode = v;
        self
    }

    /// `max.partition.fetch.bytes`.
    pub fn max_partition_fetch_bytes(mut self, v: i32) -> Self {
        self.config.max_partition_fetch_bytes = v;
        self
    }
    /// `default.api.timeout.ms`.
    pub fn default_api_timeout(mut self, v: Duration) -> Self {
        self.config.default_api_timeout = v;
        self
    }
    /// `request.timeout.ms`.
    pub fn request_timeout(mut self, v: Duration) -> Self {
        self.config.request_timeout = v;
        self
    }
    /// Connection settings (backoff, frame size, ...).
    pub fn connection(mut self, v: ConnectionConfig) -> Self {
        self.config.connection = v;
        self
    }
    /// The validated configuration.
    pub fn build(self) -> Result<ShareConsumerConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas() {
        let c = ShareConsumerConfig::builder("g").build().unwrap();
        assert_eq!(c.max_poll_records, 500);
        assert_eq!(c.acknowledgement_mode, AcknowledgementMode::Implicit);
        assert_eq!(c.fetch_max_wait, Duration::from_millis(500));
        assert_eq!(c.fetch_min_bytes, 1);
        assert_eq!(c.fetch_max_bytes, 52_428_800);
        assert_eq!(c.max_partition_fetch_bytes, 1_048_576);
        assert_eq!(c.default_api_timeout, Duration::from_secs(60));
        assert_eq!(c.request_timeout, Duration::from_secs(30));
    }

    #[test]
    fn set_by_kafka_names() {
        let mut c = ShareConsumerConfig::default();
        c.set("group.id", "orders").unwrap();
        c.set("bootstrap.servers", "a:9092, b:9092").unwrap();
        c.set("share.acknowledgement.mode", "EXPLICIT").unwrap();
        c.set("max.poll.records", "10").unwrap();
        c.set("fetch.max.wait.ms", "250").unwrap();
        c.set("request.timeout.ms", "1000").unwrap();
        assert_eq!(c.bootstrap_servers, ["a:9092", "b:9092"]);
        assert_eq!(c.acknowledgement_mode, AcknowledgementMode::Explicit);
        assert_eq!(c.max_poll_records, 10);
        assert_eq!(
            c.connection_config().request_timeout,
            Duration::from_secs(1)
        );
        assert!(c.set("max.poll.records", "0").is_err());
        assert!(c.set("share.acknowledgement.mode", "sometimes").is_err());
        assert_eq!(c.acquire_mode, AcquireMode::BatchOptimized);
        c.set("share.acquire.mode", "record_limit").unwrap();
        assert_eq!(c.acquire_mode, AcquireMode::RecordLimit);
        let e = c.set("share.acquire.mode", "some").unwrap_err();
        assert_eq!(e.setting, "share.acquire.mode");
        assert!(c.set("no.such.config", "1").is_err());
        assert!(ShareConsumerConfig::builder("").build().is_err());
    }
}
