//! The share-group vocabulary, defined once for the broker, the client and
//! the exactly-once layer: how a record was handled
//! ([`AcknowledgeType`]), a range of acknowledged offsets
//! ([`AcknowledgementBatch`], and [`RawAcknowledgementBatch`] before its
//! type codes are checked), a partition named by topic id
//! ([`TopicIdPartition`]), how a fetch bounds an acquisition
//! ([`AcquireMode`]) and which records a share group may see
//! ([`IsolationLevel`]).

use std::fmt;

use uuid::Uuid;

use crate::txn_share_ack::{
    ACK_ACCEPT, ACK_GAP, ACK_REJECT, ACK_RELEASE, ACK_RENEW, TxnShareAcknowledgementBatch,
};
use crate::wire::uvarint_size;

/// How a record was handled: the acknowledge type of ShareFetch,
/// ShareAcknowledge and TxnShareAcknowledge (KIP-932, KIP-1222, KIP-1289).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i8)]
pub enum AcknowledgeType {
    /// The offset held no record to deliver (control record, aborted
    /// transaction); ARCHIVED.
    Gap = ACK_GAP,
    /// Processed; ACKNOWLEDGED.
    Accept = ACK_ACCEPT,
    /// Give it back for another delivery; AVAILABLE with the delivery count
    /// kept.
    Release = ACK_RELEASE,
    /// Unprocessable; never deliver again (ARCHIVED).
    Reject = ACK_REJECT,
    /// Extend the acquisition lock (KIP-1222).
    Renew = ACK_RENEW,
}

impl AcknowledgeType {
    /// The wire code.
    pub fn code(self) -> i8 {
        self as i8
    }

    /// The type for a wire code, `None` for an unknown one.
    pub fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            ACK_GAP => Self::Gap,
            ACK_ACCEPT => Self::Accept,
            ACK_RELEASE => Self::Release,
            ACK_REJECT => Self::Reject,
            ACK_RENEW => Self::Renew,
            _ => return None,
        })
    }

    /// Whether the type may be staged in a transaction. KIP-1289 as its
    /// author's later branch has it: ACCEPT, REJECT and the gap marker
    /// (docs/DESIGN.md D5).
    pub fn is_transactional(self) -> bool {
        matches!(self, Self::Accept | Self::Reject | Self::Gap)
    }
}

impl From<AcknowledgeType> for i8 {
    fn from(t: AcknowledgeType) -> i8 {
        t.code()
    }
}

/// A topic partition named by topic id (and by name, for people and for
/// the client's lookups by name).
///
/// Ordered by topic id first, then name and partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicIdPartition {
    /// Topic id.
    pub topic_id: Uuid,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicIdPartition {
    /// The partition as share requests name it: topic id and index, no
    /// name (ShareFetch, ShareAcknowledge and TxnShareAcknowledge carry
    /// topic ids only). The broker keys its share state by this.
    pub fn key(&self) -> (Uuid, i32) {
        (self.topic_id, self.partition)
    }
}

impl fmt::Display for TopicIdPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{} ({})", self.topic, self.partition, self.topic_id)
    }
}

/// One range of acknowledged offsets, as ShareFetch, ShareAcknowledge and
/// TxnShareAcknowledge carry it: `first_offset..=last_offset` with one
/// acknowledge type for the whole range or one per offset.
///
/// The element type `T` is [`AcknowledgeType`] everywhere a batch is built
/// from known types (the client, the exactly-once layer). A broker reads
/// batches off the wire before it may judge their codes, and must answer a
/// batch with an unknown code with INVALID_REQUEST for that partition
/// alone, so it holds them as [`RawAcknowledgementBatch`] (codes as sent)
/// until its validation turns them into typed ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcknowledgementBatch<T = AcknowledgeType> {
    /// First offset, inclusive.
    pub first_offset: i64,
    /// Last offset, inclusive.
    pub last_offset: i64,
    /// One type for the whole range, or one per offset.
    pub acknowledge_types: Vec<T>,
}

/// An [`AcknowledgementBatch`] with its type codes as they came off the
/// wire, not yet checked (see [`AcknowledgementBatch`] for why the broker
/// needs this form).
pub type RawAcknowledgementBatch = AcknowledgementBatch<i8>;

impl<T: Copy + Into<i8>> AcknowledgementBatch<T> {
    /// The type of `offset`, if the batch covers it.
    pub fn type_of(&self, offset: i64) -> Option<T> {
        if offset < self.first_offset || offset > self.last_offset {
            return None;
        }
        if self.acknowledge_types.len() == 1 {
            Some(self.acknowledge_types[0])
        } else {
            self.acknowledge_types
                .get((offset - self.first_offset) as usize)
                .copied()
        }
    }

    /// Every (offset, type) the batch stands for; a batch whose type list
    /// is neither 1 long nor the range's length stops at its end.
    pub fn expand(&self) -> impl Iterator<Item = (i64, T)> + '_ {
        (self.first_offset..=self.last_offset).map_while(|o| self.type_of(o).map(|t| (o, t)))
    }

    /// Bytes this batch takes on the wire.
    pub fn encoded_size(&self) -> usize {
        Self::encoded_size_for(self.acknowledge_types.len())
    }

    /// Bytes a batch with `type_count` type bytes takes on the wire:
    /// 8 + 8 bytes of offsets, the compact-array length (a varint of
    /// `n + 1`), the type bytes and one byte of tagged fields.
    pub fn encoded_size_for(type_count: usize) -> usize {
        16 + uvarint_size(type_count as u32 + 1) + type_count + 1
    }

    /// The TxnShareAcknowledge wire form.
    pub fn to_wire(&self) -> TxnShareAcknowledgementBatch {
        TxnShareAcknowledgementBatch {
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            acknowledge_types: self.acknowledge_types.iter().map(|&t| t.into()).collect(),
        }
    }

    /// The same batch with its types as wire codes.
    pub fn to_raw(&self) -> RawAcknowledgementBatch {
        AcknowledgementBatch {
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            acknowledge_types: self.acknowledge_types.iter().map(|&t| t.into()).collect(),
        }
    }
}

