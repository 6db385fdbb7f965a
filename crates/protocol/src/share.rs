//! The share-group vocabulary, defined once for the broker, the client and
//! the exactly-once layer: how a record was handled
//! ([`AcknowledgeType`]), how a fetch bounds an acquisition
//! ([`AcquireMode`]) and which records a share group may see
//! ([`IsolationLevel`]).

use crate::txn_share_ack::{ACK_ACCEPT, ACK_GAP, ACK_REJECT, ACK_RELEASE, ACK_RENEW};

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
    fn acquire_mode_wire_bytes() {
        for m in [AcquireMode::BatchOptimized, AcquireMode::RecordLimit] {
            assert_eq!(AcquireMode::from_i8(m.as_i8()), Some(m));
        }
        assert_eq!(AcquireMode::from_i8(2), None);
    }
}
