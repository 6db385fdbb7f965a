//! The topic registry: names, ids, partition counts and topic configs.
//!
//! Pure bookkeeping with Kafka's validation rules; the broker persists a
//! [`TopicRegistry`] snapshot after every change.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::group::{TopicInfo, TopicLookup};
use sharestream_protocol::ErrorCode;

/// Kafka's internal topic of the group coordinator.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Partitions of `__consumer_offsets` (Kafka's
/// `offsets.topic.num.partitions` default).
pub const CONSUMER_OFFSETS_PARTITIONS: i32 = 50;

/// Kafka's longest legal topic name.
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// The kind and bounds of a topic config's value, as Kafka's LogConfig
/// defines them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConfigKind {
    /// 32-bit integer within `[min, max]`.
    Int(i64, i64),
    /// 64-bit integer within `[min, max]`.
    Long(i64, i64),
    /// A double within `[min, max]`.
    Double(f64, f64),
    /// `true` or `false` (any case).
    Boolean,
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// A comma-separated list of these strings (non-empty).
    ListOf(&'static [&'static str]),
    /// Kafka's throttled-replicas list: empty, `*`, or
    /// `partition:broker` pairs.
    ThrottledReplicas,
    /// Any string (its own rules are checked where it is used).
    Text,
}

impl ConfigKind {
    /// DescribeConfigs' ConfigType code.
    pub fn type_code(&self) -> i8 {
        match self {
            ConfigKind::Boolean => 1,
            ConfigKind::OneOf(_) | ConfigKind::Text => 2,
            ConfigKind::Int(..) => 3,
            ConfigKind::Long(..) => 5,
            ConfigKind::Double(..) => 6,
            ConfigKind::ListOf(_) | ConfigKind::ThrottledReplicas => 7,
        }
    }
}

/// What the embedded broker does with a topic config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Honoured {
    /// It changes the broker's behaviour.
    Yes,
    /// Validated, stored and described, but without effect here (replication,
    /// compaction, tiered storage, flush and index tuning).
    AcceptedOnly,
}

/// One topic config Kafka defines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopicConfigDef {
    /// Kafka's name.
    pub name: &'static str,
    /// Kafka's default.
    pub default: &'static str,
    /// Value kind and bounds.
    pub kind: ConfigKind,
    /// Whether it has an effect here.
    pub honoured: Honoured,
}

const fn def(
    name: &'static str,
    default: &'static str,
    kind: ConfigKind,
    honoured: Honoured,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        default,
        kind,
        honoured,
    }
}

const I32: (i64, i64) = (i32::MIN as i64, i32::MAX as i64);
const MAX_LONG: &str = "9223372036854775807";
use ConfigKind::*;
use Honoured::{AcceptedOnly, Yes};

