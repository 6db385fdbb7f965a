//! The topic registry: names, ids, partition counts and topic configs.
//!
//! Pure bookkeeping with Kafka's validation rules; the broker persists a
//! [`TopicRegistry`] snapshot after every change.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use sharestream_protocol::ErrorCode;

/// Kafka's longest legal topic name.
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// Topic configs the broker understands, with their defaults.
pub const TOPIC_CONFIG_DEFAULTS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("compression.type", "producer"),
    ("max.message.bytes", "1048588"),
    ("message.timestamp.type", "CreateTime"),
    ("retention.bytes", "-1"),
    ("retention.ms", "604800000"),
    ("segment.bytes", "1073741824"),
    ("min.insync.replicas", "1"),
];

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
        self.configs.get(name).map(String::as_str).or_else(|| {
            TOPIC_CONFIG_DEFAULTS
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| *v)
        })
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

/// Checks one topic config name and value.
pub fn validate_topic_config(key: &str, value: &str) -> Result<(), TopicError> {
    let bad = |why: &str| {
        Err(TopicError::new(
            ErrorCode::INVALID_CONFIG,
            format!("Invalid value {value} for configuration {key}: {why}"),
        ))
    };
    match key {
        "cleanup.policy" => {
            if value
                .split(',')
                .all(|p| matches!(p.trim(), "delete" | "compact"))
            {
                Ok(())
            } else {
                bad("String must be one of: compact, delete")
            }
        }
        "compression.type" => {
            if matches!(
                value,
                "producer" | "uncompressed" | "gzip" | "snappy" | "lz4" | "zstd"
            ) {
                Ok(())
            } else {
                bad("String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer")
            }
        }
        "message.timestamp.type" => {
            if matches!(value, "CreateTime" | "LogAppendTime") {
                Ok(())
            } else {
                bad("String must be one of: CreateTime, LogAppendTime")
            }
        }
        "max.message.bytes" | "segment.bytes" | "min.insync.replicas" => {
            match value.parse::<i32>() {
                Ok(v) if v >= 0 => Ok(()),
                _ => bad("Value must be a non-negative integer"),
            }
        }
        "retention.ms" | "retention.bytes" => match value.parse::<i64>() {
            Ok(v) if v >= -1 => Ok(()),
            _ => bad("Value must be at least -1"),
        },
        _ => Err(TopicError::new(
            ErrorCode::INVALID_CONFIG,
            format!("Unknown topic config name: {key}"),
        )),
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
    fn serde_round_trip_keeps_ids() {
        let mut r = TopicRegistry::default();
        let t = r.create("x", 2, 1, BTreeMap::new()).unwrap();
        let json = serde_json::to_string(&r).unwrap();
        let mut back: TopicRegistry = serde_json::from_str(&json).unwrap();
        back.reindex();
        assert_eq!(back.get_by_id(&t.id), Some(&t));
    }
}
