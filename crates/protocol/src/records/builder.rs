//! Encoding a complete magic v2 batch.
//!
//! [`encode_batch`] takes the batch-level fields ([`BatchSpec`]) and the
//! records, and derives the rest the way Kafka's `MemoryRecordsBuilder`
//! does: baseTimestamp is the first record's timestamp, maxTimestamp the
//! largest, lastOffsetDelta the last record's offset delta, recordsCount
//! the number of records; batchLength and the CRC-32C (attributes to the
//! end) are filled in last. Record offset deltas must strictly increase.
//!
//! [`BatchBuilder`] is the producer-side convenience: it numbers records
//! 0, 1, 2... as they are appended.

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{
    ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL, ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE, BATCH_LOG_OVERHEAD, CRC_OFFSET, Compression, NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID, NO_SEQUENCE,
};
use super::compression;
use super::record::{Record, RecordHeader, RecordView, put_record, record_size_bound};
use crate::ProtocolError;

/// No partition leader epoch (the broker stamps it on append).
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// No timestamp (an empty batch's base and max timestamps).
pub const NO_TIMESTAMP: i64 = -1;

const WHAT: &str = "record batch";

/// What a batch's timestamps mean (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// Set by the producer.
    #[default]
    CreateTime,
    /// Set by the broker on append (maxTimestamp holds it).
    LogAppendTime,
}

/// Batch-level fields of a batch to encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSpec {
    /// baseOffset (0 from a producer; the broker rewrites it).
    pub base_offset: i64,
    /// partitionLeaderEpoch.
    pub partition_leader_epoch: i32,
    /// producerId, -1 for none.
    pub producer_id: i64,
    /// producerEpoch, -1 for none.
    pub producer_epoch: i16,
    /// baseSequence, -1 for none.
    pub base_sequence: i32,
    /// Part of a transaction.
    pub transactional: bool,
    /// Holds a control record (see [`super::control`]).
    pub control: bool,
    /// The meaning of the timestamps.
    pub timestamp_type: TimestampType,
    /// Codec of the records section.
    pub compression: Compression,
    /// lastOffsetDelta to write instead of the last record's delta, for a
    /// batch whose tail records were removed by compaction (or an empty
    /// batch that keeps its offset range). Must not be below the last
    /// record's delta.
    pub last_offset_delta: Option<i32>,
}

impl Default for BatchSpec {
    fn default() -> Self {
        Self {
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            timestamp_type: TimestampType::CreateTime,
            compression: Compression::None,
            last_offset_delta: None,
        }
    }
}

impl BatchSpec {
    /// The attributes field this spec encodes to.
    pub fn attributes(&self) -> i16 {
        let mut a = self.compression.attribute_bits();
        if self.timestamp_type == TimestampType::LogAppendTime {
            a |= ATTR_LOG_APPEND_TIME;
        }
        if self.transactional {
            a |= ATTR_TRANSACTIONAL;
        }
        if self.control {
            a |= ATTR_CONTROL;
        }
        a
    }
}

/// Encodes one complete batch.
///
/// An empty `records` gives a batch with recordsCount 0 and timestamps -1
/// (legal only as what compaction leaves behind; brokers refuse it from
/// producers).
pub fn encode_batch(spec: &BatchSpec, records: &[Record]) -> Result<Bytes, ProtocolError> {
    encode(spec, records, None)
}

/// Encodes one complete batch carrying a delete horizon (KIP-534), as a
/// log cleaner writes a batch that keeps tombstones or a transaction
/// marker: the attribute bit `0x40` is set and the baseTimestamp field
/// holds `delete_horizon_ms`, the time after which the cleaner may remove
/// them; record timestamp deltas are relative to it, so every record's
/// timestamp decodes unchanged.
pub fn encode_batch_with_delete_horizon(
    spec: &BatchSpec,
    records: &[Record],
    delete_horizon_ms: i64,
) -> Result<Bytes, ProtocolError> {
    encode(spec, records, Some(delete_horizon_ms))
}

/// [`encode_batch`] over records the caller holds in its own form (see
/// [`RecordView`]).
pub fn encode_batch_of<V: RecordView>(
    spec: &BatchSpec,
    records: &[V],
) -> Result<Bytes, ProtocolError> {
    encode(spec, records, None)
}

