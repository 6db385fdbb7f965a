//! Share group configuration: broker-wide defaults and bounds, and the
//! per-group overrides set through IncrementalAlterConfigs on the GROUP
//! resource.
//!
//! Names, defaults and bounds are Kafka 4.4's (`GroupCoordinatorConfig`,
//! `ShareGroupConfig` and `GroupConfig`; KIP-1240 added the per-group
//! delivery count limit, record locks and renew switch):
//!
//! | group config | broker default | group bounds (broker settings) |
//! |---|---|---|
//! | `consumer.session.timeout.ms` | `group.consumer.session.timeout.ms` 45000 | `group.consumer.{min,max}.session.timeout.ms` 45000..=60000 |
//! | `consumer.heartbeat.interval.ms` | `group.consumer.heartbeat.interval.ms` 5000 | `group.consumer.{min,max}.heartbeat.interval.ms` 5000..=15000 |
//! | `share.session.timeout.ms` | `group.share.session.timeout.ms` 45000 | `group.share.{min,max}.session.timeout.ms` 45000..=60000 |
//! | `share.heartbeat.interval.ms` | `group.share.heartbeat.interval.ms` 5000 | `group.share.{min,max}.heartbeat.interval.ms` 5000..=15000 |
//! | `share.record.lock.duration.ms` | `group.share.record.lock.duration.ms` 30000 | `group.share.{min,max}.record.lock.duration.ms` 15000..=60000 |
//! | `share.delivery.count.limit` | `group.share.delivery.count.limit` 5 | `group.share.{min,max}.delivery.count.limit` 2..=10 |
//! | `share.partition.max.record.locks` | `group.share.partition.max.record.locks` 2000 | `group.share.{min,max}.partition.max.record.locks` 100..=4000 |
//! | `share.renew.acknowledge.enable` | `true` | `true`, `false` |
//! | `share.auto.offset.reset` | `latest` | `latest`, `earliest` |
//! | `share.isolation.level` | `read_uncommitted` | `read_uncommitted`, `read_committed` |
//! | `errors.deadletterqueue.topic.name` | empty (no queue) | any name not starting with `__` |
//! | `errors.deadletterqueue.copy.record.enable` | `false` | `true`, `false` |
//! | `streams.session.timeout.ms` | `group.streams.session.timeout.ms` 45000 | `group.streams.{min,max}.session.timeout.ms` 45000..=60000 |
//! | `streams.heartbeat.interval.ms` | `group.streams.heartbeat.interval.ms` 5000 | `group.streams.{min,max}.heartbeat.interval.ms` 5000..=15000 |
//! | `streams.num.standby.replicas` | `group.streams.num.standby.replicas` 0 | 0..=`group.streams.max.standby.replicas` 2 |
//!
//! and each session timeout must stay greater than its heartbeat interval.
//! The two `consumer.*` configs belong to consumer-protocol groups (KIP-848):
//! the consumer-protocol coordinator reads them at every heartbeat (the
//! interval it answers with, the session it gives the member).
//! The dead-letter queue's broker settings (KIP-1191) are
//! `errors.deadletterqueue.auto.create.topics.enable` (false) and
//! `errors.deadletterqueue.topic.name.prefix` (`dlq.`), set like the others
//! (and, as in Kafka, as dynamic broker configs, docs/DESIGN.md D24).
//! The broker settings themselves have static ranges (Kafka's `ConfigDef`
//! validators), checked by [`ShareGroupBrokerConfig::validate`], and are set
//! by their Kafka names through [`ShareGroupBrokerConfig::set`] (the
//! `sharestream broker --override NAME=VALUE` flag).
//!
//! Like Kafka, a group may be configured before it exists: configs live
//! apart from membership. Invalid values are refused with `INVALID_CONFIG`
//! and a message naming the setting, as Kafka's `GroupConfig.validate` does
//! (an integer outside the broker's bounds: "`NAME` must be in the range
//! `MIN` to `MAX` inclusive."). A value stored earlier that the broker's
//! bounds no longer admit (they changed at a restart) is clamped into them
//! when used, as Kafka's `GroupConfig.evaluate` does.
//!
//! Not supported: Kafka 4.2's `by_duration:<ISO-8601>` form of
//! `share.auto.offset.reset`, the `*.assignment.interval.ms` configs (our
//! assignors run within the heartbeat that needs them), and the streams
//! group configs other than the three above (warm-up replicas, the initial
//! rebalance delay, rack-aware tags, the assignor's name and offload, task
//! offset intervals, acceptable recovery lag: docs/DESIGN.md D56).

use std::collections::BTreeMap;

/// `consumer.session.timeout.ms` (KIP-848 groups).
pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
/// `consumer.heartbeat.interval.ms` (KIP-848 groups).
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
/// `share.session.timeout.ms`.
pub const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
/// `streams.session.timeout.ms` (KIP-1071 groups).
pub const STREAMS_SESSION_TIMEOUT_MS: &str = "streams.session.timeout.ms";
/// `streams.heartbeat.interval.ms` (KIP-1071 groups).
pub const STREAMS_HEARTBEAT_INTERVAL_MS: &str = "streams.heartbeat.interval.ms";
/// `streams.num.standby.replicas` (KIP-1071 groups): standby tasks per
/// active task.
pub const STREAMS_NUM_STANDBY_REPLICAS: &str = "streams.num.standby.replicas";
/// `share.heartbeat.interval.ms`.
pub const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
/// `share.record.lock.duration.ms`.
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
/// `share.delivery.count.limit`.
pub const SHARE_DELIVERY_COUNT_LIMIT: &str = "share.delivery.count.limit";
/// `share.auto.offset.reset`.
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
/// `share.isolation.level`.
pub const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";
/// `share.partition.max.record.locks` (KIP-1240).
pub const SHARE_PARTITION_MAX_RECORD_LOCKS: &str = "share.partition.max.record.locks";
/// `share.renew.acknowledge.enable` (KIP-1222, KIP-1240).
pub const SHARE_RENEW_ACKNOWLEDGE_ENABLE: &str = "share.renew.acknowledge.enable";

/// `group.share.transaction.abort.record.state` (ours, docs/DESIGN.md D25):
/// where the records of a share partition staged in a transaction go when
/// the producer aborts it.
pub const TRANSACTION_ABORT_RECORD_STATE: &str = "group.share.transaction.abort.record.state";

/// The state records staged in a transaction (KIP-1289) take when the
/// producer aborts the transaction (EndTxn abort); D25. Aborts the
/// coordinator imposes (fence, transaction timeout) always make them
/// AVAILABLE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AbortedRecordState {
    /// AVAILABLE (ARCHIVED at the delivery count limit): fetched again by
    /// any member, as the KIP author's branch does. The default.
    #[default]
    Available,
    /// ACQUIRED again by the member that staged them, with a fresh lock and
    /// the delivery count unchanged, while it is in the group (the KIP's
    /// javadoc, D6); AVAILABLE otherwise.
    Acquired,
}

impl AbortedRecordState {
    /// The setting's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AbortedRecordState::Available => "available",
            AbortedRecordState::Acquired => "acquired",
        }
    }
}

impl std::str::FromStr for AbortedRecordState {
    type Err = String;
    fn from_str(v: &str) -> Result<Self, String> {
        match v.trim().to_ascii_lowercase().as_str() {
            "available" => Ok(AbortedRecordState::Available),
            "acquired" => Ok(AbortedRecordState::Acquired),
            _ => Err(format!(
                "Invalid value {v} for configuration {TRANSACTION_ABORT_RECORD_STATE}: \
                 String must be one of: available, acquired"
            )),
        }
    }
}

/// `errors.deadletterqueue.topic.name` (KIP-1191): the group's dead-letter
/// topic; empty (the default) for none.
pub const ERRORS_DLQ_TOPIC_NAME: &str = "errors.deadletterqueue.topic.name";
/// `errors.deadletterqueue.copy.record.enable` (KIP-1191): whether a
/// dead-letter record carries the key and value of the record.
pub const ERRORS_DLQ_COPY_RECORD_ENABLE: &str = "errors.deadletterqueue.copy.record.enable";
/// Broker setting `errors.deadletterqueue.auto.create.topics.enable`.
pub const ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE: &str =
    "errors.deadletterqueue.auto.create.topics.enable";
/// Broker setting `errors.deadletterqueue.topic.name.prefix`.
pub const ERRORS_DLQ_TOPIC_NAME_PREFIX: &str = "errors.deadletterqueue.topic.name.prefix";

