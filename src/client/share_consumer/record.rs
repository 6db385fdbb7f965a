//! [`ShareRecord`]s, and how a ShareFetch partition answer becomes records
//! and gaps.
//!
//! A ShareFetch answer for one partition has AcquiredRecords ranges (first
//! offset, last offset, delivery count) and record batches that cover them.
//! Every acquired offset that a non-control batch holds a record for is
//! delivered as a [`ShareRecord`] with the delivery count of its range. Every
//! other acquired offset (control records, records of aborted transactions
//! that a read_committed broker left out, compacted-away offsets) is a
//! *gap*: it is not handed to the application and the consumer acknowledges
//! it as GAP itself (D5). Records in the batches outside the acquired ranges
//! (a batch is sent whole) are skipped.

use std::collections::BTreeSet;

use bytes::Bytes;
use uuid::Uuid;

use crate::eos::TopicIdPartition;
use crate::protocol::ProtocolError;
use crate::protocol::records::{RecordBatchView, RecordHeader, TimestampType};

/// The most acquired offsets one partition answer may claim; a larger total
/// is treated as a malformed response (it would otherwise make the client
/// enumerate an unbounded range of gaps).
pub const MAX_ACQUIRED_OFFSETS_PER_PARTITION: u64 = 1 << 20;

/// One record delivered by a share group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShareRecord {
    /// Topic name.
    pub topic: String,
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// How many times the record has been acquired, this time included.
    pub delivery_count: i16,
    /// Key; `None` is a null key.
    pub key: Option<Bytes>,
    /// Value; `None` is a null value.
    pub value: Option<Bytes>,
    /// Headers in wire order, duplicate keys kept.
    pub headers: Vec<RecordHeader>,
    /// Timestamp in milliseconds.
    pub timestamp: i64,
    /// What the timestamp means.
    pub timestamp_type: TimestampType,
    /// When this consumer sent the ShareFetch that acquired the record:
    /// the broker acquired it later, so the time since is at least the
    /// age of its acquisition (the exactly-once ledger bounds that age,
    /// `exactly.once.ledger.max.batch.age.ms`).
    pub acquired_at: tokio::time::Instant,
}

impl ShareRecord {
    /// The share partition the record belongs to.
    pub fn topic_id_partition(&self) -> TopicIdPartition {
        TopicIdPartition {
            topic_id: self.topic_id,
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }
}

/// The records one poll returned, in partition and offset order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareRecords {
    records: Vec<ShareRecord>,
}

impl ShareRecords {
    /// Wraps records.
    pub fn new(records: Vec<ShareRecord>) -> Self {
        Self { records }
    }
    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }
    /// `true` with no records.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
    /// The records.
    pub fn iter(&self) -> std::slice::Iter<'_, ShareRecord> {
        self.records.iter()
    }
    /// The records as a slice.
    pub fn as_slice(&self) -> &[ShareRecord] {
        &self.records
    }
    /// The share partitions that have records.
    pub fn partitions(&self) -> BTreeSet<TopicIdPartition> {
        self.records
            .iter()
            .map(ShareRecord::topic_id_partition)
            .collect()
    }
}

impl IntoIterator for ShareRecords {
    type Item = ShareRecord;
    type IntoIter = std::vec::IntoIter<ShareRecord>;
    fn into_iter(self) -> Self::IntoIter {
        self.records.into_iter()
    }
}

impl<'a> IntoIterator for &'a ShareRecords {
    type Item = &'a ShareRecord;
    type IntoIter = std::slice::Iter<'a, ShareRecord>;
    fn into_iter(self) -> Self::IntoIter {
        self.records.iter()
    }
}

/// One AcquiredRecords range of a ShareFetch answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRange {
    /// First offset, inclusive.
    pub first_offset: i64,
    /// Last offset, inclusive.
    pub last_offset: i64,
    /// Delivery count of the offsets in the range.
    pub delivery_count: i16,
}