/// Every topic config of Kafka 4.x (TopicConfig / LogConfig), in name
/// order, with Kafka's defaults and bounds. `Yes` marks the ones the
/// embedded broker honours: `cleanup.policy` (retention runs with
/// `delete`, the log cleaner with `compact`), the compaction settings
/// (`delete.retention.ms`, `min.compaction.lag.ms`,
/// `max.compaction.lag.ms`, `min.cleanable.dirty.ratio`),
/// `retention.ms`, `retention.bytes`, `max.message.bytes`,
/// `segment.bytes`, `segment.ms`, `message.timestamp.type` and
/// `min.insync.replicas`
/// (acks=all with a value above 1 is NOT_ENOUGH_REPLICAS on one node).
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        "delete",
        ListOf(&["compact", "delete"]),
        Yes,
    ),
    def("compression.gzip.level", "-1", Int(-1, 9), AcceptedOnly),
    def("compression.lz4.level", "9", Int(1, 17), AcceptedOnly),
    def(
        "compression.type",
        "producer",
        OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        AcceptedOnly,
    ),
    def(
        "compression.zstd.level",
        "3",
        Int(-131072, 22),
        AcceptedOnly,
    ),
    def("delete.retention.ms", "86400000", Long(0, i64::MAX), Yes),
    // KIP-1191: whether share groups may use the topic as their
    // dead-letter queue.
    def("errors.deadletterqueue.group.enable", "false", Boolean, Yes),
    def(
        "file.delete.delay.ms",
        "60000",
        Long(0, i64::MAX),
        AcceptedOnly,
    ),
    def("flush.messages", MAX_LONG, Long(1, i64::MAX), AcceptedOnly),
    def("flush.ms", MAX_LONG, Long(0, i64::MAX), AcceptedOnly),
    def(
        "follower.replication.throttled.replicas",
        "",
        ThrottledReplicas,
        AcceptedOnly,
    ),
    def("index.interval.bytes", "4096", Int(0, I32.1), AcceptedOnly),
    def(
        "leader.replication.throttled.replicas",
        "",
        ThrottledReplicas,
        AcceptedOnly,
    ),
    def(
        "local.retention.bytes",
        "-2",
        Long(-2, i64::MAX),
        AcceptedOnly,
    ),
    def("local.retention.ms", "-2", Long(-2, i64::MAX), AcceptedOnly),
    def("max.compaction.lag.ms", MAX_LONG, Long(1, i64::MAX), Yes),
    // Kafka 4.4: a cap on one record's decompressed size.
    def(
        "max.decompressed.message.bytes",
        "2147483639",
        Int(1, 2147483639),
        AcceptedOnly,
    ),
    def("max.message.bytes", "1048588", Int(0, I32.1), Yes),
    def(
        "message.timestamp.after.max.ms",
        "3600000",
        Long(0, i64::MAX),
        AcceptedOnly,
    ),
    def(
        "message.timestamp.before.max.ms",
        MAX_LONG,
        Long(0, i64::MAX),
        AcceptedOnly,
    ),
    def(
        "message.timestamp.type",
        "CreateTime",
        OneOf(&["CreateTime", "LogAppendTime"]),
        Yes,
    ),
    def("min.cleanable.dirty.ratio", "0.5", Double(0.0, 1.0), Yes),
    def("min.compaction.lag.ms", "0", Long(0, i64::MAX), Yes),
    def("min.insync.replicas", "1", Int(1, I32.1), Yes),
    def("preallocate", "false", Boolean, AcceptedOnly),
    def(
        "remote.copy.lag.bytes",
        "0",
        Long(-1, i64::MAX),
        AcceptedOnly,
    ),
    def("remote.copy.lag.ms", "0", Long(-1, i64::MAX), AcceptedOnly),
    def("remote.log.copy.disable", "false", Boolean, AcceptedOnly),
    def(
        "remote.log.delete.on.disable",
        "false",
        Boolean,
        AcceptedOnly,
    ),
    def("remote.storage.enable", "false", Boolean, AcceptedOnly),
    def("retention.bytes", "-1", Long(i64::MIN, i64::MAX), Yes),
    def("retention.ms", "604800000", Long(-1, i64::MAX), Yes),
    def("segment.bytes", "1073741824", Int(1024 * 1024, I32.1), Yes),
    def(
        "segment.index.bytes",
        "10485760",
        Int(4, I32.1),
        AcceptedOnly,
    ),
    def("segment.jitter.ms", "0", Long(0, i64::MAX), AcceptedOnly),
    def("segment.ms", "604800000", Long(1, i64::MAX), Yes),
    def(
        "unclean.leader.election.enable",
        "false",
        Boolean,
        AcceptedOnly,
    ),
];

/// The definition of a topic config, `None` for a name Kafka does not
/// define.
pub fn topic_config_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    /// Name.
    pub name: String,
    /// Stable, non-zero id.
    pub id: Uuid,
    /// Number of partitions.
    pub partitions: i32,
    /// Configs set explicitly at creation or later.
    pub configs: BTreeMap<String, String>,
}

impl TopicMeta {
    /// Value of a topic config, explicit or default.
    pub fn config(&self, name: &str) -> Option<&str> {
        self.configs
            .get(name)
            .map(String::as_str)
            .or_else(|| topic_config_def(name).map(|d| d.default))
    }

    /// A numeric topic config (explicit or default), `None` if unset or
    /// not a number.
    pub fn config_i64(&self, name: &str) -> Option<i64> {
        self.config(name).and_then(|v| v.trim().parse().ok())
    }

    /// Whether this is Kafka's internal `__consumer_offsets` topic (the
    /// group coordinator's, which clients see as internal in Metadata).
    pub fn is_internal(&self) -> bool {
        self.name == CONSUMER_OFFSETS_TOPIC
    }

