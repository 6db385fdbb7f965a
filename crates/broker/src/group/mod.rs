//! The share group coordinator (KIP-932): membership, epochs, assignment and
//! group configuration of share groups, as an I/O-free state machine.
//!
//! - [`coordinator`]: [`ShareGroupCoordinator`], driving ShareGroupHeartbeat
//!   v1, ShareGroupDescribe v1, session expiry and member validation for
//!   ShareFetch / ShareAcknowledge / TxnShareAcknowledge. Its methods take
//!   the current time and a [`TopicLookup`] and return [`GroupEffects`] for
//!   the broker to apply to share partitions.
//! - [`assignor`]: the `simple` assignor: every subscribed partition served
//!   while a subscriber exists, partitions shared when members outnumber
//!   them, spread evenly otherwise, sticky and deterministic.
//! - [`config`]: broker defaults and bounds, and the per-group configs
//!   (`share.record.lock.duration.ms`, `share.delivery.count.limit`,
//!   `share.auto.offset.reset`, `share.isolation.level`,
//!   `share.session.timeout.ms`, `share.heartbeat.interval.ms`) set through
//!   IncrementalAlterConfigs on the GROUP resource.
//!
//! What persists: group configs and group epochs ([`CoordinatorSnapshot`],
//! serde). Membership is rebuilt from heartbeats after a restart.

pub mod assignor;
pub mod config;
pub mod coordinator;

pub use assignor::{Assignment, SIMPLE_ASSIGNOR_NAME};
pub use config::{
    AutoOffsetReset, ConfigError, ConfigSource, ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE,
    ERRORS_DLQ_COPY_RECORD_ENABLE, ERRORS_DLQ_TOPIC_NAME, ERRORS_DLQ_TOPIC_NAME_PREFIX,
    GroupConfig, GroupConfigEntry, IsolationLevel, ShareGroupBrokerConfig,
};
pub use coordinator::{
    CoordinatorSnapshot, DepartedMember, DepartureReason, DescribedGroup, DescribedMember,
    DescribedTopicPartitions, GroupEffects, GroupError, HeartbeatOutcome, HeartbeatRequest,
    ShareGroupCoordinator, ShareGroupState, SharePartitionKey, TopicInfo, TopicLookup,
};

#[cfg(test)]
mod tests;