/// What one partition answer delivers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodedPartition {
    /// Records to hand to the application, in offset order.
    pub records: Vec<ShareRecord>,
    /// Acquired offsets without a record, to acknowledge as GAP.
    pub gaps: Vec<i64>,
}

/// Turns one partition answer into records and gaps (see the module docs).
pub fn decode_partition(
    tp: &TopicIdPartition,
    records: Option<Bytes>,
    acquired: &[AcquiredRange],
    max_decompressed: usize,
    acquired_at: tokio::time::Instant,
) -> Result<DecodedPartition, ProtocolError> {
    // Ranges sorted by first offset; a later range with the same first
    // offset replaces an earlier one.
    let mut ranges: Vec<AcquiredRange> = Vec::with_capacity(acquired.len());
    let mut total: u64 = 0;
    for r in acquired {
        if r.first_offset > r.last_offset || r.first_offset < 0 {
            return Err(ProtocolError::malformed(
                "ShareFetch acquired records",
                format!("bad range {}..={}", r.first_offset, r.last_offset),
            ));
        }
        total = total.saturating_add((r.last_offset - r.first_offset) as u64 + 1);
        if total > MAX_ACQUIRED_OFFSETS_PER_PARTITION {
            return Err(ProtocolError::malformed(
                "ShareFetch acquired records",
                format!("more than {MAX_ACQUIRED_OFFSETS_PER_PARTITION} acquired offsets"),
            ));
        }
        ranges.push(*r);
    }
    if !ranges
        .windows(2)
        .all(|w| w[0].first_offset < w[1].first_offset)
    {
        ranges.reverse();
        ranges.sort_by_key(|r| r.first_offset);
        ranges.dedup_by_key(|r| r.first_offset);
    }
    // The range holding `offset`: the last one starting at or before it.
    let range_of = |offset: i64| -> Option<i16> {
        let i = ranges.partition_point(|r| r.first_offset <= offset);
        (i > 0 && offset <= ranges[i - 1].last_offset).then(|| ranges[i - 1].delivery_count)
    };
    let mut out = DecodedPartition::default();
    let batches = match records {
        Some(bytes) if !bytes.is_empty() => RecordBatchView::parse_all(bytes)?,
        _ => Vec::new(),
    };
    // Records come in increasing offset order from a well-behaved broker;
    // a repeated or out-of-order offset is handled after the loop.
    let mut in_order = true;
    let mut last: Option<i64> = None;
    for batch in &batches {
        if batch.is_control() {
            continue;
        }
        let timestamp_type = if batch.is_log_append_time() {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        };
        for rec in batch.record_iter(max_decompressed)? {
            let rec = rec?;
            let offset = rec.offset(batch.base_offset());
            let Some(delivery_count) = range_of(offset) else {
                continue;
            };
            if last.is_some_and(|l| offset <= l) {
                in_order = false;
            }
            last = Some(offset);
            out.records.push(ShareRecord {
                topic: tp.topic.clone(),
                topic_id: tp.topic_id,
                partition: tp.partition,
                offset,
                delivery_count,
                key: rec.key,
                value: rec.value,
                headers: rec.headers,
                timestamp: rec.timestamp,
                timestamp_type,
                acquired_at,
            });
        }
    }
    if !in_order {
        // The first record of an offset stands.
        out.records.sort_by_key(|r| r.offset);
        out.records.dedup_by_key(|r| r.offset);
    }
    // Gaps: acquired offsets no record was delivered for, by one walk over
    // the ranges and the (sorted) records.
    for r in &ranges {
        let mut next = out.records.partition_point(|x| x.offset < r.first_offset);
        for offset in r.first_offset..=r.last_offset {
            while next < out.records.len() && out.records[next].offset < offset {
                next += 1;
            }
            if next >= out.records.len() || out.records[next].offset != offset {
                out.gaps.push(offset);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::records::batch::set_base_offset;
    use crate::protocol::records::{BatchSpec, Record, control_batch, encode_batch};
    use bytes::BytesMut;

    fn tp() -> TopicIdPartition {
        TopicIdPartition {
            topic_id: Uuid::from_u128(7),
            topic: "t".into(),
            partition: 0,
        }
    }

    fn batch(base: i64, n: i32) -> Bytes {
        let spec = BatchSpec {
            base_offset: base,
            ..BatchSpec::default()
        };
        let recs: Vec<Record> = (0..n)
            .map(|i| {
                Record::new(
                    i,
                    1000 + i as i64,
                    None,
                    Some(Bytes::from(format!("v{}", base + i as i64))),
                )
                .with_header("h", Some(Bytes::from_static(b"1")))
                .with_header("h", None)
            })
            .collect();
        encode_batch(&spec, &recs).unwrap()
    }

    #[test]
    fn acquired_offsets_with_data_are_records_others_are_gaps() {
        // Batch 0..=4, a commit marker at 5, batch 6..=7.
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&batch(0, 5));
        let mut marker = BytesMut::from(&control_batch(true, 1, 0, 0, 1000)[..]);
        set_base_offset(&mut marker, 5);
        wire.extend_from_slice(&marker);
        wire.extend_from_slice(&batch(6, 2));
        let acquired = [
            AcquiredRange {
                first_offset: 2,
                last_offset: 6,
                delivery_count: 1,
            },
            AcquiredRange {
                first_offset: 7,
                last_offset: 9,
                delivery_count: 3,
            },
        ];
        let d = decode_partition(
            &tp(),
            Some(wire.freeze()),
            &acquired,
            1 << 20,
            tokio::time::Instant::now(),
        )
        .unwrap();
        let offsets: Vec<i64> = d.records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, [2, 3, 4, 6, 7], "0 and 1 are not acquired");
        assert_eq!(d.gaps, [5, 8, 9], "marker and offsets without data");
        assert_eq!(d.records[4].delivery_count, 3);
        assert_eq!(d.records[0].value.as_deref(), Some(&b"v2"[..]));
        assert_eq!(d.records[0].headers.len(), 2, "duplicate header keys kept");
        assert_eq!(d.records[0].timestamp, 1002);
    }

    #[test]
    fn repeated_records_and_unordered_ranges_give_each_offset_once() {
        // Offsets 3 and 4 come twice (a broker resending a batch), and the
        // ranges arrive out of order.
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&batch(0, 5));
        wire.extend_from_slice(&batch(3, 4));
        let acquired = [
            AcquiredRange {
                first_offset: 5,
                last_offset: 9,
                delivery_count: 2,
            },
            AcquiredRange {
                first_offset: 0,
                last_offset: 3,
                delivery_count: 1,
            },
        ];
        let d = decode_partition(
            &tp(),
            Some(wire.freeze()),
            &acquired,
            1 << 20,
            tokio::time::Instant::now(),
        )
        .unwrap();
        let offsets: Vec<i64> = d.records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, [0, 1, 2, 3, 5, 6], "4 is not acquired");
        let counts: Vec<i16> = d.records.iter().map(|r| r.delivery_count).collect();
        assert_eq!(counts, [1, 1, 1, 1, 2, 2]);
        assert_eq!(d.gaps, [7, 8, 9]);
    }

    #[test]
    fn absurd_ranges_are_refused() {
        let huge = [AcquiredRange {
            first_offset: 0,
            last_offset: i64::MAX,
            delivery_count: 1,
        }];
        assert!(
            decode_partition(&tp(), None, &huge, 1 << 20, tokio::time::Instant::now()).is_err()
        );
        let backwards = [AcquiredRange {
            first_offset: 5,
            last_offset: 4,
            delivery_count: 1,
        }];
        assert!(
            decode_partition(
                &tp(),
                None,
                &backwards,
                1 << 20,
                tokio::time::Instant::now()
            )
            .is_err()
        );
    }
}
