//! Error policies, processing errors, dead-letter records and build-time
//! errors.
//!
//! # Error policy
//!
//! When turning a source record into output records fails — its key or value
//! cannot be deserialized, an operator returns an error or panics, an output
//! cannot be serialized — the [`ErrorPolicy`] of the node that failed decides
//! what happens to the source record. A node's policy is set with
//! `.on_error(...)` on the handle that the operator returned (on the source
//! stream for deserialization errors, on the [`SinkHandle`](super::SinkHandle)
//! for serialization errors); nodes without one use the topology's
//! ([`StreamsBuilder::error_policy`](super::StreamsBuilder::error_policy),
//! default [`ErrorPolicy::Fail`]).
//!
//! Processing of the source record stops at the first error, and every
//! output already made for it (on any branch) is dropped: a source record is
//! processed all or nothing.
//!
//! - `Fail`: the outcome is [`Outcome::Fail`](super::Outcome::Fail); the
//!   runtime aborts the transaction and stops the application.
//! - `Reject`: nothing is produced; the source record is acknowledged
//!   REJECT.
//! - `DeadLetter { topic }`: one record is produced to `topic` — the source
//!   record's original key, value and headers, followed by the error headers
//!   below — and the source record is acknowledged REJECT, in the same
//!   transaction.
//!
//! # Dead-letter headers
//!
//! [`dead_letter_record`] appends, after the original headers, UTF-8 headers
//! (numbers in decimal):
//!
//! | header | value |
//! |---|---|
//! | [`DLQ_ORIGINAL_TOPIC`] `__dlq.original.topic` | topic of the source record |
//! | [`DLQ_ORIGINAL_PARTITION`] `__dlq.original.partition` | its partition |
//! | [`DLQ_ORIGINAL_OFFSET`] `__dlq.original.offset` | its offset |
//! | [`DLQ_ORIGINAL_TIMESTAMP`] `__dlq.original.timestamp` | its timestamp (ms) |
//! | [`DLQ_DELIVERY_COUNT`] `__dlq.delivery.count` | its delivery count (deliveries by the share group, this one included) |
//! | [`DLQ_ATTEMPTS`] `__dlq.attempts` | processing attempts: the earlier deliveries (one each) plus the in-process attempts of this one ([`ProcessingError::attempts`]) |
//! | [`DLQ_ERROR_KIND`] `__dlq.error.kind` | `deserialization`, `operator` or `serialization` ([`ErrorKind`]) |
//! | [`DLQ_ERROR_NODE`] `__dlq.error.node` | name of the node that failed (see `describe()`) |
//! | [`DLQ_ERROR_MESSAGE`] `__dlq.error.message` | the error message |
//! | [`DLQ_REASON`] `__dlq.reason` | only on records the runtime dead-lettered because they failed on their last delivery under `Fail`: `delivery-count-limit` |
//!
//! The dead-letter record has no partition and no timestamp: the producer
//! picks the partition by key and stamps the time of dead-lettering (the
//! original timestamp would let retention delete an old record at once).

use bytes::Bytes;

use super::record::{OutputRecord, SourceRecord};
use crate::protocol::records::RecordHeader;

/// Header: topic of the dead-lettered source record.
pub const DLQ_ORIGINAL_TOPIC: &str = "__dlq.original.topic";
/// Header: partition of the dead-lettered source record.
pub const DLQ_ORIGINAL_PARTITION: &str = "__dlq.original.partition";
/// Header: offset of the dead-lettered source record.
pub const DLQ_ORIGINAL_OFFSET: &str = "__dlq.original.offset";
/// Header: timestamp of the dead-lettered source record.
pub const DLQ_ORIGINAL_TIMESTAMP: &str = "__dlq.original.timestamp";
/// Header: delivery count of the dead-lettered source record.
pub const DLQ_DELIVERY_COUNT: &str = "__dlq.delivery.count";
/// Header: processing attempts of the dead-lettered source record, earlier
/// deliveries included (`delivery count - 1 + in-process attempts`).
pub const DLQ_ATTEMPTS: &str = "__dlq.attempts";
/// Header: [`ErrorKind`] of the error.
pub const DLQ_ERROR_KIND: &str = "__dlq.error.kind";
/// Header: name of the node that failed.
pub const DLQ_ERROR_NODE: &str = "__dlq.error.node";
/// Header: the error message.
pub const DLQ_ERROR_MESSAGE: &str = "__dlq.error.message";
/// Header on a record the runtime dead-lettered because it failed on its
/// last delivery (its delivery count reached `share.delivery.count.limit`)
/// under [`ErrorPolicy::Fail`]: value [`DLQ_REASON_DELIVERY_LIMIT`].
pub const DLQ_REASON: &str = "__dlq.reason";
/// [`DLQ_REASON`] of a record that failed on its last delivery.
pub const DLQ_REASON_DELIVERY_LIMIT: &str = "delivery-count-limit";