/// Every group-level config this broker understands, in the order
/// [`ShareGroupCoordinator::describe_config`](super::ShareGroupCoordinator::describe_config)
/// lists them.
pub const GROUP_CONFIG_NAMES: &[&str] = &[
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    ERRORS_DLQ_COPY_RECORD_ENABLE,
    ERRORS_DLQ_TOPIC_NAME,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_ISOLATION_LEVEL,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    SHARE_RECORD_LOCK_DURATION_MS,
    SHARE_RENEW_ACKNOWLEDGE_ENABLE,
    SHARE_SESSION_TIMEOUT_MS,
    STREAMS_HEARTBEAT_INTERVAL_MS,
    STREAMS_NUM_STANDBY_REPLICAS,
    STREAMS_SESSION_TIMEOUT_MS,
];

/// Where a share-partition start offset begins when a group first reads a
/// partition (`share.auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    /// At the log end offset (Kafka's default).
    #[default]
    Latest,
    /// At the log start offset.
    Earliest,
}

impl AutoOffsetReset {
    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AutoOffsetReset::Latest => "latest",
            AutoOffsetReset::Earliest => "earliest",
        }
    }
}

/// `share.isolation.level`, defined once in the protocol crate.
pub use sharestream_protocol::share::IsolationLevel;

/// Broker-level share group settings: the defaults of the group configs and
/// the bounds a group override must respect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupBrokerConfig {
    /// `group.consumer.session.timeout.ms` (consumer-protocol groups).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.min.session.timeout.ms`.
    pub consumer_min_session_timeout_ms: i32,
    /// `group.consumer.max.session.timeout.ms`.
    pub consumer_max_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`.
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.min.heartbeat.interval.ms`.
    pub consumer_min_heartbeat_interval_ms: i32,
    /// `group.consumer.max.heartbeat.interval.ms`.
    pub consumer_max_heartbeat_interval_ms: i32,
    /// `group.streams.session.timeout.ms` (KIP-1071 groups).
    pub streams_session_timeout_ms: i32,
    /// `group.streams.min.session.timeout.ms`.
    pub streams_min_session_timeout_ms: i32,
    /// `group.streams.max.session.timeout.ms`.
    pub streams_max_session_timeout_ms: i32,
    /// `group.streams.heartbeat.interval.ms`.
    pub streams_heartbeat_interval_ms: i32,
    /// `group.streams.min.heartbeat.interval.ms`.
    pub streams_min_heartbeat_interval_ms: i32,
    /// `group.streams.max.heartbeat.interval.ms`.
    pub streams_max_heartbeat_interval_ms: i32,
    /// `group.streams.num.standby.replicas`.
    pub streams_num_standby_replicas: i32,
    /// `group.streams.max.standby.replicas`.
    pub streams_max_standby_replicas: i32,
    /// `group.share.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `group.share.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.share.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.share.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.share.min.heartbeat.interval.ms`.
    pub min_heartbeat_interval_ms: i32,
    /// `group.share.max.heartbeat.interval.ms`.
    pub max_heartbeat_interval_ms: i32,
    /// `group.share.record.lock.duration.ms`.
    pub record_lock_duration_ms: i32,
    /// `group.share.min.record.lock.duration.ms`.
    pub min_record_lock_duration_ms: i32,
    /// `group.share.max.record.lock.duration.ms`.
    pub max_record_lock_duration_ms: i32,
    /// `group.share.delivery.count.limit`.
    pub delivery_count_limit: i32,
    /// `group.share.min.delivery.count.limit`.
    pub min_delivery_count_limit: i32,
    /// `group.share.max.delivery.count.limit`.
    pub max_delivery_count_limit: i32,
    /// `group.share.partition.max.record.locks`: in-flight records per share
    /// partition.
    pub partition_max_record_locks: i32,
    /// `group.share.min.partition.max.record.locks`.
    pub min_partition_max_record_locks: i32,
    /// `group.share.max.partition.max.record.locks`.
    pub max_partition_max_record_locks: i32,
    /// `group.share.max.size`: members per share group.
    pub max_size: usize,
    /// `group.share.max.share.sessions`: share sessions per broker
    /// (SHARE_SESSION_LIMIT_REACHED beyond).
    pub max_share_sessions: i32,
    /// `group.share.transaction.abort.record.state` (ours, D25).
    pub transaction_abort_record_state: AbortedRecordState,
    /// `errors.deadletterqueue.auto.create.topics.enable` (KIP-1191): a
    /// group's dead-letter topic that does not exist is created when its
    /// first dead letter is written.
    pub dlq_auto_create_topics_enable: bool,
    /// `errors.deadletterqueue.topic.name.prefix` (KIP-1191): the prefix a
    /// dead-letter topic's name must have; empty for no rule.
    pub dlq_topic_name_prefix: String,
}

impl Default for ShareGroupBrokerConfig {
    fn default() -> Self {
        Self {
            consumer_session_timeout_ms: 45_000,
            consumer_min_session_timeout_ms: 45_000,
            consumer_max_session_timeout_ms: 60_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_min_heartbeat_interval_ms: 5_000,
            consumer_max_heartbeat_interval_ms: 15_000,
            streams_session_timeout_ms: 45_000,
            streams_min_session_timeout_ms: 45_000,
            streams_max_session_timeout_ms: 60_000,
            streams_heartbeat_interval_ms: 5_000,
            streams_min_heartbeat_interval_ms: 5_000,
            streams_max_heartbeat_interval_ms: 15_000,
            streams_num_standby_replicas: 0,
            streams_max_standby_replicas: 2,
            session_timeout_ms: 45_000,
            min_session_timeout_ms: 45_000,
            max_session_timeout_ms: 60_000,
            heartbeat_interval_ms: 5_000,
            min_heartbeat_interval_ms: 5_000,
            max_heartbeat_interval_ms: 15_000,
            record_lock_duration_ms: 30_000,
            min_record_lock_duration_ms: 15_000,
            max_record_lock_duration_ms: 60_000,
            delivery_count_limit: 5,
            min_delivery_count_limit: 2,
            max_delivery_count_limit: 10,
            partition_max_record_locks: 2_000,
            min_partition_max_record_locks: 100,
            max_partition_max_record_locks: 4_000,
            max_size: 200,
            max_share_sessions: 2_000,
            transaction_abort_record_state: AbortedRecordState::Available,
            dlq_auto_create_topics_enable: false,
            dlq_topic_name_prefix: "dlq.".to_string(),
        }
    }
}

