//! Reading transaction markers out of control batches.
//!
//! A marker is a control batch (attribute bit 0x20) holding one record whose
//! key is `version i16, type i16` (0 = ABORT, 1 = COMMIT) and whose value is
//! `version i16, coordinatorEpoch i32`. Control batches are written
//! uncompressed, so the first record is read in place: length varint,
//! attributes i8, timestampDelta varlong, offsetDelta varint, key length
//! varint, key, value length varint, value.

use bytes::Bytes;

use sharestream_protocol::records::batch::BATCH_HEADER_SIZE;
use sharestream_protocol::records::{Compression, RecordBatchView};
use sharestream_protocol::wire::Reader;

/// The kind of a transaction marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlType {
    /// ABORT marker (control type 0).
    Abort,
    /// COMMIT marker (control type 1).
    Commit,
}

impl ControlType {
    /// The control record type as on the wire.
    pub fn code(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
        }
    }
}

/// A parsed transaction marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// COMMIT or ABORT.
    pub control_type: ControlType,
    /// The transaction coordinator's epoch that wrote it (-1 when the value
    /// is absent).
    pub coordinator_epoch: i32,
}

/// Reads the marker in a control batch. Errors name what is wrong.
pub fn parse_end_txn_marker(batch: &RecordBatchView) -> Result<EndTxnMarker, String> {
    if !batch.is_control() {
        return Err("not a control batch".into());
    }
    if batch.compression() != Compression::None {
        return Err("compressed control batch".into());
    }
    if batch.records_count() < 1 {
        return Err("control batch without records".into());
    }
    let body: Bytes = batch.bytes().slice(BATCH_HEADER_SIZE..);
    let mut r = Reader::new(body);
    let e = |err: sharestream_protocol::ProtocolError| err.to_string();
    let _length = r.varint("control record length").map_err(e)?;
    let _attributes = r.i8("control record attributes").map_err(e)?;
    let _ts_delta = r.varlong("control record timestamp delta").map_err(e)?;
    let _offset_delta = r.varint("control record offset delta").map_err(e)?;
    let key_len = r.varint("control record key length").map_err(e)?;
    if key_len < 4 {
        return Err(format!("control record key of {key_len} bytes"));
    }
    let mut key = Reader::new(r.bytes(key_len as usize, "control record key").map_err(e)?);
    let _key_version = key.i16("control key version").map_err(e)?;
    let control_type = match key.i16("control key type").map_err(e)? {
        0 => ControlType::Abort,
        1 => ControlType::Commit,
        other => return Err(format!("control type {other} is not a transaction marker")),
    };
    let value_len = r.varint("control record value length").map_err(e)?;
    let coordinator_epoch = if value_len >= 6 {
        let mut value = Reader::new(
            r.bytes(value_len as usize, "control record value")
                .map_err(e)?,
        );
        let _value_version = value.i16("marker value version").map_err(e)?;
        value.i32("marker coordinator epoch").map_err(e)?
    } else {
        -1
    };
    Ok(EndTxnMarker {
        control_type,
        coordinator_epoch,
    })
}
