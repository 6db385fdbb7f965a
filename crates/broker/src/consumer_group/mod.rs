//! The consumer group coordinator for the classic group protocol
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and the committed offsets
//! of consumer groups (OffsetCommit, OffsetFetch, TxnOffsetCommit), as an
//! I/O-free state machine.
//!
//! - [`coordinator`]: [`GroupCoordinator`], the classic protocol. Each
//!   method takes the request's fields and the current time and returns an
//!   [`Output`]: the immediate answer (or "parked": the answer comes later,
//!   as Kafka parks JoinGroup until the join phase ends and SyncGroup until
//!   the leader's assignment arrives), the parked answers this call
//!   completed ([`Completion`]), and the records to persist
//!   ([`GroupRecord`]). [`GroupCoordinator::tick`] runs the timers (session
//!   expiry, the join phase's rebalance timeout and the initial delay, the
//!   sync deadline); [`GroupCoordinator::next_deadline_ms`] says when.
//! - [`offsets`]: committed offsets on the same struct: generation and
//!   member checks as Kafka's classic groups make them, transactional
//!   offsets held until their transaction's marker.
//! - [`record`]: what is persisted and how a coordinator is rebuilt from it.
//!
//! Assignment is the clients' business (the leader computes it and hands it
//! over in SyncGroup); the coordinator only elects a leader, picks the
//! protocol all members support (by vote, as Kafka does) and distributes
//! the leader's bytes, so eager and cooperative-sticky clients both work.
//!
//! What persists (docs/DESIGN.md D19): committed offsets (each OffsetCommit
//! durable before its answer), transactional offsets until their marker,
//! and each group's generation and protocol type. Membership is not: after
//! a restart every member gets UNKNOWN_MEMBER_ID at its next heartbeat and
//! rejoins, and the generation keeps rising so no pre-restart member can
//! commit into a post-restart generation.

pub mod admin;
pub mod consumer_protocol;
pub mod coordinator;
pub mod describe;
pub mod offsets;
pub mod partition_sets;
pub mod record;
pub mod streams_protocol;

pub use coordinator::{
    ClassicGroupConfig, Completion, GroupCoordinator, GroupState, JoinGroupRequest,
    JoinGroupResponse, JoinedMember, LeaveMember, Output, Reply, SyncGroupRequest,
    SyncGroupResponse,
};
pub use describe::{DescribedGroup, DescribedMember};
pub use offsets::{CommittedOffset, OffsetCommitRequest, OffsetExpiry, PartitionOffset};
pub use record::GroupRecord;

#[cfg(test)]
mod tests;
