//! Zero-copy view of a magic v2 record batch header.
//!
//! The broker validates a batch and assigns its base offset without decoding
//! a single record: [`RecordBatchView`] reads the fixed 61-byte header in
//! place, checks the CRC-32C, and [`set_base_offset`] rewrites the first
//! eight bytes (the CRC covers attributes onward, so it stays valid).
//!
//! ```text
//! offset  size  field
//!      0     8  baseOffset
//!      8     4  batchLength           (bytes after this field)
//!     12     4  partitionLeaderEpoch
//!     16     1  magic                 (2)
//!     17     4  crc                   (CRC-32C of bytes 21..end)
//!     21     2  attributes
//!     23     4  lastOffsetDelta
//!     27     8  baseTimestamp
//!     35     8  maxTimestamp
//!     43     8  producerId
//!     51     2  producerEpoch
//!     53     4  baseSequence
//!     57     4  recordsCount
//!     61        records...
//! ```

use bytes::Bytes;

use crate::ProtocolError;

/// Size of the fixed batch header.
pub const BATCH_HEADER_SIZE: usize = 61;
/// Bytes before `batchLength` counts: baseOffset and batchLength itself.
pub const BATCH_LOG_OVERHEAD: usize = 12;
/// Offset of the CRC field.
pub const CRC_OFFSET: usize = 17;
/// Offset of the attributes field, where the CRC coverage starts.
pub const ATTRIBUTES_OFFSET: usize = 21;
/// Offset of `partitionLeaderEpoch`.
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
/// Offset of `maxTimestamp`.
pub const MAX_TIMESTAMP_OFFSET: usize = 35;

/// No producer id.
pub const NO_PRODUCER_ID: i64 = -1;
/// No producer epoch.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// No sequence.
pub const NO_SEQUENCE: i32 = -1;

/// Compression codec, attribute bits 0-2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// gzip.
    Gzip,
    /// snappy, in Java's xerial framing.
    Snappy,
    /// lz4, Kafka's frame format.
    Lz4,
    /// zstd.
    Zstd,
}

impl Compression {
    /// From the attribute bits.
    pub fn from_attributes(attributes: i16) -> Result<Self, ProtocolError> {
        match attributes & 0x07 {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(ProtocolError::malformed(
                "record batch",
                format!("unknown compression codec {other}"),
            )),
        }
    }

    /// The attribute bits.
    pub fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// Kafka's `compression.type` name.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// Parses Kafka's `compression.type` name.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "none" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }
}

/// Attribute bit: timestamps are LogAppendTime.
pub const ATTR_LOG_APPEND_TIME: i16 = 0x08;
/// Attribute bit: the batch belongs to a transaction.
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
/// Attribute bit: the batch holds a control record.
pub const ATTR_CONTROL: i16 = 0x20;
/// Attribute bit: the batch has a delete horizon (KIP-534).
pub const ATTR_DELETE_HORIZON: i16 = 0x40;

/// A validated magic v2 record batch, viewed in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordBatchView {
    bytes: Bytes,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

impl RecordBatchView {
    /// Splits the first batch off `buf` and checks its framing, magic and
    /// record count bounds (not the CRC; see [`Self::verify_crc`]).
    ///
    /// Returns `Ok(None)` when `buf` holds less than a whole batch (a
    /// partial batch at the end of a fetch response or a torn log tail).
    pub fn split_from(buf: &mut Bytes) -> Result<Option<Self>, ProtocolError> {
        if buf.len() < BATCH_LOG_OVERHEAD {
            return Ok(None);
        }
        let batch_length = be_i32(buf, 8);
        if batch_length < (BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD) as i32 {
            return Err(ProtocolError::malformed(
                "record batch",
                format!("batch length {batch_length} is smaller than a batch header"),
            ));
        }
        let total = BATCH_LOG_OVERHEAD + batch_length as usize;
        if buf.len() < total {
            // Check the magic early when we can, so garbage is not mistaken
            // for an incomplete batch forever.
            if buf.len() > 16 && buf[16] != 2 {
                return Err(ProtocolError::malformed(
                    "record batch",
                    format!("unsupported magic {}", buf[16] as i8),
                ));
            }
            return Ok(None);
        }
        let bytes = buf.split_to(total);
        let view = RecordBatchView { bytes };
        if view.magic() != 2 {
            return Err(ProtocolError::malformed(
                "record batch",
                format!("unsupported magic {}", view.magic()),
            ));
        }
        if view.records_count() < 0 {
            return Err(ProtocolError::malformed(
                "record batch",
                format!("negative record count {}", view.records_count()),
            ));
        }
        if view.last_offset_delta() < 0 {
            return Err(ProtocolError::malformed(
                "record batch",
                format!("negative last offset delta {}", view.last_offset_delta()),
            ));
        }
        Compression::from_attributes(view.attributes())?;
        Ok(Some(view))
    }