/// What to do with a source record whose processing failed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum ErrorPolicy {
    /// Stop the application (the transaction is aborted, the record will be
    /// delivered again after a restart).
    #[default]
    Fail,
    /// Acknowledge the source record REJECT; produce nothing.
    Reject,
    /// Produce the source record with error headers to `topic` and
    /// acknowledge it REJECT, in the same transaction.
    DeadLetter {
        /// The dead-letter topic.
        topic: String,
    },
}

impl ErrorPolicy {
    /// `DeadLetter { topic }`.
    pub fn dead_letter(topic: impl Into<String>) -> Self {
        Self::DeadLetter {
            topic: topic.into(),
        }
    }
}

/// Where in the processing an error happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The source record's key or value could not be deserialized.
    Deserialization,
    /// An operator returned an error or panicked.
    Operator,
    /// An output key or value could not be serialized.
    Serialization,
    /// The record's topic is not a source topic of the topology (a runtime
    /// bug; always fails).
    UnknownTopic,
}

impl ErrorKind {
    /// The name written in the [`DLQ_ERROR_KIND`] header.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deserialization => "deserialization",
            Self::Operator => "operator",
            Self::Serialization => "serialization",
            Self::UnknownTopic => "unknown-topic",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure to process one source record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} error in '{node}': {message}")]
pub struct ProcessingError {
    /// Where it happened.
    pub kind: ErrorKind,
    /// Name of the node that failed.
    pub node: String,
    /// What went wrong (for a panic: `panicked: <payload>`).
    pub message: String,
    /// In-process attempts during this delivery: 1, or what the operator
    /// reported with [`AttemptsExhausted`].
    pub attempts: u32,
}

impl ProcessingError {
    /// Processing attempts of `source` in all: one for each earlier delivery
    /// (an earlier delivery ended without an outcome: a crash, an abort, a
    /// lock expiry) plus the in-process attempts of this one. What the
    /// [`DLQ_ATTEMPTS`] header holds.
    pub fn total_attempts(&self, source: &SourceRecord) -> u64 {
        source.delivery_count.max(1) as u64 - 1 + u64::from(self.attempts.max(1))
    }
}

/// The error an operator returns after retrying in process, so that the
/// attempts reach [`ProcessingError::attempts`] and the [`DLQ_ATTEMPTS`]
/// header: `Err(AttemptsExhausted::new(3, last_error))` from a fallible
/// operator closure. Its message is the last error's.
#[derive(Debug)]
pub struct AttemptsExhausted {
    /// Attempts made (at least 1).
    pub attempts: u32,
    /// The last attempt's error.
    pub error: BoxError,
}

impl AttemptsExhausted {
    /// `attempts` attempts were made; the last failed with `error`.
    pub fn new(attempts: u32, error: impl Into<BoxError>) -> Self {
        Self {
            attempts,
            error: error.into(),
        }
    }
}

impl std::fmt::Display for AttemptsExhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for AttemptsExhausted {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.error)
    }
}

/// The error of a fallible operator closure. Anything that converts into a
/// boxed error converts into it (`String`, `&str`, every `std::error::Error`,
/// `anyhow::Error`...).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The record to produce to `dlq_topic` for a source record that failed with
/// `error`: original key, value and headers, then the headers listed in the
/// module docs. The runtime uses it for [`ErrorPolicy::DeadLetter`] (through
/// [`CompiledTopology::process`](super::CompiledTopology::process)), and
/// applications can use it for their own dead-letter queues.
pub fn dead_letter_record(
    source: &SourceRecord,
    dlq_topic: &str,
    error: &ProcessingError,
) -> OutputRecord {
    let mut headers = Vec::with_capacity(source.headers.len() + 9);
    headers.extend(source.headers.iter().cloned());
    let mut add = |key: &str, value: String| {
        headers.push(RecordHeader {
            key: key.to_string(),
            value: Some(Bytes::from(value)),
        })
    };
    add(DLQ_ORIGINAL_TOPIC, source.topic.clone());
    add(DLQ_ORIGINAL_PARTITION, source.partition.to_string());
    add(DLQ_ORIGINAL_OFFSET, source.offset.to_string());
    add(DLQ_ORIGINAL_TIMESTAMP, source.timestamp.to_string());
    add(DLQ_DELIVERY_COUNT, source.delivery_count.to_string());
    add(DLQ_ATTEMPTS, error.total_attempts(source).to_string());
    add(DLQ_ERROR_KIND, error.kind.as_str().to_string());
    add(DLQ_ERROR_NODE, error.node.clone());
    add(DLQ_ERROR_MESSAGE, error.message.clone());
    OutputRecord {
        topic: dlq_topic.to_string(),
        key: source.key.clone(),
        value: source.value.clone(),
        headers,
        partition: None,
        timestamp: None,
    }
}