impl RawAcknowledgementBatch {
    /// A batch with one type for all of `first..=last`.
    pub fn uniform(first_offset: i64, last_offset: i64, ty: AcknowledgeType) -> Self {
        AcknowledgementBatch {
            first_offset,
            last_offset,
            acknowledge_types: vec![ty.code()],
        }
    }
}

impl From<&TxnShareAcknowledgementBatch> for RawAcknowledgementBatch {
    fn from(b: &TxnShareAcknowledgementBatch) -> Self {
        AcknowledgementBatch {
            first_offset: b.first_offset,
            last_offset: b.last_offset,
            acknowledge_types: b.acknowledge_types.clone(),
        }
    }
}

/// How a fetch's `MaxRecords` bounds an acquisition: ShareFetch v2's
/// `AcquireMode` (KIP-1206) and the group config `share.acquire.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AcquireMode {
    /// 0: whole record batches are acquired; `MaxRecords` may be exceeded to
    /// finish a batch (the only behaviour of ShareFetch version 1).
    #[default]
    BatchOptimized,
    /// 1: at most `MaxRecords` records are acquired, splitting batches.
    RecordLimit,
}

impl AcquireMode {
    /// The wire byte.
    pub fn as_i8(self) -> i8 {
        match self {
            AcquireMode::BatchOptimized => 0,
            AcquireMode::RecordLimit => 1,
        }
    }

    /// The mode for a wire byte, `None` for an unknown one.
    pub fn from_i8(v: i8) -> Option<Self> {
        match v {
            0 => Some(AcquireMode::BatchOptimized),
            1 => Some(AcquireMode::RecordLimit),
            _ => None,
        }
    }

    /// The name used by the `share.acquire.mode` setting.
    pub fn name(self) -> &'static str {
        match self {
            AcquireMode::BatchOptimized => "batch_optimized",
            AcquireMode::RecordLimit => "record_limit",
        }
    }
}

/// Which records a share group may acquire (group config
/// `share.isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IsolationLevel {
    /// Up to the high watermark: records of open and aborted transactions
    /// are delivered like any other (Kafka's default).
    #[default]
    ReadUncommitted,
    /// Only below the last stable offset: records of aborted transactions
    /// are handed out as gaps, never as data.
    ReadCommitted,
}

impl IsolationLevel {
    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationLevel::ReadUncommitted => "read_uncommitted",
            IsolationLevel::ReadCommitted => "read_committed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledge_type_codes_round_trip() {
        for code in 0..=4 {
            let t = AcknowledgeType::from_code(code).expect("known code");
            assert_eq!(t.code(), code);
        }
        assert_eq!(AcknowledgeType::from_code(5), None);
        assert_eq!(AcknowledgeType::from_code(-1), None);
    }

    #[test]
    fn only_accept_reject_and_gap_ride_in_a_transaction() {
        let staged: Vec<_> = (0..=4)
            .filter_map(AcknowledgeType::from_code)
            .filter(|t| t.is_transactional())
            .collect();
        assert_eq!(
            staged,
            [
                AcknowledgeType::Gap,
                AcknowledgeType::Accept,
                AcknowledgeType::Reject
            ]
        );
    }

    #[test]
    fn batch_types_by_offset_and_raw_form() {
        use AcknowledgeType::*;
        let mixed = AcknowledgementBatch {
            first_offset: 4,
            last_offset: 6,
            acknowledge_types: vec![Accept, Reject, Accept],
        };
        assert_eq!(mixed.type_of(3), None);
        assert_eq!(mixed.type_of(5), Some(Reject));
        assert_eq!(
            mixed.expand().collect::<Vec<_>>(),
            [(4, Accept), (5, Reject), (6, Accept)]
        );
        assert_eq!(mixed.to_raw().acknowledge_types, [1, 3, 1]);
        assert_eq!(mixed.to_raw().expand().count(), 3);
        let uniform = RawAcknowledgementBatch::uniform(0, 9, Release);
        assert_eq!(uniform.type_of(9), Some(2));
        assert_eq!(uniform.to_wire().acknowledge_types, [2]);
        // 16 bytes of offsets, 1 of length, 1 type byte, 1 of tagged fields.
        assert_eq!(uniform.encoded_size(), 19);
        // A malformed batch (2 types for 3 offsets) expands only as far as
        // it has types.
        let short = RawAcknowledgementBatch {
            first_offset: 0,
            last_offset: 2,
            acknowledge_types: vec![1, 1],
        };
        assert_eq!(short.expand().count(), 2);
    }

    #[test]
    fn acquire_mode_wire_bytes() {
        for m in [AcquireMode::BatchOptimized, AcquireMode::RecordLimit] {
            assert_eq!(AcquireMode::from_i8(m.as_i8()), Some(m));
        }
        assert_eq!(AcquireMode::from_i8(2), None);
    }
}
