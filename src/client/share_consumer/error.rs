//! [`ConsumerError`]: what the share consumer's methods fail with.

use crate::client::error::ClientError;
use crate::eos::TopicIdPartition;
use crate::protocol::ErrorCode;

/// A failure of a share consumer call.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// The call is not allowed in the consumer's current state; Kafka's Java
    /// consumer throws IllegalStateException in the same cases (e.g. a poll
    /// in explicit mode while records of the previous poll are not
    /// acknowledged, or `acknowledge` in implicit mode).
    #[error("illegal state: {0}")]
    IllegalState(String),
    /// An argument was refused (e.g. RELEASE inside a transaction).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A request failed (network, timeout, broker error code).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The broker refused acknowledgements of one share partition.
    #[error("acknowledgement of {partition} failed with {code}")]
    Acknowledgement {
        /// The share partition.
        partition: TopicIdPartition,
        /// The error code of the broker.
        code: ErrorCode,
    },
    /// The group membership failed for good (e.g.
    /// GROUP_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION); the consumer must
    /// be closed.
    #[error("share group membership failed: {0}")]
    Membership(String),
    /// The operation did not finish within its timeout.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The consumer is closed.
    #[error("the share consumer is closed")]
    Closed,
}
