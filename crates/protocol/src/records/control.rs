//! Control batches: the COMMIT and ABORT markers that end a transaction.
//!
//! A control batch has the transactional and control attribute bits set,
//! the producer id and epoch of the transaction, and exactly one record:
//!
//! ```text
//! key   = version int16 (0), type int16 (0 = ABORT, 1 = COMMIT, others: KRaft)
//! value = version int16 (0), coordinatorEpoch int32          (markers only)
//! ```
//!
//! [`RecordBatchView::control_type`] reads the marker type straight off an
//! uncompressed batch's first record, without building a [`Record`]; the
//! log calls it during recovery and when it maintains the last stable
//! offset and the aborted-transaction index.

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::RecordBatchView;
use super::builder::{BatchSpec, NO_PARTITION_LEADER_EPOCH, encode_batch};
use super::compression;
use super::record::Record;
use crate::ProtocolError;
use crate::wire::Reader;

/// Version of the control record key we write.
pub const CONTROL_RECORD_KEY_VERSION: i16 = 0;
/// Version of the end-transaction marker value we write.
pub const END_TXN_MARKER_VERSION: i16 = 0;
/// Bound on a compressed control batch's records section when inflated
/// (a marker is a few dozen bytes).
pub const MAX_CONTROL_SECTION: usize = 64 * 1024;

const WHAT: &str = "control record";

/// The type in a control record's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlType {
    /// ABORT marker (0).
    Abort,
    /// COMMIT marker (1).
    Commit,
    /// Any other control record (KRaft's leader change, snapshot header
    /// and footer, ...), kept by its type id.
    Other(i16),
}

impl ControlType {
    /// From the type id on the wire.
    pub fn from_id(id: i16) -> Self {
        match id {
            0 => ControlType::Abort,
            1 => ControlType::Commit,
            other => ControlType::Other(other),
        }
    }

    /// The type id on the wire.
    pub fn id(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
            ControlType::Other(id) => id,
        }
    }

    /// A transaction marker (COMMIT or ABORT).
    pub fn is_txn_marker(self) -> bool {
        matches!(self, ControlType::Abort | ControlType::Commit)
    }
}

/// A decoded end-transaction marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndTxnMarker {
    /// COMMIT or ABORT.
    pub control_type: ControlType,
    /// Epoch of the transaction coordinator that wrote the marker.
    pub coordinator_epoch: i32,
}

/// A control record key.
pub fn control_record_key(control_type: ControlType) -> Bytes {
    let mut b = BytesMut::with_capacity(4);
    b.put_i16(CONTROL_RECORD_KEY_VERSION);
    b.put_i16(control_type.id());
    b.freeze()
}

/// An end-transaction marker value.
pub fn end_txn_marker_value(coordinator_epoch: i32) -> Bytes {
    let mut b = BytesMut::with_capacity(6);
    b.put_i16(END_TXN_MARKER_VERSION);
    b.put_i32(coordinator_epoch);
    b.freeze()
}

/// Parses a control record key into its type.
pub fn parse_control_record_key(key: &[u8]) -> Result<ControlType, ProtocolError> {
    if key.len() < 4 {
        return Err(ProtocolError::malformed(
            WHAT,
            format!(
                "key of {} bytes is shorter than version and type",
                key.len()
            ),
        ));
    }
    let version = i16::from_be_bytes([key[0], key[1]]);
    if version < 0 {
        return Err(ProtocolError::malformed(
            WHAT,
            format!("negative key version {version}"),
        ));
    }
    // Newer versions only append fields: read the type and go on.
    Ok(ControlType::from_id(i16::from_be_bytes([key[2], key[3]])))
}

/// Parses an end-transaction marker value's coordinator epoch.
pub fn parse_end_txn_marker_value(value: &[u8]) -> Result<i32, ProtocolError> {
    if value.len() < 6 {
        return Err(ProtocolError::malformed(
            WHAT,
            format!("marker value of {} bytes is shorter than 6", value.len()),
        ));
    }
    let version = i16::from_be_bytes([value[0], value[1]]);
    if version < 0 {
        return Err(ProtocolError::malformed(
            WHAT,
            format!("negative marker value version {version}"),
        ));
    }
    Ok(i32::from_be_bytes([value[2], value[3], value[4], value[5]]))
}

/// A COMMIT (`commit`) or ABORT marker batch for a producer's transaction,
/// at base offset 0 and partition leader epoch -1 (the log stamps both).
pub fn control_batch(
    commit: bool,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    timestamp: i64,
) -> Bytes {
    let control_type = if commit {
        ControlType::Commit
    } else {
        ControlType::Abort
    };
    let spec = BatchSpec {
        base_offset: 0,
        partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
        producer_id,
        producer_epoch,
        transactional: true,
        control: true,
        ..BatchSpec::default()
    };
    let record = Record::new(
        0,
        timestamp,
        Some(control_record_key(control_type)),
        Some(end_txn_marker_value(coordinator_epoch)),
    );
    encode_batch(&spec, &[record]).expect("a one-record uncompressed batch always encodes")
}

impl RecordBatchView {
    /// The control type of a control batch, read from its first record's
    /// key without decoding the record; `None` for a data batch, an empty
    /// or malformed control batch.
    pub fn control_type(&self) -> Option<ControlType> {
        if !self.is_control() || self.records_count() < 1 {
            return None;
        }
        let section = compression::decompress(
            self.compression(),
            self.records_section(),
            MAX_CONTROL_SECTION,
        )
        .ok()?;
        let mut r = Reader::new(section);
        let len = r.varint("control record length").ok()?;
        let mut body = Reader::new(r.bytes(usize::try_from(len).ok()?, "control record").ok()?);
        body.i8("attributes").ok()?;
        body.varlong("timestampDelta").ok()?;
        body.varint("offsetDelta").ok()?;
        let key_len = usize::try_from(body.varint("key length").ok()?).ok()?;
        let key = body.bytes(key_len, "key").ok()?;
        parse_control_record_key(&key).ok()
    }