/// One reason why a topology cannot run. The message says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// No `builder.stream(...)`.
    #[error("topology has no source: call builder.stream(...)")]
    NoSource,
    /// No stream ends in a sink.
    #[error("topology has no sink: end a stream with .to(...), .to_dynamic(...) or .foreach(...)")]
    NoSink,
    /// The share group name is empty.
    #[error("the share group name is empty: pass it to StreamsBuilder::new(\"my-group\")")]
    EmptyShareGroup,
    /// A source without topics.
    #[error("source '{source_name}' has no topic: pass at least one topic to builder.stream(...)")]
    SourceWithoutTopic {
        /// The source node.
        source_name: String,
    },
    /// A topic consumed by two sources (or twice by one).
    #[error(
        "topic '{topic}' is subscribed twice ({first} and {second}): consume it once and \
         use .split() or a cloned stream to process it in several ways"
    )]
    TopicSubscribedTwice {
        /// The topic.
        topic: String,
        /// First source.
        first: String,
        /// Second source.
        second: String,
    },
    /// A name that Kafka refuses as a topic name.
    #[error(
        "invalid topic name '{topic}' ({context}): use 1 to 249 characters of \
         [a-zA-Z0-9._-], not '.' or '..'"
    )]
    InvalidTopicName {
        /// The name.
        topic: String,
        /// Where it was used.
        context: String,
    },
    /// A source whose records reach no sink.
    #[error(
        "stream from source '{source_name}' (topics: {topics}) never reaches a sink: add .to(...) \
         or .foreach(...)"
    )]
    SourceWithoutSink {
        /// The source node.
        source_name: String,
        /// Its topics, comma-separated.
        topics: String,
    },
    /// A branch of a split with no downstream.
    #[error(
        "branch '{branch}' of split '{split}' has no downstream: add .to(...) or an operator \
         to it (or leave it out of the split)"
    )]
    BranchWithoutRoute {
        /// The branch name.
        branch: String,
        /// The split node.
        split: String,
    },
    /// An operator whose output goes nowhere.
    #[error(
        "operator '{node}' has no downstream, so its records would be dropped: add .to(...) \
         or .foreach(...) after it"
    )]
    DanglingOperator {
        /// The node.
        node: String,
    },
    /// A split never ended with `default_branch` / `no_default_branch`.
    #[error(
        "split '{split}' is not finished: end it with .default_branch(name) or \
         .no_default_branch()"
    )]
    UnfinishedSplit {
        /// The split node.
        split: String,
    },
    /// A split without any predicate branch.
    #[error("split '{split}' has no branches: add .branch(name, predicate) before ending it")]
    SplitWithoutBranches {
        /// The split node.
        split: String,
    },
    /// Two branches of one split with the same name.
    #[error("duplicate branch name '{branch}' in split '{split}': give each branch its own name")]
    DuplicateBranchName {
        /// The branch name.
        branch: String,
        /// The split node.
        split: String,
    },
    /// Two nodes with the same name.
    #[error("duplicate node name '{name}': give each operator a unique name with .named(...)")]
    DuplicateNodeName {
        /// The name.
        name: String,
    },
    /// `map_async(0, ...)`.
    #[error("async operator '{node}' has max_in_flight 0: allow at least 1 call in flight")]
    ZeroConcurrency {
        /// The node.
        node: String,
    },
    /// Streams of two builders merged.
    #[error(
        "'{node}' merges a stream of another StreamsBuilder: build each topology from one builder"
    )]
    ForeignStream {
        /// The node.
        node: String,
    },
    /// A topic written and read by the topology with different formats.
    #[error(
        "serde mismatch on topic '{topic}': sink '{sink}' writes the {part} as {written} but \
         source '{source_name}' reads it as {read}; use the same serde on both"
    )]
    SerdeMismatch {
        /// The topic.
        topic: String,
        /// `key` or `value`.
        part: &'static str,
        /// The sink node.
        sink: String,
        /// Its format.
        written: String,
        /// The source node.
        source_name: String,
        /// Its format.
        read: String,
    },
    /// A dead-letter topic that is also a source topic.
    #[error(
        "dead-letter topic '{topic}' is also a source topic: dead-lettered records would be \
         processed again; use a separate topic"
    )]
    DeadLetterIsSource {
        /// The topic.
        topic: String,
    },
}

/// Why [`StreamsBuilder::build`](super::StreamsBuilder::build) refused: every
/// problem found, one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    /// The problems, in a stable order.
    pub errors: Vec<TopologyError>,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid topology")?;
        for e in &self.errors {
            write!(f, "\n- {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for BuildError {}