impl ShareGroupBrokerConfig {
    /// The broker settings under their Kafka names, for DescribeConfigs on
    /// the BROKER resource.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE,
                self.dlq_auto_create_topics_enable.to_string(),
            ),
            (
                ERRORS_DLQ_TOPIC_NAME_PREFIX,
                self.dlq_topic_name_prefix.clone(),
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                self.consumer_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.consumer.max.heartbeat.interval.ms",
                self.consumer_max_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.consumer.max.session.timeout.ms",
                self.consumer_max_session_timeout_ms.to_string(),
            ),
            (
                "group.consumer.min.heartbeat.interval.ms",
                self.consumer_min_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.consumer.min.session.timeout.ms",
                self.consumer_min_session_timeout_ms.to_string(),
            ),
            (
                "group.consumer.session.timeout.ms",
                self.consumer_session_timeout_ms.to_string(),
            ),
            (
                "group.share.delivery.count.limit",
                self.delivery_count_limit.to_string(),
            ),
            (
                "group.share.heartbeat.interval.ms",
                self.heartbeat_interval_ms.to_string(),
            ),
            (
                "group.share.max.delivery.count.limit",
                self.max_delivery_count_limit.to_string(),
            ),
            (
                "group.share.max.heartbeat.interval.ms",
                self.max_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.share.max.partition.max.record.locks",
                self.max_partition_max_record_locks.to_string(),
            ),
            (
                "group.share.max.record.lock.duration.ms",
                self.max_record_lock_duration_ms.to_string(),
            ),
            (
                "group.share.max.session.timeout.ms",
                self.max_session_timeout_ms.to_string(),
            ),
            (
                "group.share.max.share.sessions",
                self.max_share_sessions.to_string(),
            ),
            ("group.share.max.size", self.max_size.to_string()),
            (
                "group.share.min.delivery.count.limit",
                self.min_delivery_count_limit.to_string(),
            ),
            (
                "group.share.min.heartbeat.interval.ms",
                self.min_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.share.min.partition.max.record.locks",
                self.min_partition_max_record_locks.to_string(),
            ),
            (
                "group.share.min.record.lock.duration.ms",
                self.min_record_lock_duration_ms.to_string(),
            ),
            (
                "group.share.min.session.timeout.ms",
                self.min_session_timeout_ms.to_string(),
            ),
            (
                "group.share.partition.max.record.locks",
                self.partition_max_record_locks.to_string(),
            ),
            (
                "group.share.record.lock.duration.ms",
                self.record_lock_duration_ms.to_string(),
            ),
            (
                "group.share.session.timeout.ms",
                self.session_timeout_ms.to_string(),
            ),
            (
                "group.streams.heartbeat.interval.ms",
                self.streams_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.streams.max.heartbeat.interval.ms",
                self.streams_max_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.streams.max.session.timeout.ms",
                self.streams_max_session_timeout_ms.to_string(),
            ),
            (
                "group.streams.max.standby.replicas",
                self.streams_max_standby_replicas.to_string(),
            ),
            (
                "group.streams.min.heartbeat.interval.ms",
                self.streams_min_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.streams.min.session.timeout.ms",
                self.streams_min_session_timeout_ms.to_string(),
            ),
            (
                "group.streams.num.standby.replicas",
                self.streams_num_standby_replicas.to_string(),
            ),
            (
                "group.streams.session.timeout.ms",
                self.streams_session_timeout_ms.to_string(),
            ),
            (
                TRANSACTION_ABORT_RECORD_STATE,
                self.transaction_abort_record_state.as_str().to_string(),
            ),
        ]
    }

    /// Sets one setting by its Kafka name (`group.share.*`), e.g.
    /// `set("group.share.min.record.lock.duration.ms", "1000")`. Unknown
    /// names and values that are not integers are refused with a message
    /// naming the setting; ranges and the order of minimum, default and
    /// maximum are checked by [`validate`](Self::validate) once every
    /// setting is in.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let v = value.trim();
        match name {
            TRANSACTION_ABORT_RECORD_STATE => {
                self.transaction_abort_record_state = v.parse()?;
                return Ok(());
            }
            ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE => {
                self.dlq_auto_create_topics_enable = parse_bool(name, value)?;
                return Ok(());
            }
            ERRORS_DLQ_TOPIC_NAME_PREFIX => {
                self.dlq_topic_name_prefix = v.to_string();
                return Ok(());
            }
            _ => {}
        }
        let int = || {
            v.parse::<i32>().map_err(|_| {
                format!("Invalid value {value} for configuration {name}: Not a number of type INT")
            })
        };
        let field: &mut i32 = match name {
            "group.consumer.session.timeout.ms" => &mut self.consumer_session_timeout_ms,
            "group.consumer.min.session.timeout.ms" => &mut self.consumer_min_session_timeout_ms,
            "group.consumer.max.session.timeout.ms" => &mut self.consumer_max_session_timeout_ms,
            "group.consumer.heartbeat.interval.ms" => &mut self.consumer_heartbeat_interval_ms,
            "group.consumer.min.heartbeat.interval.ms" => {
                &mut self.consumer_min_heartbeat_interval_ms
            }
            "group.consumer.max.heartbeat.interval.ms" => {
                &mut self.consumer_max_heartbeat_interval_ms
            }
            "group.streams.session.timeout.ms" => &mut self.streams_session_timeout_ms,
            "group.streams.min.session.timeout.ms" => &mut self.streams_min_session_timeout_ms,
            "group.streams.max.session.timeout.ms" => &mut self.streams_max_session_timeout_ms,
            "group.streams.heartbeat.interval.ms" => &mut self.streams_heartbeat_interval_ms,
            "group.streams.min.heartbeat.interval.ms" => {
                &mut self.streams_min_heartbeat_interval_ms
            }
            "group.streams.max.heartbeat.interval.ms" => {
                &mut self.streams_max_heartbeat_interval_ms
            }
            "group.streams.num.standby.replicas" => &mut self.streams_num_standby_replicas,
            "group.streams.max.standby.replicas" => &mut self.streams_max_standby_replicas,
            "group.share.session.timeout.ms" => &mut self.session_timeout_ms,
            "group.share.min.session.timeout.ms" => &mut self.min_session_timeout_ms,
            "group.share.max.session.timeout.ms" => &mut self.max_session_timeout_ms,
            "group.share.heartbeat.interval.ms" => &mut self.heartbeat_interval_ms,
            "group.share.min.heartbeat.interval.ms" => &mut self.min_heartbeat_interval_ms,
            "group.share.max.heartbeat.interval.ms" => &mut self.max_heartbeat_interval_ms,
            "group.share.record.lock.duration.ms" => &mut self.record_lock_duration_ms,
            "group.share.min.record.lock.duration.ms" => &mut self.min_record_lock_duration_ms,
            "group.share.max.record.lock.duration.ms" => &mut self.max_record_lock_duration_ms,
            "group.share.delivery.count.limit" => &mut self.delivery_count_limit,
            "group.share.min.delivery.count.limit" => &mut self.min_delivery_count_limit,
            "group.share.max.delivery.count.limit" => &mut self.max_delivery_count_limit,
            "group.share.partition.max.record.locks" => &mut self.partition_max_record_locks,
            "group.share.min.partition.max.record.locks" => {
                &mut self.min_partition_max_record_locks
            }
            "group.share.max.partition.max.record.locks" => {
                &mut self.max_partition_max_record_locks
            }
            "group.share.max.share.sessions" => &mut self.max_share_sessions,
            "group.share.max.size" => {
                let n = int()?;
                self.max_size = usize::try_from(n).map_err(|_| {
                    format!(
                        "Invalid value {value} for configuration {name}: Value must be in [1, 1000]"
                    )
                })?;
                return Ok(());
            }
            _ => return Err(format!("Unknown group broker setting: {name}")),
        };
        *field = int()?;
        Ok(())
    }

    /// The broker settings with `overrides` (Kafka name, value) applied in
    /// order, then validated as a whole.
    pub fn with_overrides<'a>(
        mut self,
        overrides: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, String> {
        for (name, value) in overrides {
            self.set(name, value)?;
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks the broker settings against each other and against Kafka's
    /// static ranges (e.g. `group.share.delivery.count.limit` 2..=10).
    pub fn validate(&self) -> Result<(), String> {
        fn range(name: &str, v: i32, lo: i32, hi: i32) -> Result<(), String> {
            if v < lo || v > hi {
                return Err(format!(
                    "Invalid value {v} for configuration {name}: Value must be in [{lo}, {hi}]"
                ));
            }
            Ok(())
        }
        range(
            "group.share.delivery.count.limit",
            self.delivery_count_limit,
            2,
            10,
        )?;
        range(
            "group.share.min.delivery.count.limit",
            self.min_delivery_count_limit,
            2,
            5,
        )?;
        range(
            "group.share.max.delivery.count.limit",
            self.max_delivery_count_limit,
            5,
            25,
        )?;
        range(
            "group.share.record.lock.duration.ms",
            self.record_lock_duration_ms,
            1_000,
            3_600_000,
        )?;
        range(
            "group.share.min.record.lock.duration.ms",
            self.min_record_lock_duration_ms,
            1_000,
            30_000,
        )?;
        range(
            "group.share.max.record.lock.duration.ms",
            self.max_record_lock_duration_ms,
            30_000,
            3_600_000,
        )?;
        range(
            "group.share.partition.max.record.locks",
            self.partition_max_record_locks,
            100,
            10_000,
        )?;
        range(
            "group.share.min.partition.max.record.locks",
            self.min_partition_max_record_locks,
            100,
            2_000,
        )?;
        range(
            "group.share.max.partition.max.record.locks",
            self.max_partition_max_record_locks,
            2_000,
            10_000,
        )?;
        for (name, v) in [
            (
                "group.consumer.session.timeout.ms",
                self.consumer_session_timeout_ms,
            ),
            (
                "group.consumer.min.session.timeout.ms",
                self.consumer_min_session_timeout_ms,
            ),
            (
                "group.consumer.max.session.timeout.ms",
                self.consumer_max_session_timeout_ms,
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                self.consumer_heartbeat_interval_ms,
            ),
            (
                "group.consumer.min.heartbeat.interval.ms",
                self.consumer_min_heartbeat_interval_ms,
            ),
            (
                "group.consumer.max.heartbeat.interval.ms",
                self.consumer_max_heartbeat_interval_ms,
            ),
            ("group.share.session.timeout.ms", self.session_timeout_ms),
            (
                "group.share.min.session.timeout.ms",
                self.min_session_timeout_ms,
            ),
            (
                "group.share.max.session.timeout.ms",
                self.max_session_timeout_ms,
            ),
            (
                "group.share.heartbeat.interval.ms",
                self.heartbeat_interval_ms,
            ),
            (
                "group.share.min.heartbeat.interval.ms",
                self.min_heartbeat_interval_ms,
            ),
            (
                "group.share.max.heartbeat.interval.ms",
                self.max_heartbeat_interval_ms,
            ),
            (
                "group.streams.session.timeout.ms",
                self.streams_session_timeout_ms,
            ),
            (
                "group.streams.min.session.timeout.ms",
                self.streams_min_session_timeout_ms,
            ),
            (
                "group.streams.max.session.timeout.ms",
                self.streams_max_session_timeout_ms,
            ),
            (
                "group.streams.heartbeat.interval.ms",
                self.streams_heartbeat_interval_ms,
            ),
            (
                "group.streams.min.heartbeat.interval.ms",
                self.streams_min_heartbeat_interval_ms,
            ),
            (
                "group.streams.max.heartbeat.interval.ms",
                self.streams_max_heartbeat_interval_ms,
            ),
        ] {
            range(name, v, 1, i32::MAX)?;
        }
        range(
            "group.streams.num.standby.replicas",
            self.streams_num_standby_replicas,
            0,
            i32::MAX,
        )?;
        range(
            "group.streams.max.standby.replicas",
            self.streams_max_standby_replicas,
            0,
            i32::MAX,
        )?;
        range(
            "group.share.max.share.sessions",
            self.max_share_sessions,
            1,
            i32::MAX,
        )?;
        if self.max_size == 0 || self.max_size > 1000 {
            return Err(format!(
                "Invalid value {} for configuration group.share.max.size: Value must be in [1, 1000]",
                self.max_size
            ));
        }
        let ordered = |lo_name: &str, lo: i32, hi_name: &str, hi: i32| {
            if lo > hi {
                Err(format!(
                    "{hi_name} must be greater than or equal to {lo_name}"
                ))
            } else {
                Ok(())
            }
        };
        ordered(
            "group.share.min.delivery.count.limit",
            self.min_delivery_count_limit,
            "group.share.delivery.count.limit",
            self.delivery_count_limit,
        )?;
        ordered(
            "group.share.delivery.count.limit",
            self.delivery_count_limit,
            "group.share.max.delivery.count.limit",
            self.max_delivery_count_limit,
        )?;
        ordered(
            "group.share.min.record.lock.duration.ms",
            self.min_record_lock_duration_ms,
            "group.share.record.lock.duration.ms",
            self.record_lock_duration_ms,
        )?;
        ordered(
            "group.share.record.lock.duration.ms",
            self.record_lock_duration_ms,
            "group.share.max.record.lock.duration.ms",
            self.max_record_lock_duration_ms,
        )?;
        ordered(
            "group.share.min.partition.max.record.locks",
            self.min_partition_max_record_locks,
            "group.share.partition.max.record.locks",
            self.partition_max_record_locks,
        )?;
        ordered(
            "group.share.partition.max.record.locks",
            self.partition_max_record_locks,
            "group.share.max.partition.max.record.locks",
            self.max_partition_max_record_locks,
        )?;
        ordered(
            "group.share.min.session.timeout.ms",
            self.min_session_timeout_ms,
            "group.share.session.timeout.ms",
            self.session_timeout_ms,
        )?;
        ordered(
            "group.share.session.timeout.ms",
            self.session_timeout_ms,
            "group.share.max.session.timeout.ms",
            self.max_session_timeout_ms,
        )?;
        ordered(
            "group.share.min.heartbeat.interval.ms",
            self.min_heartbeat_interval_ms,
            "group.share.heartbeat.interval.ms",
            self.heartbeat_interval_ms,
        )?;
        ordered(
            "group.share.heartbeat.interval.ms",
            self.heartbeat_interval_ms,
            "group.share.max.heartbeat.interval.ms",
            self.max_heartbeat_interval_ms,
        )?;
        if self.session_timeout_ms <= self.heartbeat_interval_ms {
            return Err("group.share.session.timeout.ms must be greater than group.share.heartbeat.interval.ms".to_string());
        }
        for (lo_name, lo, hi_name, hi) in [
            (
                "group.consumer.min.session.timeout.ms",
                self.consumer_min_session_timeout_ms,
                "group.consumer.session.timeout.ms",
                self.consumer_session_timeout_ms,
            ),
            (
                "group.consumer.session.timeout.ms",
                self.consumer_session_timeout_ms,
                "group.consumer.max.session.timeout.ms",
                self.consumer_max_session_timeout_ms,
            ),
            (
                "group.consumer.min.heartbeat.interval.ms",
                self.consumer_min_heartbeat_interval_ms,
                "group.consumer.heartbeat.interval.ms",
                self.consumer_heartbeat_interval_ms,
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                self.consumer_heartbeat_interval_ms,
                "group.consumer.max.heartbeat.interval.ms",
                self.consumer_max_heartbeat_interval_ms,
            ),
            (
                "group.streams.min.session.timeout.ms",
                self.streams_min_session_timeout_ms,
                "group.streams.session.timeout.ms",
                self.streams_session_timeout_ms,
            ),
            (
                "group.streams.session.timeout.ms",
                self.streams_session_timeout_ms,
                "group.streams.max.session.timeout.ms",
                self.streams_max_session_timeout_ms,
            ),
            (
                "group.streams.min.heartbeat.interval.ms",
                self.streams_min_heartbeat_interval_ms,
                "group.streams.heartbeat.interval.ms",
                self.streams_heartbeat_interval_ms,
            ),
            (
                "group.streams.heartbeat.interval.ms",
                self.streams_heartbeat_interval_ms,
                "group.streams.max.heartbeat.interval.ms",
                self.streams_max_heartbeat_interval_ms,
            ),
            (
                "group.streams.num.standby.replicas",
                self.streams_num_standby_replicas,
                "group.streams.max.standby.replicas",
                self.streams_max_standby_replicas,
            ),
        ] {
            ordered(lo_name, lo, hi_name, hi)?;
        }
        if self.streams_session_timeout_ms <= self.streams_heartbeat_interval_ms {
            return Err("group.streams.session.timeout.ms must be greater than group.streams.heartbeat.interval.ms".to_string());
        }
        if self.consumer_session_timeout_ms <= self.consumer_heartbeat_interval_ms {
            return Err("group.consumer.session.timeout.ms must be greater than group.consumer.heartbeat.interval.ms".to_string());
        }
        check_dlq_prefix(&self.dlq_topic_name_prefix)?;
        // Kafka's ShareGroupConfig.validate.
        if usize::try_from(self.max_share_sessions).unwrap_or(0) < self.max_size {
            return Err(
                "group.share.max.share.sessions must be greater than or equal to group.share.max.size"
                    .to_string(),
            );
        }
        Ok(())
    }
}

/// The effective configuration of one share group: broker defaults with the
/// group's overrides applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `consumer.session.timeout.ms`: a member of a consumer-protocol group
    /// that does not heartbeat for this long is removed.
    pub consumer_session_timeout_ms: i32,
    /// `consumer.heartbeat.interval.ms`: returned to the members of a
    /// consumer-protocol group in every heartbeat.
    pub consumer_heartbeat_interval_ms: i32,
    /// `streams.session.timeout.ms`: a member of a streams group that does
    /// not heartbeat for this long is removed.
    pub streams_session_timeout_ms: i32,
    /// `streams.heartbeat.interval.ms`: returned to the members of a
    /// streams group in every heartbeat.
    pub streams_heartbeat_interval_ms: i32,
    /// `streams.num.standby.replicas`: standby tasks per active task.
    pub streams_num_standby_replicas: i32,
    /// `share.session.timeout.ms`: a member that does not heartbeat for this
    /// long is removed.
    pub session_timeout_ms: i32,
    /// `share.heartbeat.interval.ms`: returned to members in every heartbeat.
    pub heartbeat_interval_ms: i32,
    /// `share.record.lock.duration.ms`: acquisition lock duration.
    pub record_lock_duration_ms: i32,
    /// `share.delivery.count.limit`: deliveries before a record is archived.
    pub delivery_count_limit: i32,
    /// `share.auto.offset.reset`.
    pub auto_offset_reset: AutoOffsetReset,
    /// `share.isolation.level`.
    pub isolation_level: IsolationLevel,
    /// `share.partition.max.record.locks`: in-flight records per share
    /// partition (KIP-1240; the broker's
    /// `group.share.partition.max.record.locks` by default).
    pub partition_max_record_locks: i32,
    /// `share.renew.acknowledge.enable`: whether RENEW acknowledgements are
    /// served (KIP-1222; Kafka's default is true).
    pub renew_acknowledge_enabled: bool,
    /// `errors.deadletterqueue.topic.name` (KIP-1191); empty for none.
    pub dlq_topic_name: String,
    /// `errors.deadletterqueue.copy.record.enable` (KIP-1191).
    pub dlq_copy_record_enable: bool,
}