    /// Parses every batch in `buf`; a trailing partial batch is an error.
    pub fn parse_all(mut buf: Bytes) -> Result<Vec<Self>, ProtocolError> {
        let mut out = Vec::new();
        while !buf.is_empty() {
            match Self::split_from(&mut buf)? {
                Some(b) => out.push(b),
                None => {
                    return Err(ProtocolError::malformed(
                        "record batch",
                        format!("{} trailing bytes do not form a whole batch", buf.len()),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// The whole batch as on the wire.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Consumes the view, returning the bytes.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Total size in bytes.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// baseOffset.
    pub fn base_offset(&self) -> i64 {
        be_i64(&self.bytes, 0)
    }
    /// batchLength.
    pub fn batch_length(&self) -> i32 {
        be_i32(&self.bytes, 8)
    }
    /// partitionLeaderEpoch.
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(&self.bytes, PARTITION_LEADER_EPOCH_OFFSET)
    }
    /// magic.
    pub fn magic(&self) -> i8 {
        self.bytes[16] as i8
    }
    /// The stored CRC.
    pub fn crc(&self) -> u32 {
        be_u32(&self.bytes, CRC_OFFSET)
    }
    /// attributes.
    pub fn attributes(&self) -> i16 {
        be_i16(&self.bytes, ATTRIBUTES_OFFSET)
    }
    /// lastOffsetDelta.
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(&self.bytes, 23)
    }
    /// The last offset in the batch (wrapping, so a hostile baseOffset
    /// cannot panic).
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .wrapping_add(self.last_offset_delta() as i64)
    }
    /// baseTimestamp.
    pub fn base_timestamp(&self) -> i64 {
        be_i64(&self.bytes, 27)
    }
    /// The delete horizon a log cleaner wrote (KIP-534: attribute bit
    /// `0x40`, held in the baseTimestamp field), if any.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes() & ATTR_DELETE_HORIZON != 0).then(|| self.base_timestamp())
    }
    /// maxTimestamp.
    pub fn max_timestamp(&self) -> i64 {
        be_i64(&self.bytes, MAX_TIMESTAMP_OFFSET)
    }
    /// producerId.
    pub fn producer_id(&self) -> i64 {
        be_i64(&self.bytes, 43)
    }
    /// producerEpoch.
    pub fn producer_epoch(&self) -> i16 {
        be_i16(&self.bytes, 51)
    }
    /// baseSequence.
    pub fn base_sequence(&self) -> i32 {
        be_i32(&self.bytes, 53)
    }
    /// The last sequence number of the batch (wrapping at i32::MAX as Kafka does).
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        let delta = self.last_offset_delta();
        if base > i32::MAX - delta {
            delta - (i32::MAX - base) - 1
        } else {
            base + delta
        }
    }
    /// recordsCount.
    pub fn records_count(&self) -> i32 {
        be_i32(&self.bytes, 57)
    }
    /// The compression codec.
    pub fn compression(&self) -> Compression {
        Compression::from_attributes(self.attributes()).unwrap_or(Compression::None)
    }
    /// Transactional flag.
    pub fn is_transactional(&self) -> bool {
        self.attributes() & ATTR_TRANSACTIONAL != 0
    }
    /// Control flag (commit/abort markers).
    pub fn is_control(&self) -> bool {
        self.attributes() & ATTR_CONTROL != 0
    }
    /// LogAppendTime flag.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes() & ATTR_LOG_APPEND_TIME != 0
    }
    /// Has a producer id (idempotent or transactional).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id() >= 0
    }
    /// The records section (possibly compressed).
    pub fn records_section(&self) -> Bytes {
        self.bytes.slice(BATCH_HEADER_SIZE..)
    }

    /// Computes the CRC-32C over attributes..end.
    pub fn compute_crc(&self) -> u32 {
        crc32c::crc32c(&self.bytes[ATTRIBUTES_OFFSET..])
    }

    /// Checks the stored CRC; `CORRUPT_MESSAGE` material when it fails.
    pub fn verify_crc(&self) -> Result<(), ProtocolError> {
        let (stored, computed) = (self.crc(), self.compute_crc());
        if stored == computed {
            Ok(())
        } else {
            Err(ProtocolError::malformed(
                "record batch",
                format!("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"),
            ))
        }
    }
}