fn encode<V: RecordView>(
    spec: &BatchSpec,
    records: &[V],
    delete_horizon_ms: Option<i64>,
) -> Result<Bytes, ProtocolError> {
    let count = i32::try_from(records.len())
        .map_err(|_| ProtocolError::malformed(WHAT, "more than i32::MAX records"))?;
    let mut prev: Option<i32> = None;
    let mut size_bound = BATCH_HEADER_SIZE;
    for r in records {
        let delta = r.offset_delta();
        if delta < 0 || prev.is_some_and(|p| delta <= p) {
            return Err(ProtocolError::malformed(
                WHAT,
                format!(
                    "record offset delta {delta} after {prev:?}: deltas must be non-negative and strictly increasing"
                ),
            ));
        }
        prev = Some(delta);
        size_bound += record_size_bound(r);
    }
    let last_record_delta = prev.unwrap_or(0);
    let last_offset_delta = match spec.last_offset_delta {
        Some(d) if d < last_record_delta => {
            return Err(ProtocolError::malformed(
                WHAT,
                format!("lastOffsetDelta {d} is below the last record's delta {last_record_delta}"),
            ));
        }
        Some(d) => d,
        None => last_record_delta,
    };
    let (mut base_timestamp, max_timestamp) = match records.first() {
        None => (NO_TIMESTAMP, NO_TIMESTAMP),
        Some(first) => (
            first.timestamp(),
            records
                .iter()
                .map(|r| r.timestamp())
                .max()
                .unwrap_or(first.timestamp()),
        ),
    };
    let mut attributes = spec.attributes();
    if let Some(horizon) = delete_horizon_ms {
        base_timestamp = horizon;
        attributes |= ATTR_DELETE_HORIZON;
    }

    // Sized once: growing a 16 KiB batch by doubling copied it about twice.
    let capacity = if spec.compression == Compression::None {
        size_bound
    } else {
        BATCH_HEADER_SIZE + size_bound / 2
    };
    let mut out = BytesMut::with_capacity(capacity);
    out.put_i64(spec.base_offset);
    out.put_i32(0); // batchLength, filled below
    out.put_i32(spec.partition_leader_epoch);
    out.put_i8(2);
    out.put_u32(0); // crc, filled below
    out.put_i16(attributes);
    out.put_i32(last_offset_delta);
    out.put_i64(base_timestamp);
    out.put_i64(max_timestamp);
    out.put_i64(spec.producer_id);
    out.put_i16(spec.producer_epoch);
    out.put_i32(spec.base_sequence);
    out.put_i32(count);
    debug_assert_eq!(out.len(), BATCH_HEADER_SIZE);

    if spec.compression == Compression::None {
        for r in records {
            put_record(&mut out, r, base_timestamp)?;
        }
    } else {
        let mut body = BytesMut::with_capacity(size_bound);
        for r in records {
            put_record(&mut body, r, base_timestamp)?;
        }
        out.put_slice(&compression::compress(spec.compression, &body)?);
    }

    let batch_length = i32::try_from(out.len() - BATCH_LOG_OVERHEAD)
        .map_err(|_| ProtocolError::malformed(WHAT, "batch larger than i32::MAX bytes"))?;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

/// Producer-side batch builder: appends records with consecutive offset
/// deltas, then encodes them with [`encode_batch`].
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    spec: BatchSpec,
    records: Vec<Record>,
}

impl BatchBuilder {
    /// A builder for a batch with these batch-level fields.
    pub fn new(spec: BatchSpec) -> Self {
        Self {
            spec,
            records: Vec::new(),
        }
    }

    /// Appends a record at the next offset delta.
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<Bytes>,
        value: Option<Bytes>,
        headers: Vec<RecordHeader>,
    ) -> &mut Self {
        let offset_delta = self.records.len() as i32;
        self.records.push(Record {
            offset_delta,
            timestamp,
            key,
            value,
            headers,
        });
        self
    }

    /// Records appended so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// No record appended yet.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Encodes the batch.
    pub fn build(&self) -> Result<Bytes, ProtocolError> {
        encode_batch(&self.spec, &self.records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller's own record: timestamp, key, value, headers.
    type Own = (i64, Vec<u8>, Option<Vec<u8>>, Vec<RecordHeader>);

    /// A caller's own record at its offset delta, read in place.
    struct Held<'a>(i32, &'a Own);

    impl RecordView for Held<'_> {
        fn offset_delta(&self) -> i32 {
            self.0
        }
        fn timestamp(&self) -> i64 {
            self.1.0
        }
        fn key(&self) -> Option<&[u8]> {
            Some(&self.1.1)
        }
        fn value(&self) -> Option<&[u8]> {
            self.1.2.as_deref()
        }
        fn headers(&self) -> &[RecordHeader] {
            &self.1.3
        }
    }

    #[test]
    fn a_borrowed_view_encodes_exactly_as_owned_records() {
        let held: Vec<Own> = (0..300)
            .map(|i| {
                let headers = if i % 7 == 0 {
                    vec![RecordHeader {
                        key: format!("h{i}"),
                        value: (i % 2 == 0).then(|| Bytes::from(vec![1u8; i])),
                    }]
                } else {
                    Vec::new()
                };
                let value = (i % 5 != 0).then(|| vec![b'v'; 40 + i * 3]);
                (1_000 + i as i64 % 13, vec![b'k'; i % 4], value, headers)
            })
            .collect();
        let owned: Vec<Record> = held
            .iter()
            .enumerate()
            .map(|(i, h)| Record {
                offset_delta: i as i32,
                timestamp: h.0,
                key: Some(Bytes::from(h.1.clone())),
                value: h.2.clone().map(Bytes::from),
                headers: h.3.clone(),
            })
            .collect();
        let views: Vec<Held<'_>> = held
            .iter()
            .enumerate()
            .map(|(i, h)| Held(i as i32, h))
            .collect();
        for compression in [Compression::None, Compression::Lz4] {
            let spec = BatchSpec {
                compression,
                producer_id: 7,
                base_sequence: 3,
                ..BatchSpec::default()
            };
            let a = encode_batch(&spec, &owned).unwrap();
            let b = encode_batch_of(&spec, &views).unwrap();
            assert_eq!(a, b, "{compression:?}");
        }
        // The size bound is a bound: no record encodes to more.
        for r in &owned {
            let mut out = BytesMut::new();
            put_record(&mut out, r, 1_000).unwrap();
            assert!(out.len() <= record_size_bound(r), "{} > bound", out.len());
        }
    }
}