impl GroupConfig {
    /// The broker defaults, with no group override.
    pub fn defaults(broker: &ShareGroupBrokerConfig) -> Self {
        Self {
            consumer_session_timeout_ms: broker.consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms: broker.consumer_heartbeat_interval_ms,
            streams_session_timeout_ms: broker.streams_session_timeout_ms,
            streams_heartbeat_interval_ms: broker.streams_heartbeat_interval_ms,
            streams_num_standby_replicas: broker.streams_num_standby_replicas,
            session_timeout_ms: broker.session_timeout_ms,
            heartbeat_interval_ms: broker.heartbeat_interval_ms,
            record_lock_duration_ms: broker.record_lock_duration_ms,
            delivery_count_limit: broker.delivery_count_limit,
            auto_offset_reset: AutoOffsetReset::default(),
            isolation_level: IsolationLevel::default(),
            partition_max_record_locks: broker.partition_max_record_locks,
            renew_acknowledge_enabled: true,
            dlq_topic_name: String::new(),
            dlq_copy_record_enable: false,
        }
    }

    /// Defaults overlaid with already validated overrides (unknown names or
    /// unparsable values, which validation never lets in, are skipped).
    pub fn resolve(broker: &ShareGroupBrokerConfig, overrides: &BTreeMap<String, String>) -> Self {
        let mut c = Self::defaults(broker);
        for (name, value) in overrides {
            // Values were validated on the way in; a parse failure here
            // leaves the default in place.
            let _ = c.apply(name, value);
        }
        // Kafka's GroupConfig.evaluate: values the broker's bounds no
        // longer admit (changed at a restart) are clamped into them.
        for (name, v, lo, hi) in c.bounded_mut(broker) {
            if overrides.contains_key(name) {
                *v = (*v).clamp(lo, hi);
            }
        }
        c
    }