/// Rewrites baseOffset of the batch at the front of `batch`. The CRC does
/// not cover it, so the batch stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites partitionLeaderEpoch (not covered by the CRC either).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Sets maxTimestamp and the LogAppendTime attribute bit, then recomputes
/// the CRC (both are covered by it).
pub fn set_log_append_time(batch: &mut [u8], timestamp: i64) {
    let attrs = be_i16(batch, ATTRIBUTES_OFFSET) | ATTR_LOG_APPEND_TIME;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attrs.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression as KpCompression, Record, RecordBatchEncoder, RecordEncodeOptions,
        TimestampType,
    };

    fn kp_batch(n: usize, producer_id: i64, base_sequence: i32) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: 0,
                producer_id,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: base_sequence + i as i32,
                timestamp: 1000 + i as i64,
                key: None,
                value: Some(Bytes::from(vec![b'x'; 10])),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: KpCompression::None,
            },
        )
        .unwrap();
        out.freeze()
    }

    #[test]
    fn reads_header_written_by_kafka_protocol() {
        let mut b = kp_batch(3, 7, 40);
        let v = RecordBatchView::split_from(&mut b).unwrap().unwrap();
        assert!(b.is_empty());
        assert_eq!(v.base_offset(), 0);
        assert_eq!(v.last_offset_delta(), 2);
        assert_eq!(v.records_count(), 3);
        assert_eq!(v.producer_id(), 7);
        assert_eq!(v.base_sequence(), 40);
        assert_eq!(v.last_sequence(), 42);
        assert_eq!(v.max_timestamp(), 1002);
        v.verify_crc().unwrap();
    }

    #[test]
    fn base_offset_rewrite_keeps_crc_valid() {
        let b = kp_batch(2, -1, -1);
        let mut m = BytesMut::from(&b[..]);
        set_base_offset(&mut m, 1234);
        set_partition_leader_epoch(&mut m, 9);
        let mut f = m.freeze();
        let v = RecordBatchView::split_from(&mut f).unwrap().unwrap();
        assert_eq!(v.base_offset(), 1234);
        assert_eq!(v.last_offset(), 1235);
        assert_eq!(v.partition_leader_epoch(), 9);
        v.verify_crc().unwrap();
    }

    #[test]
    fn corrupted_byte_fails_crc() {
        let b = kp_batch(2, -1, -1);
        let mut m = BytesMut::from(&b[..]);
        let last = m.len() - 1;
        m[last] ^= 0xff;
        let mut f = m.freeze();
        let v = RecordBatchView::split_from(&mut f).unwrap().unwrap();
        assert!(v.verify_crc().is_err());
    }

    #[test]
    fn partial_batch_needs_more_bytes() {
        let b = kp_batch(2, -1, -1);
        for cut in 0..b.len() {
            let mut part = b.slice(..cut);
            assert_eq!(
                RecordBatchView::split_from(&mut part).unwrap(),
                None,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn last_sequence_wraps() {
        let mut m = BytesMut::from(&kp_batch(3, 1, 0)[..]);
        m[53..57].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        let mut f = m.freeze();
        let v = RecordBatchView::split_from(&mut f).unwrap().unwrap();
        assert_eq!(v.last_sequence(), 0);
    }
}