    /// The end-transaction marker of a COMMIT or ABORT batch; `Ok(None)`
    /// for data batches and other control records.
    pub fn end_txn_marker(&self) -> Result<Option<EndTxnMarker>, ProtocolError> {
        if !self.is_control() {
            return Ok(None);
        }
        let record = self
            .record_iter(MAX_CONTROL_SECTION)?
            .next()
            .ok_or_else(|| ProtocolError::malformed(WHAT, "control batch without a record"))??;
        let key = record
            .key
            .ok_or_else(|| ProtocolError::malformed(WHAT, "null control record key"))?;
        let control_type = parse_control_record_key(&key)?;
        if !control_type.is_txn_marker() {
            return Ok(None);
        }
        let value = record
            .value
            .ok_or_else(|| ProtocolError::malformed(WHAT, "null marker value"))?;
        Ok(Some(EndTxnMarker {
            control_type,
            coordinator_epoch: parse_end_txn_marker_value(&value)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Compression;

    fn view(b: Bytes) -> RecordBatchView {
        let mut b = b;
        let v = RecordBatchView::split_from(&mut b).unwrap().unwrap();
        assert!(b.is_empty());
        v
    }

    #[test]
    fn golden_commit_marker_bytes() {
        let b = control_batch(true, 5, 2, 7, 1000);
        // Record: length 16, attributes 0, timestampDelta 0, offsetDelta 0,
        // keyLength 4, key {0, 1}, valueLength 6, value {0, 7}, no headers.
        let record: [u8; 17] = [
            0x20, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x0c, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x07, 0x00,
        ];
        assert_eq!(b.len(), 61 + 17);
        assert_eq!(&b[61..], &record);
        let mut header = Vec::new();
        header.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
        header.extend_from_slice(&66i32.to_be_bytes()); // batchLength
        header.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
        header.push(2); // magic
        let crc = crc32c::crc32c(&b[21..]);
        header.extend_from_slice(&crc.to_be_bytes());
        header.extend_from_slice(&0x30i16.to_be_bytes()); // transactional | control
        header.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
        header.extend_from_slice(&1000i64.to_be_bytes()); // baseTimestamp
        header.extend_from_slice(&1000i64.to_be_bytes()); // maxTimestamp
        header.extend_from_slice(&5i64.to_be_bytes()); // producerId
        header.extend_from_slice(&2i16.to_be_bytes()); // producerEpoch
        header.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
        header.extend_from_slice(&1i32.to_be_bytes()); // recordsCount
        assert_eq!(&b[..61], &header[..]);
    }

    #[test]
    fn golden_abort_marker_key_and_value() {
        let b = control_batch(false, 9, 0, -3, 0);
        let v = view(b);
        let recs = v.records(1024).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(&recs[0].key.as_ref().unwrap()[..], &[0, 0, 0, 0]);
        assert_eq!(
            &recs[0].value.as_ref().unwrap()[..],
            &[0, 0, 0xff, 0xff, 0xff, 0xfd]
        );
        assert!(recs[0].headers.is_empty());
    }

    #[test]
    fn markers_parse_cheaply_and_fully() {
        for commit in [true, false] {
            let v = view(control_batch(commit, 42, 3, 11, 77));
            v.verify_crc().unwrap();
            assert!(v.is_control() && v.is_transactional());
            assert_eq!(v.producer_id(), 42);
            assert_eq!(v.producer_epoch(), 3);
            let expected = if commit {
                ControlType::Commit
            } else {
                ControlType::Abort
            };
            assert_eq!(v.control_type(), Some(expected));
            assert_eq!(
                v.end_txn_marker().unwrap(),
                Some(EndTxnMarker {
                    control_type: expected,
                    coordinator_epoch: 11
                })
            );
        }
    }

    #[test]
    fn data_batches_have_no_control_type() {
        let spec = BatchSpec::default();
        let b = encode_batch(
            &spec,
            &[Record::new(0, 1, None, Some(Bytes::from_static(b"v")))],
        )
        .unwrap();
        let v = view(b);
        assert_eq!(v.control_type(), None);
        assert_eq!(v.end_txn_marker().unwrap(), None);
    }

    #[test]
    fn other_control_types_and_compressed_markers() {
        // A KRaft-style leader change record, compressed.
        let spec = BatchSpec {
            control: true,
            compression: Compression::Lz4,
            ..BatchSpec::default()
        };
        let rec = Record::new(0, 5, Some(control_record_key(ControlType::Other(2))), None);
        let v = view(encode_batch(&spec, &[rec]).unwrap());
        assert_eq!(v.control_type(), Some(ControlType::Other(2)));
        assert_eq!(v.end_txn_marker().unwrap(), None);
    }

    #[test]
    fn short_or_negative_keys_are_refused() {
        assert!(parse_control_record_key(&[0, 0, 1]).is_err());
        assert!(parse_control_record_key(&[0xff, 0xff, 0, 1]).is_err());
        // A newer key version with extra bytes still yields its type.
        assert_eq!(
            parse_control_record_key(&[0, 1, 0, 1, 9, 9]).unwrap(),
            ControlType::Commit
        );
        assert!(parse_end_txn_marker_value(&[0, 0, 0, 0, 0]).is_err());
    }
}