    /// The stored overrides that the broker's bounds no longer admit, as
    /// (name, stored value, minimum, maximum): what
    /// [`resolve`](Self::resolve) clamps.
    pub fn out_of_bounds(
        broker: &ShareGroupBrokerConfig,
        overrides: &BTreeMap<String, String>,
    ) -> Vec<(&'static str, i32, i32, i32)> {
        let mut c = Self::defaults(broker);
        for (name, value) in overrides {
            let _ = c.apply(name, value);
        }
        c.bounded_mut(broker)
            .into_iter()
            .filter(|(name, v, lo, hi)| overrides.contains_key(*name) && (**v < *lo || **v > *hi))
            .map(|(name, v, lo, hi)| (name, *v, lo, hi))
            .collect()
    }

    /// The integer configs with the broker's bounds of each.
    fn bounded_mut(
        &mut self,
        b: &ShareGroupBrokerConfig,
    ) -> [(&'static str, &mut i32, i32, i32); 10] {
        // Kafka 4.4's order: the consumer configs first.
        [
            (
                CONSUMER_HEARTBEAT_INTERVAL_MS,
                &mut self.consumer_heartbeat_interval_ms,
                b.consumer_min_heartbeat_interval_ms,
                b.consumer_max_heartbeat_interval_ms,
            ),
            (
                CONSUMER_SESSION_TIMEOUT_MS,
                &mut self.consumer_session_timeout_ms,
                b.consumer_min_session_timeout_ms,
                b.consumer_max_session_timeout_ms,
            ),
            (
                SHARE_HEARTBEAT_INTERVAL_MS,
                &mut self.heartbeat_interval_ms,
                b.min_heartbeat_interval_ms,
                b.max_heartbeat_interval_ms,
            ),
            (
                SHARE_SESSION_TIMEOUT_MS,
                &mut self.session_timeout_ms,
                b.min_session_timeout_ms,
                b.max_session_timeout_ms,
            ),
            (
                SHARE_RECORD_LOCK_DURATION_MS,
                &mut self.record_lock_duration_ms,
                b.min_record_lock_duration_ms,
                b.max_record_lock_duration_ms,
            ),
            (
                SHARE_DELIVERY_COUNT_LIMIT,
                &mut self.delivery_count_limit,
                b.min_delivery_count_limit,
                b.max_delivery_count_limit,
            ),
            (
                SHARE_PARTITION_MAX_RECORD_LOCKS,
                &mut self.partition_max_record_locks,
                b.min_partition_max_record_locks,
                b.max_partition_max_record_locks,
            ),
            (
                STREAMS_HEARTBEAT_INTERVAL_MS,
                &mut self.streams_heartbeat_interval_ms,
                b.streams_min_heartbeat_interval_ms,
                b.streams_max_heartbeat_interval_ms,
            ),
            (
                STREAMS_NUM_STANDBY_REPLICAS,
                &mut self.streams_num_standby_replicas,
                0,
                b.streams_max_standby_replicas,
            ),
            (
                STREAMS_SESSION_TIMEOUT_MS,
                &mut self.streams_session_timeout_ms,
                b.streams_min_session_timeout_ms,
                b.streams_max_session_timeout_ms,
            ),
        ]
    }

    fn apply(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            CONSUMER_SESSION_TIMEOUT_MS => {
                self.consumer_session_timeout_ms = parse_int(name, value)?
            }
            CONSUMER_HEARTBEAT_INTERVAL_MS => {
                self.consumer_heartbeat_interval_ms = parse_int(name, value)?
            }
            STREAMS_SESSION_TIMEOUT_MS => self.streams_session_timeout_ms = parse_int(name, value)?,
            STREAMS_HEARTBEAT_INTERVAL_MS => {
                self.streams_heartbeat_interval_ms = parse_int(name, value)?
            }
            STREAMS_NUM_STANDBY_REPLICAS => {
                self.streams_num_standby_replicas = parse_int(name, value)?
            }
            SHARE_SESSION_TIMEOUT_MS => self.session_timeout_ms = parse_int(name, value)?,
            SHARE_HEARTBEAT_INTERVAL_MS => self.heartbeat_interval_ms = parse_int(name, value)?,
            SHARE_RECORD_LOCK_DURATION_MS => self.record_lock_duration_ms = parse_int(name, value)?,
            SHARE_DELIVERY_COUNT_LIMIT => self.delivery_count_limit = parse_int(name, value)?,
            SHARE_PARTITION_MAX_RECORD_LOCKS => {
                self.partition_max_record_locks = parse_int(name, value)?
            }
            ERRORS_DLQ_TOPIC_NAME => {
                let v = value.trim();
                // Kafka's GroupConfig.validateValues: internal names are
                // reserved.
                if v.starts_with("__") {
                    return Err(format!(
                        "{ERRORS_DLQ_TOPIC_NAME}: DLQ topic name must not start with '__'"
                    ));
                }
                self.dlq_topic_name = v.to_string();
            }
            ERRORS_DLQ_COPY_RECORD_ENABLE => self.dlq_copy_record_enable = parse_bool(name, value)?,
            SHARE_RENEW_ACKNOWLEDGE_ENABLE => {
                self.renew_acknowledge_enabled = match value.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(format!(
                            "Invalid value {value} for configuration {name}: Expected value to be either true or false"
                        ));
                    }
                }
            }
            SHARE_AUTO_OFFSET_RESET => {
                self.auto_offset_reset = match value.trim().to_ascii_lowercase().as_str() {
                    "latest" => AutoOffsetReset::Latest,
                    "earliest" => AutoOffsetReset::Earliest,
                    _ => {
                        return Err(format!(
                            "Invalid value {value} for configuration {name}: the value must be either 'earliest' or 'latest'"
                        ));
                    }
                }
            }
            SHARE_ISOLATION_LEVEL => {
                self.isolation_level = match value.trim() {
                    "read_uncommitted" => IsolationLevel::ReadUncommitted,
                    "read_committed" => IsolationLevel::ReadCommitted,
                    _ => {
                        return Err(format!(
                            "Invalid value {value} for configuration {name}: String must be one of: read_committed, read_uncommitted"
                        ));
                    }
                }
            }
            _ => return Err(format!("Unknown group config name: {name}")),
        }
        Ok(())
    }

    /// The value of a group config in Kafka's text form.
    pub fn value_of(&self, name: &str) -> Option<String> {
        Some(match name {
            CONSUMER_SESSION_TIMEOUT_MS => self.consumer_session_timeout_ms.to_string(),
            CONSUMER_HEARTBEAT_INTERVAL_MS => self.consumer_heartbeat_interval_ms.to_string(),
            STREAMS_SESSION_TIMEOUT_MS => self.streams_session_timeout_ms.to_string(),
            STREAMS_HEARTBEAT_INTERVAL_MS => self.streams_heartbeat_interval_ms.to_string(),
            STREAMS_NUM_STANDBY_REPLICAS => self.streams_num_standby_replicas.to_string(),
            SHARE_SESSION_TIMEOUT_MS => self.session_timeout_ms.to_string(),
            SHARE_HEARTBEAT_INTERVAL_MS => self.heartbeat_interval_ms.to_string(),
            SHARE_RECORD_LOCK_DURATION_MS => self.record_lock_duration_ms.to_string(),
            SHARE_DELIVERY_COUNT_LIMIT => self.delivery_count_limit.to_string(),
            SHARE_PARTITION_MAX_RECORD_LOCKS => self.partition_max_record_locks.to_string(),
            SHARE_RENEW_ACKNOWLEDGE_ENABLE => self.renew_acknowledge_enabled.to_string(),
            ERRORS_DLQ_TOPIC_NAME => self.dlq_topic_name.clone(),
            ERRORS_DLQ_COPY_RECORD_ENABLE => self.dlq_copy_record_enable.to_string(),
            SHARE_AUTO_OFFSET_RESET => self.auto_offset_reset.as_str().to_string(),
            SHARE_ISOLATION_LEVEL => self.isolation_level.as_str().to_string(),
            _ => return None,
        })
    }

    /// Checks the values against the broker's bounds, in the order and with
    /// the messages of Kafka 4.4's `GroupConfig.validateValues`: the
    /// consumer heartbeat interval and session timeout, then the share
    /// heartbeat interval, session timeout, lock duration, delivery count
    /// limit and record locks, then each session timeout above its
    /// heartbeat interval.
    fn check_bounds(&self, b: &ShareGroupBrokerConfig) -> Result<(), String> {
        let mut probe = self.clone();
        for (name, v, lo, hi) in probe.bounded_mut(b) {
            if *v < lo || *v > hi {
                return Err(format!(
                    "{name} must be in the range {lo} to {hi} inclusive."
                ));
            }
        }
        if self.consumer_session_timeout_ms <= self.consumer_heartbeat_interval_ms {
            return Err(format!(
                "{CONSUMER_SESSION_TIMEOUT_MS} must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}"
            ));
        }
        if self.session_timeout_ms <= self.heartbeat_interval_ms {
            return Err(format!(
                "{SHARE_SESSION_TIMEOUT_MS} must be greater than {SHARE_HEARTBEAT_INTERVAL_MS}"
            ));
        }
        if self.streams_session_timeout_ms <= self.streams_heartbeat_interval_ms {
            return Err(format!(
                "{STREAMS_SESSION_TIMEOUT_MS} must be greater than {STREAMS_HEARTBEAT_INTERVAL_MS}"
            ));
        }
        Ok(())
    }
}