    /// Whether `cleanup.policy` includes `compact`.
    pub fn is_compacted(&self) -> bool {
        self.config("cleanup.policy")
            .is_some_and(|p| p.split(',').any(|x| x.trim() == "compact"))
    }

    /// Whether the topic stamps LogAppendTime.
    pub fn log_append_time(&self) -> bool {
        self.config("message.timestamp.type") == Some("LogAppendTime")
    }
}

/// All topics, by name and by id.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TopicRegistry {
    by_name: BTreeMap<String, TopicMeta>,
    #[serde(skip)]
    by_id: HashMap<Uuid, String>,
}

/// Why a topic could not be created or changed: a Kafka error code and a
/// message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicError {
    /// Kafka error code.
    pub code: ErrorCode,
    /// Human explanation.
    pub message: String,
}

impl TopicError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// Checks a topic name against Kafka's rules.
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    if name.is_empty() {
        return Err(TopicError::new(
            ErrorCode::INVALID_TOPIC_EXCEPTION,
            "Topic name is illegal, it can't be empty",
        ));
    }
    if name == "." || name == ".." {
        return Err(TopicError::new(
            ErrorCode::INVALID_TOPIC_EXCEPTION,
            "Topic name cannot be \".\" or \"..\"",
        ));
    }
    if name.len() > MAX_TOPIC_NAME_LENGTH {
        return Err(TopicError::new(
            ErrorCode::INVALID_TOPIC_EXCEPTION,
            format!("Topic name is longer than the maximum of {MAX_TOPIC_NAME_LENGTH} characters"),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '_' || *c == '-'))
    {
        return Err(TopicError::new(
            ErrorCode::INVALID_TOPIC_EXCEPTION,
            format!(
                "Topic name \"{name}\" is illegal, it contains a character ({c:?}) other than ASCII alphanumerics, '.', '_' and '-'"
            ),
        ));
    }
    Ok(())
}

/// The registry as the share group coordinator sees it. The coordinator
/// is a pure state machine that knows topics only through
/// [`TopicLookup`]; the registry implements it here, on its side.
impl TopicLookup for TopicRegistry {
    fn topic(&self, name: &str) -> Option<TopicInfo> {
        self.get(name).map(|t| TopicInfo {
            id: t.id,
            partitions: t.partitions,
        })
    }
}

impl TopicRegistry {
    /// Rebuilds the id index after deserialization.
    pub fn reindex(&mut self) {
        self.by_id = self
            .by_name
            .values()
            .map(|t| (t.id, t.name.clone()))
            .collect();
    }

    /// Looks a topic up by name.
    pub fn get(&self, name: &str) -> Option<&TopicMeta> {
        self.by_name.get(name)
    }

    /// Looks a topic up by id.
    pub fn get_by_id(&self, id: &Uuid) -> Option<&TopicMeta> {
        self.by_id.get(id).and_then(|n| self.by_name.get(n))
    }

    /// All topics in name order.
    pub fn iter(&self) -> impl Iterator<Item = &TopicMeta> {
        self.by_name.values()
    }

    /// Number of topics.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// `true` with no topics.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Validates a creation request without applying it.
    pub fn check_create(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), TopicError> {
        validate_topic_name(name)?;
        if self.by_name.contains_key(name) {
            return Err(TopicError::new(
                ErrorCode::TOPIC_ALREADY_EXISTS,
                format!("Topic '{name}' already exists."),
            ));
        }
        if partitions <= 0 {
            return Err(TopicError::new(
                ErrorCode::INVALID_PARTITIONS,
                "Number of partitions must be larger than 0.",
            ));
        }
        check_partition_cap(partitions)?;
        if replication_factor != -1 && replication_factor != 1 {
            return Err(TopicError::new(
                ErrorCode::INVALID_REPLICATION_FACTOR,
                format!(
                    "Replication factor: {replication_factor} larger than available brokers: 1."
                ),
            ));
        }
        for (k, v) in configs {
            validate_topic_config(k, v)?;
        }
        Ok(())
    }