fn parse_bool(name: &str, value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!(
            "Invalid value {value} for configuration {name}: Expected value to be either true or false"
        )),
    }
}

/// `errors.deadletterqueue.topic.name.prefix`: empty (no rule), or the
/// start of a legal topic name that is not an internal one (`__`), since a
/// dead-letter topic must carry it.
fn check_dlq_prefix(prefix: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "Invalid value {prefix} for configuration {ERRORS_DLQ_TOPIC_NAME_PREFIX}: {why}"
        ))
    };
    if prefix.starts_with("__") {
        return bad("a dead-letter topic name may not start with '__' (internal topics)");
    }
    if prefix.len() >= 249 {
        return bad("longer than a topic name may be");
    }
    if !prefix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return bad("a topic name holds only ASCII alphanumerics, '.', '_' and '-'");
    }
    Ok(())
}

fn parse_int(name: &str, value: &str) -> Result<i32, String> {
    value.trim().parse::<i32>().map_err(|_| {
        format!("Invalid value {value} for configuration {name}: Not a number of type INT")
    })
}

/// Static minimums Kafka's `GroupConfig` ConfigDef enforces before the
/// broker bounds (`atLeast(1)`, `atLeast(1000)`, `atLeast(2)`,
/// `atLeast(100)`).
fn check_static_minimum(name: &str, value: &str) -> Result<(), String> {
    let min = match name {
        SHARE_SESSION_TIMEOUT_MS
        | SHARE_HEARTBEAT_INTERVAL_MS
        | CONSUMER_SESSION_TIMEOUT_MS
        | CONSUMER_HEARTBEAT_INTERVAL_MS => 1,
        SHARE_RECORD_LOCK_DURATION_MS => 1000,
        SHARE_DELIVERY_COUNT_LIMIT => 2,
        SHARE_PARTITION_MAX_RECORD_LOCKS => 100,
        _ => return Ok(()),
    };
    let v = parse_int(name, value)?;
    if v < min {
        return Err(format!(
            "Invalid value {v} for configuration {name}: Value must be at least {min}"
        ));
    }
    Ok(())
}

/// Applies `ops` (name, `Some(value)` to set, `None` to delete) to a
/// group's overrides and validates the result as a whole. Returns the new
/// override map; `overrides` is left untouched on error.
pub(crate) fn apply_ops(
    broker: &ShareGroupBrokerConfig,
    overrides: &BTreeMap<String, String>,
    ops: &[(&str, Option<&str>)],
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut next = overrides.clone();
    for (name, value) in ops {
        if !GROUP_CONFIG_NAMES.contains(name) {
            return Err(ConfigError::new(
                *name,
                format!("Unknown group config name: {name}"),
            ));
        }
        match value {
            Some(v) => {
                let mut probe = GroupConfig::defaults(broker);
                let refused = |m: String| ConfigError::new(*name, m);
                probe.apply(name, v).map_err(refused)?;
                check_static_minimum(name, v).map_err(refused)?;
                // Store the normalized form.
                let normalized = probe.value_of(name).expect("known name");
                next.insert((*name).to_string(), normalized);
            }
            None => {
                next.remove(*name);
            }
        }
    }
    let mut effective = GroupConfig::defaults(broker);
    for (name, value) in &next {
        effective
            .apply(name, value)
            .map_err(|m| ConfigError::new(name, m))?;
    }
    // The bounds relate settings to each other: no one setting is at fault.
    effective
        .check_bounds(broker)
        .map_err(|m| ConfigError::new("", m))?;
    Ok(next)
}

/// Why a group config change was refused: a Kafka error code
/// (`INVALID_CONFIG` for bad names or values, `INVALID_REQUEST` for an
/// empty group id) and a message naming the setting. Defined once in the
/// protocol crate, shared with the client.
pub use sharestream_protocol::ConfigError;

/// Where a described config value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// The broker's default (DescribeConfigs `DEFAULT_CONFIG` or
    /// `STATIC_BROKER_CONFIG`, as the broker decides).
    Default,
    /// Set for this group (DescribeConfigs `GROUP_CONFIG`, source 8).
    Group,
}

/// One row of [`ShareGroupCoordinator::describe_config`](super::ShareGroupCoordinator::describe_config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfigEntry {
    /// Kafka's config name.
    pub name: &'static str,
    /// Effective value.
    pub value: String,
    /// Default or group-level.
    pub source: ConfigSource,
}

#[cfg(test)]
#[path = "dead_letter_config_tests.rs"]
mod dead_letter_config_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use sharestream_protocol::ErrorCode;

    fn set(ops: &[(&str, Option<&str>)]) -> Result<BTreeMap<String, String>, ConfigError> {
        apply_ops(&ShareGroupBrokerConfig::default(), &BTreeMap::new(), ops)
    }

    #[test]
    fn broker_defaults_are_kafkas_and_valid() {
        let b = ShareGroupBrokerConfig::default();
        b.validate().unwrap();
        let c = GroupConfig::defaults(&b);
        assert_eq!(c.session_timeout_ms, 45_000);
        assert_eq!(c.heartbeat_interval_ms, 5_000);
        assert_eq!(c.record_lock_duration_ms, 30_000);
        assert_eq!(c.delivery_count_limit, 5);
        assert_eq!(c.partition_max_record_locks, 2_000);
        assert_eq!(c.auto_offset_reset, AutoOffsetReset::Latest);
        assert_eq!(c.isolation_level, IsolationLevel::ReadUncommitted);
    }

    #[test]
    fn broker_config_out_of_static_range_is_refused() {
        let b = ShareGroupBrokerConfig {
            delivery_count_limit: 11,
            ..Default::default()
        };
        assert!(
            b.validate()
                .unwrap_err()
                .contains("group.share.delivery.count.limit")
        );
        let b = ShareGroupBrokerConfig {
            partition_max_record_locks: 50,
            ..Default::default()
        };
        assert!(
            b.validate()
                .unwrap_err()
                .contains("group.share.partition.max.record.locks")
        );
        let b = ShareGroupBrokerConfig {
            heartbeat_interval_ms: 45_000,
            max_heartbeat_interval_ms: 60_000,
            ..Default::default()
        };
        assert!(b.validate().unwrap_err().contains("must be greater than"));
    }

    #[test]
    fn record_lock_duration_accepts_15000_to_60000_only() {
        assert!(set(&[(SHARE_RECORD_LOCK_DURATION_MS, Some("15000"))]).is_ok());
        assert!(set(&[(SHARE_RECORD_LOCK_DURATION_MS, Some("60000"))]).is_ok());
        for bad in ["14999", "60001", "999"] {
            let e = set(&[(SHARE_RECORD_LOCK_DURATION_MS, Some(bad))]).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
            assert!(
                e.message.contains(SHARE_RECORD_LOCK_DURATION_MS),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn delivery_count_limit_accepts_2_to_10_only() {
        assert!(set(&[(SHARE_DELIVERY_COUNT_LIMIT, Some("2"))]).is_ok());
        assert!(set(&[(SHARE_DELIVERY_COUNT_LIMIT, Some("10"))]).is_ok());
        for bad in ["1", "11", "0", "-3"] {
            let e = set(&[(SHARE_DELIVERY_COUNT_LIMIT, Some(bad))]).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
            assert!(
                e.message.contains(SHARE_DELIVERY_COUNT_LIMIT),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn non_integer_values_are_invalid_config_naming_the_setting() {
        for bad in ["abc", "1.2", "", "-0.1"] {
            let e = set(&[(SHARE_DELIVERY_COUNT_LIMIT, Some(bad))]).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
            assert!(e.message.contains(SHARE_DELIVERY_COUNT_LIMIT));
        }
    }

    #[test]
    fn auto_offset_reset_accepts_latest_and_earliest() {
        let m = set(&[(SHARE_AUTO_OFFSET_RESET, Some("earliest"))]).unwrap();
        assert_eq!(m[SHARE_AUTO_OFFSET_RESET], "earliest");
        let m = set(&[(SHARE_AUTO_OFFSET_RESET, Some("EARLIEST"))]).unwrap();
        assert_eq!(m[SHARE_AUTO_OFFSET_RESET], "earliest", "stored normalized");
        let e = set(&[(SHARE_AUTO_OFFSET_RESET, Some("none"))]).unwrap_err();
        assert!(e.message.contains(SHARE_AUTO_OFFSET_RESET));
    }

    #[test]
    fn isolation_level_accepts_the_two_kafka_values() {
        assert!(set(&[(SHARE_ISOLATION_LEVEL, Some("read_committed"))]).is_ok());
        assert!(set(&[(SHARE_ISOLATION_LEVEL, Some("read_uncommitted"))]).is_ok());
        let e = set(&[(SHARE_ISOLATION_LEVEL, Some("hello"))]).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
        assert!(e.message.contains(SHARE_ISOLATION_LEVEL));
    }

    #[test]
    fn unknown_group_config_name_is_invalid_config() {
        let e = set(&[("share.no.such.config", Some("500"))]).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
        assert!(e.message.contains("Unknown group config name"));
    }

    #[test]
    fn session_and_heartbeat_bounds_and_ordering() {
        assert!(set(&[(SHARE_SESSION_TIMEOUT_MS, Some("60000"))]).is_ok());
        assert!(set(&[(SHARE_SESSION_TIMEOUT_MS, Some("44999"))]).is_err());
        assert!(set(&[(SHARE_HEARTBEAT_INTERVAL_MS, Some("15000"))]).is_ok());
        assert!(set(&[(SHARE_HEARTBEAT_INTERVAL_MS, Some("15001"))]).is_err());
        // Ordering is checked on the combined result, so a broker whose
        // bounds overlap still cannot get session <= heartbeat.
        let b = ShareGroupBrokerConfig {
            max_heartbeat_interval_ms: 50_000,
            ..Default::default()
        };
        let e = apply_ops(
            &b,
            &BTreeMap::new(),
            &[(SHARE_HEARTBEAT_INTERVAL_MS, Some("46000"))],
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("must be greater than share.heartbeat.interval.ms")
        );
    }

    #[test]
    fn delete_of_an_override_returns_to_the_default() {
        let m = set(&[(SHARE_DELIVERY_COUNT_LIMIT, Some("3"))]).unwrap();
        let b = ShareGroupBrokerConfig::default();
        let m = apply_ops(&b, &m, &[(SHARE_DELIVERY_COUNT_LIMIT, None)]).unwrap();
        assert!(m.is_empty());
        assert_eq!(GroupConfig::resolve(&b, &m).delivery_count_limit, 5);
    }

    #[test]
    fn a_batch_of_ops_is_all_or_nothing() {
        let e = set(&[
            (SHARE_DELIVERY_COUNT_LIMIT, Some("3")),
            (SHARE_RECORD_LOCK_DURATION_MS, Some("1")),
        ])
        .unwrap_err();
        assert!(e.message.contains(SHARE_RECORD_LOCK_DURATION_MS));
    }

    /// KIP-1240: `share.partition.max.record.locks` per group, within the
    /// broker's `group.share.{min,max}.partition.max.record.locks`, with
    /// Kafka 4.4's out-of-range message naming the setting.
    #[test]
    fn partition_max_record_locks_is_a_group_config_within_the_broker_bounds() {
        let b = ShareGroupBrokerConfig::default();
        let m = set(&[(SHARE_PARTITION_MAX_RECORD_LOCKS, Some("4000"))]).unwrap();
        assert_eq!(
            GroupConfig::resolve(&b, &m).partition_max_record_locks,
            4000
        );
        let e = set(&[(SHARE_PARTITION_MAX_RECORD_LOCKS, Some("4001"))]).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
        assert_eq!(
            e.message,
            "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."
        );
        let e = set(&[(SHARE_PARTITION_MAX_RECORD_LOCKS, Some("99"))]).unwrap_err();
        assert!(
            e.message.contains("Value must be at least 100"),
            "{}",
            e.message
        );
    }

    /// KIP-1222/KIP-1240: `share.renew.acknowledge.enable`, a boolean whose
    /// default is true in Kafka's GroupConfig.
    #[test]
    fn renew_acknowledge_enable_is_a_boolean_group_config_defaulting_to_true() {
        let b = ShareGroupBrokerConfig::default();
        assert!(GroupConfig::defaults(&b).renew_acknowledge_enabled);
        let m = set(&[(SHARE_RENEW_ACKNOWLEDGE_ENABLE, Some("FALSE"))]).unwrap();
        assert_eq!(
            m[SHARE_RENEW_ACKNOWLEDGE_ENABLE], "false",
            "stored normalized"
        );
        assert!(!GroupConfig::resolve(&b, &m).renew_acknowledge_enabled);
        let e = set(&[(SHARE_RENEW_ACKNOWLEDGE_ENABLE, Some("yes"))]).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
        assert!(
            e.message.contains(SHARE_RENEW_ACKNOWLEDGE_ENABLE),
            "{}",
            e.message
        );
    }

    /// The out-of-range message of Kafka 4.4's GroupConfig.validateIntRange.
    /// The KIP-848 group configs, with Kafka 4.4's bounds and messages
    /// (checked one by one with kafka-configs.sh against a 4.4 node), the
    /// consumer heartbeat interval checked first.
    #[test]
    fn consumer_group_configs_have_kafkas_bounds_and_messages() {
        let c = GroupConfig::defaults(&ShareGroupBrokerConfig::default());
        assert_eq!(
            (
                c.consumer_session_timeout_ms,
                c.consumer_heartbeat_interval_ms
            ),
            (45_000, 5_000)
        );
        let next = set(&[
            (CONSUMER_SESSION_TIMEOUT_MS, Some("50000")),
            (CONSUMER_HEARTBEAT_INTERVAL_MS, Some("15000")),
        ])
        .unwrap();
        let c = GroupConfig::resolve(&ShareGroupBrokerConfig::default(), &next);
        assert_eq!(
            (
                c.consumer_session_timeout_ms,
                c.consumer_heartbeat_interval_ms
            ),
            (50_000, 15_000)
        );
        for (name, value, message) in [
            (
                CONSUMER_SESSION_TIMEOUT_MS,
                "40000",
                "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
            ),
            (
                CONSUMER_SESSION_TIMEOUT_MS,
                "60001",
                "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
            ),
            (
                CONSUMER_HEARTBEAT_INTERVAL_MS,
                "4000",
                "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.",
            ),
            (
                CONSUMER_SESSION_TIMEOUT_MS,
                "abc",
                "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT",
            ),
            (
                CONSUMER_SESSION_TIMEOUT_MS,
                "0",
                "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1",
            ),
        ] {
            let e = set(&[(name, Some(value))]).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
            assert_eq!(e.message, message, "{name}={value}");
        }
        let e = set(&[
            (CONSUMER_SESSION_TIMEOUT_MS, Some("40000")),
            (CONSUMER_HEARTBEAT_INTERVAL_MS, Some("4000")),
        ])
        .unwrap_err();
        assert!(
            e.message.starts_with(CONSUMER_HEARTBEAT_INTERVAL_MS),
            "{}",
            e.message
        );
        let e = set(&[
            (CONSUMER_SESSION_TIMEOUT_MS, Some("40000")),
            (SHARE_HEARTBEAT_INTERVAL_MS, Some("4000")),
        ])
        .unwrap_err();
        assert!(
            e.message.starts_with(CONSUMER_SESSION_TIMEOUT_MS),
            "{}",
            e.message
        );
        // With bounds that overlap, the session must still exceed the interval.
        let b = ShareGroupBrokerConfig::default()
            .with_overrides([("group.consumer.max.heartbeat.interval.ms", "50000")])
            .unwrap();
        let e = apply_ops(
            &b,
            &BTreeMap::new(),
            &[(CONSUMER_HEARTBEAT_INTERVAL_MS, Some("46000"))],
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        );
    }

    #[test]
    fn consumer_broker_settings_are_set_by_their_kafka_names_and_checked() {
        let b = ShareGroupBrokerConfig::default()
            .with_overrides([
                ("group.consumer.min.session.timeout.ms", "6000"),
                ("group.consumer.session.timeout.ms", "6000"),
                ("group.consumer.min.heartbeat.interval.ms", "500"),
                ("group.consumer.heartbeat.interval.ms", "500"),
            ])
            .unwrap();
        let c = GroupConfig::defaults(&b);
        assert_eq!(
            (
                c.consumer_session_timeout_ms,
                c.consumer_heartbeat_interval_ms
            ),
            (6_000, 500)
        );
        assert!(
            b.entries()
                .contains(&("group.consumer.session.timeout.ms", "6000".to_string()))
        );
        let e = ShareGroupBrokerConfig::default()
            .with_overrides([("group.consumer.session.timeout.ms", "30000")])
            .unwrap_err();
        assert_eq!(
            e,
            "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"
        );
        let e = ShareGroupBrokerConfig::default()
            .with_overrides([
                ("group.consumer.max.heartbeat.interval.ms", "60000"),
                ("group.consumer.heartbeat.interval.ms", "50000"),
            ])
            .unwrap_err();
        assert!(
            e.contains("group.consumer.session.timeout.ms must be greater than"),
            "{e}"
        );
    }

    #[test]
    fn out_of_range_group_configs_get_kafkas_message() {
        let e = set(&[(SHARE_RECORD_LOCK_DURATION_MS, Some("3000"))]).unwrap_err();
        assert_eq!(
            e.message,
            "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."
        );
        // With the broker's minimum lowered (as librdkafka's CI does), 3 s is fine.
        let b = ShareGroupBrokerConfig::default()
            .with_overrides([("group.share.min.record.lock.duration.ms", "1000")])
            .unwrap();
        apply_ops(
            &b,
            &BTreeMap::new(),
            &[(SHARE_RECORD_LOCK_DURATION_MS, Some("3000"))],
        )
        .unwrap();
    }

    /// A value stored under wider bounds is clamped into the broker's
    /// present ones when used (Kafka's GroupConfig.evaluate).
    #[test]
    fn stored_values_outside_new_broker_bounds_are_clamped() {
        let wide = ShareGroupBrokerConfig::default()
            .with_overrides([("group.share.max.delivery.count.limit", "20")])
            .unwrap();
        let m = apply_ops(
            &wide,
            &BTreeMap::new(),
            &[(SHARE_DELIVERY_COUNT_LIMIT, Some("15"))],
        )
        .unwrap();
        let narrow = ShareGroupBrokerConfig::default();
        assert_eq!(GroupConfig::resolve(&narrow, &m).delivery_count_limit, 10);
        assert_eq!(GroupConfig::resolve(&wide, &m).delivery_count_limit, 15);
        assert_eq!(
            GroupConfig::out_of_bounds(&narrow, &m),
            vec![(SHARE_DELIVERY_COUNT_LIMIT, 15, 2, 10)]
        );
        assert!(GroupConfig::out_of_bounds(&wide, &m).is_empty());
    }

    /// Every share-group broker setting is reachable by its Kafka name; a
    /// bad one names itself.
    #[test]
    fn broker_settings_are_set_by_their_kafka_names() {
        let b = ShareGroupBrokerConfig::default()
            .with_overrides([
                ("group.share.min.record.lock.duration.ms", "1000"),
                ("group.share.record.lock.duration.ms", "3000"),
                ("group.share.min.session.timeout.ms", "6000"),
                ("group.share.session.timeout.ms", "6000"),
                ("group.share.min.heartbeat.interval.ms", "500"),
                ("group.share.heartbeat.interval.ms", "1000"),
                ("group.share.delivery.count.limit", "3"),
                ("group.share.max.partition.max.record.locks", "10000"),
                ("group.share.partition.max.record.locks", "10000"),
                ("group.share.max.share.sessions", "500"),
            ])
            .unwrap();
        assert_eq!(b.max_share_sessions, 500);
        assert_eq!(b.record_lock_duration_ms, 3000);
        assert_eq!(b.min_record_lock_duration_ms, 1000);
        assert_eq!(b.session_timeout_ms, 6000);
        assert_eq!(b.heartbeat_interval_ms, 1000);
        assert_eq!(b.delivery_count_limit, 3);
        assert_eq!(b.partition_max_record_locks, 10_000);
        let names: Vec<&str> = b.entries().iter().map(|e| e.0).collect();
        for n in [
            "group.share.min.partition.max.record.locks",
            "group.share.max.partition.max.record.locks",
        ] {
            assert!(names.contains(&n), "{n}");
        }
        for (name, value, needle) in [
            ("group.share.no.such", "1", "group.share.no.such"),
            (
                "group.share.record.lock.duration.ms",
                "soon",
                "group.share.record.lock.duration.ms",
            ),
            (
                "group.share.min.record.lock.duration.ms",
                "500",
                "group.share.min.record.lock.duration.ms",
            ),
            (
                "group.share.partition.max.record.locks",
                "5000",
                "group.share.max.partition.max.record.locks",
            ),
            (
                "group.share.max.share.sessions",
                "100",
                "group.share.max.share.sessions",
            ),
        ] {
            let e = ShareGroupBrokerConfig::default()
                .with_overrides([(name, value)])
                .unwrap_err();
            assert!(e.contains(needle), "{name}={value}: {e}");
        }
    }

    #[test]
    fn the_abort_record_state_is_available_by_default_and_set_by_name() {
        let b = ShareGroupBrokerConfig::default();
        assert_eq!(
            b.transaction_abort_record_state,
            AbortedRecordState::Available
        );
        assert!(
            b.entries()
                .contains(&(TRANSACTION_ABORT_RECORD_STATE, "available".to_string()))
        );
        let b = ShareGroupBrokerConfig::default()
            .with_overrides([(TRANSACTION_ABORT_RECORD_STATE, "ACQUIRED")])
            .unwrap();
        assert_eq!(
            b.transaction_abort_record_state,
            AbortedRecordState::Acquired
        );
        let e = ShareGroupBrokerConfig::default()
            .with_overrides([(TRANSACTION_ABORT_RECORD_STATE, "later")])
            .unwrap_err();
        assert!(
            e.contains(TRANSACTION_ABORT_RECORD_STATE) && e.contains("available, acquired"),
            "{e}"
        );
    }
}