    /// Creates a topic with a fresh id.
    pub fn create(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, TopicError> {
        self.check_create(name, partitions, replication_factor, &configs)?;
        let mut id = Uuid::new_v4();
        while id.is_nil() || self.by_id.contains_key(&id) {
            id = Uuid::new_v4();
        }
        let meta = TopicMeta {
            name: name.to_string(),
            id,
            partitions,
            configs,
        };
        self.by_id.insert(id, name.to_string());
        self.by_name.insert(name.to_string(), meta.clone());
        Ok(meta)
    }

    /// Deletes a topic.
    pub fn delete(&mut self, name: &str) -> Option<TopicMeta> {
        let meta = self.by_name.remove(name)?;
        self.by_id.remove(&meta.id);
        Some(meta)
    }

    /// Raises the partition count of a topic to `count`.
    pub fn add_partitions(&mut self, name: &str, count: i32) -> Result<TopicMeta, TopicError> {
        let meta = self.by_name.get_mut(name).ok_or_else(|| {
            TopicError::new(
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                format!("This server does not host this topic ID: {name}"),
            )
        })?;
        if count <= meta.partitions {
            return Err(TopicError::new(
                ErrorCode::INVALID_PARTITIONS,
                format!(
                    "Topic currently has {} partitions, which is higher than the requested {count}.",
                    meta.partitions
                ),
            ));
        }
        check_partition_cap(count)?;
        meta.partitions = count;
        Ok(meta.clone())
    }

    /// Replaces every explicit config of a topic (AlterConfigs, and
    /// IncrementalAlterConfigs after its operations are applied), after
    /// validating each. `validate_only` checks without changing.
    pub fn replace_configs(
        &mut self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicMeta, TopicError> {
        for (k, v) in &configs {
            validate_topic_config(k, v)?;
        }
        let meta = self.by_name.get_mut(name).ok_or_else(|| {
            TopicError::new(
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                format!("Topic {name} does not exist"),
            )
        })?;
        if validate_only {
            let mut copy = meta.clone();
            copy.configs = configs;
            return Ok(copy);
        }
        meta.configs = configs;
        Ok(meta.clone())
    }

    /// Sets (or with `None` removes) a topic config.
    pub fn set_config(
        &mut self,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), TopicError> {
        if let Some(v) = value {
            validate_topic_config(key, v)?;
        }
        let meta = self.by_name.get_mut(name).ok_or_else(|| {
            TopicError::new(
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                format!("Topic {name} does not exist"),
            )
        })?;
        match value {
            Some(v) => {
                meta.configs.insert(key.to_string(), v.to_string());
            }
            None => {
                meta.configs.remove(key);
            }
        }
        Ok(())
    }
}

/// Checks one topic config name and value as Kafka's LogConfig does:
/// INVALID_CONFIG for a name Kafka does not define or a value out of its
/// type or bounds, with Kafka's kind of message.
pub fn validate_topic_config(key: &str, value: &str) -> Result<(), TopicError> {
    let Some(d) = topic_config_def(key) else {
        return Err(TopicError::new(
            ErrorCode::INVALID_CONFIG,
            format!("Unknown topic config name: {key}"),
        ));
    };
    validate_value(key, value, d.kind)?;
    if key == "remote.storage.enable" && value.trim().eq_ignore_ascii_case("true") {
        return Err(TopicError::new(
            ErrorCode::INVALID_CONFIG,
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
        ));
    }
    Ok(())
}

/// Checks a value against a config kind (INVALID_CONFIG, with Kafka's
/// kind of message, when it does not fit).
pub fn validate_value(key: &str, value: &str, kind: ConfigKind) -> Result<(), TopicError> {
    let bad = |why: String| {
        Err(TopicError::new(
            ErrorCode::INVALID_CONFIG,
            format!("Invalid value {value} for configuration {key}: {why}"),
        ))
    };
    let v = value.trim();
    match kind {
        Int(min, max) | Long(min, max) => {
            let is_int = matches!(kind, Int(..));
            let parsed = if is_int {
                v.parse::<i32>().map(i64::from).ok()
            } else {
                v.parse::<i64>().ok()
            };
            match parsed {
                None => bad(format!(
                    "Not a number of type {}",
                    if is_int { "INT" } else { "LONG" }
                )),
                Some(n) if n < min => bad(format!("Value must be at least {min}")),
                Some(n) if n > max => bad(format!("Value must be no more than {max}")),
                Some(_) => Ok(()),
            }
        }
        Double(min, max) => match v.parse::<f64>() {
            Ok(n) if n.is_nan() => bad("Not a number of type DOUBLE".into()),
            Ok(n) if n < min || n > max => {
                bad(format!("Value must be between {min:?} and {max:?}"))
            }
            Ok(_) => Ok(()),
            Err(_) => bad("Not a number of type DOUBLE".into()),
        },
        Boolean => {
            if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
                Ok(())
            } else {
                bad("Expected value to be either true or false".into())
            }
        }
        OneOf(allowed) => {
            if allowed.contains(&v) {
                Ok(())
            } else {
                bad(format!("String must be one of: {}", allowed.join(", ")))
            }
        }
        ListOf(allowed) => {
            let items: Vec<&str> = v.split(',').map(str::trim).collect();
            if v.is_empty() || items.iter().any(|x| x.is_empty()) {
                return bad("Empty list".into());
            }
            match items.iter().find(|x| !allowed.contains(x)) {
                Some(x) => bad(format!("{x} is not one of: {}", allowed.join(", "))),
                None => Ok(()),
            }
        }
        Text => Ok(()),
        ThrottledReplicas => {
            let ok = v.is_empty()
                || v == "*"
                || v.split(',').map(str::trim).all(|pair| {
                    let mut it = pair.split(':');
                    matches!(
                        (it.next(), it.next(), it.next()),
                        (Some(p), Some(b), None)
                            if p.parse::<i32>().is_ok() && b.parse::<i32>().is_ok()
                    )
                });
            if ok {
                Ok(())
            } else {
                bad("must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...".into())
            }
        }
    }
}

/// Most partitions one topic may have. Every partition is a log opened at
/// once, so an unchecked count (one flipped bit in a CreateTopics request
/// turns 1 into 2^30) would exhaust memory before anything is answered.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 10_000;

fn check_partition_cap(partitions: i32) -> Result<(), TopicError> {
    if partitions > MAX_PARTITIONS_PER_TOPIC {
        return Err(TopicError::new(
            ErrorCode::INVALID_PARTITIONS,
            format!(
                "Number of partitions {partitions} is above this broker's limit of {MAX_PARTITIONS_PER_TOPIC}."
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-y").is_ok());
        for bad in ["", ".", "..", "a b", "ä", &"x".repeat(250)] {
            assert_eq!(
                validate_topic_name(bad).unwrap_err().code,
                ErrorCode::INVALID_TOPIC_EXCEPTION,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn partition_counts_above_the_cap_are_refused() {
        let mut r = TopicRegistry::default();
        for n in [MAX_PARTITIONS_PER_TOPIC + 1, 1 << 30, i32::MAX] {
            assert_eq!(
                r.create("big", n, -1, BTreeMap::new()).unwrap_err().code,
                ErrorCode::INVALID_PARTITIONS
            );
        }
        r.create("big", MAX_PARTITIONS_PER_TOPIC, -1, BTreeMap::new())
            .unwrap();
        r.create("grows", 1, -1, BTreeMap::new()).unwrap();
        assert_eq!(
            r.add_partitions("grows", 1 << 30).unwrap_err().code,
            ErrorCode::INVALID_PARTITIONS
        );
        assert_eq!(r.add_partitions("grows", 2).unwrap().partitions, 2);
    }

    #[test]
    fn create_delete_and_lookup() {
        let mut r = TopicRegistry::default();
        let t = r.create("a", 3, -1, BTreeMap::new()).unwrap();
        assert!(!t.id.is_nil());
        assert_eq!(r.get_by_id(&t.id).unwrap().name, "a");
        assert_eq!(
            r.create("a", 1, 1, BTreeMap::new()).unwrap_err().code,
            ErrorCode::TOPIC_ALREADY_EXISTS
        );
        assert_eq!(
            r.create("b", 0, 1, BTreeMap::new()).unwrap_err().code,
            ErrorCode::INVALID_PARTITIONS
        );
        assert_eq!(
            r.create("b", 1, 3, BTreeMap::new()).unwrap_err().code,
            ErrorCode::INVALID_REPLICATION_FACTOR
        );
        assert_eq!(r.add_partitions("a", 5).unwrap().partitions, 5);
        assert_eq!(
            r.add_partitions("a", 2).unwrap_err().code,
            ErrorCode::INVALID_PARTITIONS
        );
        assert!(r.delete("a").is_some());
        assert!(r.get_by_id(&t.id).is_none());
    }

    #[test]
    fn configs_are_validated_and_defaulted() {
        let mut r = TopicRegistry::default();
        let mut c = BTreeMap::new();
        c.insert("cleanup.policy".to_string(), "nope".to_string());
        assert_eq!(
            r.create("t", 1, 1, c).unwrap_err().code,
            ErrorCode::INVALID_CONFIG
        );
        let t = r.create("t", 1, 1, BTreeMap::new()).unwrap();
        assert_eq!(t.config("retention.ms"), Some("604800000"));
        r.set_config("t", "message.timestamp.type", Some("LogAppendTime"))
            .unwrap();
        assert!(r.get("t").unwrap().log_append_time());
    }

    #[test]
    fn every_kafka_topic_config_is_known_and_validated_as_kafka_does() {
        // Each default must pass its own validation.
        for d in TOPIC_CONFIGS {
            if d.name != "cleanup.policy" || !d.default.is_empty() {
                validate_topic_config(d.name, d.default)
                    .unwrap_or_else(|e| panic!("default of {}: {}", d.name, e.message));
            }
        }
        for (k, v) in [
            ("unclean.leader.election.enable", "TRUE"),
            ("delete.retention.ms", "0"),
            ("segment.ms", "1"),
            ("cleanup.policy", "compact, delete"),
            ("min.cleanable.dirty.ratio", "1.0"),
            ("leader.replication.throttled.replicas", "0:0,1:0"),
            ("follower.replication.throttled.replicas", "*"),
            ("retention.bytes", "-5"),
            ("compression.zstd.level", "-7"),
        ] {
            assert!(validate_topic_config(k, v).is_ok(), "{k}={v}");
        }
        for (k, v, why) in [
            ("min.insync.replicas", "0", "at least 1"),
            ("retention.ms", "-2", "at least -1"),
            ("segment.bytes", "1000", "at least 1048576"),
            (
                "max.message.bytes",
                "2147483648",
                "Not a number of type INT",
            ),
            ("delete.retention.ms", "soon", "Not a number of type LONG"),
            ("preallocate", "yes", "true or false"),
            ("cleanup.policy", "delete,purge", "purge"),
            ("cleanup.policy", "", "Empty list"),
            ("min.cleanable.dirty.ratio", "1.5", "between"),
            ("compression.gzip.level", "10", "no more than 9"),
            (
                "leader.replication.throttled.replicas",
                "0-0",
                "[partitionId]",
            ),
            ("message.timestamp.type", "Now", "CreateTime, LogAppendTime"),
            ("remote.storage.enable", "true", "Tiered Storage"),
            ("no.such.config", "1", "Unknown topic config name"),
        ] {
            let e = validate_topic_config(k, v).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_CONFIG, "{k}={v}");
            assert!(e.message.contains(why), "{k}={v}: {}", e.message);
        }
    }

    #[test]
    fn replace_configs_validates_and_can_only_validate() {
        let mut r = TopicRegistry::default();
        r.create("t", 1, 1, BTreeMap::new()).unwrap();
        let mut c = BTreeMap::new();
        c.insert("retention.ms".to_string(), "1000".to_string());
        let checked = r.replace_configs("t", c.clone(), true).unwrap();
        assert_eq!(checked.config("retention.ms"), Some("1000"));
        assert_eq!(
            r.get("t").unwrap().config("retention.ms"),
            Some("604800000")
        );
        r.replace_configs("t", c, false).unwrap();
        assert_eq!(r.get("t").unwrap().config_i64("retention.ms"), Some(1000));
        let mut bad = BTreeMap::new();
        bad.insert("retention.ms".to_string(), "x".to_string());
        assert_eq!(
            r.replace_configs("t", bad, false).unwrap_err().code,
            ErrorCode::INVALID_CONFIG
        );
        assert_eq!(r.get("t").unwrap().config_i64("retention.ms"), Some(1000));
        assert_eq!(
            r.replace_configs("nope", BTreeMap::new(), false)
                .unwrap_err()
                .code,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        );
    }

    #[test]
    fn serde_round_trip_keeps_ids() {
        let mut r = TopicRegistry::default();
        let t = r.create("x", 2, 1, BTreeMap::new()).unwrap();
        let json = serde_json::to_string(&r).unwrap();
        let mut back: TopicRegistry = serde_json::from_str(&json).unwrap();
        back.reindex();
        assert_eq!(back.get_by_id(&t.id), Some(&t));
    }
}
