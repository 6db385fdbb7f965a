//! Records inside a magic v2 batch, and decoding a batch into them.
//!
//! ```text
//! length          varint   (bytes after this field)
//! attributes      int8     (unused, 0)
//! timestampDelta  varlong  (from the batch's baseTimestamp)
//! offsetDelta     varint   (from the batch's baseOffset)
//! keyLength       varint   (-1 = null key)
//! key             bytes
//! valueLength     varint   (-1 = null value)
//! value           bytes
//! headersCount    varint
//! headers         [headerKeyLength varint, headerKey, headerValueLength varint (-1 = null), headerValue]
//! ```
//!
//! Headers are an ordered list: duplicate keys are kept, in order, as
//! KIP-82 requires.
//!
//! Decoding trusts nothing it reads: a count is never used to size an
//! allocation beyond what the remaining bytes could hold, every length is
//! checked against the bytes left, a record must consume exactly its
//! `length`, and the records section must hold exactly `recordsCount`
//! records with no trailing bytes. Compressed sections are inflated with a
//! caller-given bound (see [`super::compression`]).

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::RecordBatchView;
use super::compression;
use crate::ProtocolError;
use crate::wire::{Reader, put_varint, put_varlong, varint_size, varlong_size};

const WHAT: &str = "record";

/// The smallest encoded record: length, attributes, timestampDelta,
/// offsetDelta, keyLength, valueLength and headersCount of one byte each.
pub const MIN_RECORD_SIZE: usize = 7;
/// The smallest encoded header: keyLength and valueLength of one byte each.
pub const MIN_HEADER_SIZE: usize = 2;

/// A record header (KIP-82). Keys may repeat within a record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordHeader {
    /// Header key. Invalid UTF-8 on the wire is replaced by U+FFFD, as the
    /// Java client does.
    pub key: String,
    /// Header value; `None` is a null value.
    pub value: Option<Bytes>,
}

impl RecordHeader {
    /// A header.
    pub fn new(key: impl Into<String>, value: Option<Bytes>) -> Self {
        Self {
            key: key.into(),
            value,
        }
    }
}

/// One record of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Record {
    /// Offset relative to the batch's baseOffset. Within a batch, deltas
    /// strictly increase (a compacted batch may have gaps).
    pub offset_delta: i32,
    /// Absolute timestamp in milliseconds. For a LogAppendTime batch the
    /// decoder reports the batch's maxTimestamp, as Kafka's consumer does.
    pub timestamp: i64,
    /// Record key; `None` is a null key.
    pub key: Option<Bytes>,
    /// Record value; `None` is a null value (a tombstone).
    pub value: Option<Bytes>,
    /// Headers in wire order, duplicates kept.
    pub headers: Vec<RecordHeader>,
}

impl Record {
    /// A record without headers.
    pub fn new(
        offset_delta: i32,
        timestamp: i64,
        key: Option<Bytes>,
        value: Option<Bytes>,
    ) -> Self {
        Self {
            offset_delta,
            timestamp,
            key,
            value,
            headers: Vec::new(),
        }
    }

    /// Appends a header (duplicates are kept).
    pub fn with_header(mut self, key: impl Into<String>, value: Option<Bytes>) -> Self {
        self.headers.push(RecordHeader::new(key, value));
        self
    }

    /// The record's absolute offset in a batch with `base_offset`
    /// (wrapping, so hostile offsets cannot panic).
    pub fn offset(&self, base_offset: i64) -> i64 {
        base_offset.wrapping_add(self.offset_delta as i64)
    }

    /// The record's sequence number in a batch with `base_sequence`
    /// (wrapping at `i32::MAX` as Kafka does); -1 when the batch has none.
    pub fn sequence(&self, base_sequence: i32) -> i32 {
        if base_sequence < 0 {
            return -1;
        }
        let room = i32::MAX - base_sequence;
        if self.offset_delta > room {
            self.offset_delta - room - 1
        } else {
            base_sequence + self.offset_delta
        }
    }
}

fn len_i32(len: usize, what: &str) -> Result<i32, ProtocolError> {
    i32::try_from(len)
        .map_err(|_| ProtocolError::malformed(WHAT, format!("{what} of {len} bytes is too long")))
}

fn nullable_size(b: Option<&[u8]>) -> Result<usize, ProtocolError> {
    Ok(match b {
        None => varint_size(-1),
        Some(b) => varint_size(len_i32(b.len(), "field")?) + b.len(),
    })
}

fn put_nullable(out: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.put_slice(b);
        }
    }
}

/// A record as the batch encoder reads it, by reference: a producer
/// encodes the records it holds without first copying each one into a
/// [`Record`] (which, for a value made from a `Vec`, cost an allocation
/// per record in `Bytes::clone`).
pub trait RecordView {
    /// Offset relative to the batch's baseOffset.
    fn offset_delta(&self) -> i32;
    /// Absolute timestamp in milliseconds.
    fn timestamp(&self) -> i64;
    /// The key; `None` is a null key.
    fn key(&self) -> Option<&[u8]>;
    /// The value; `None` is a null value.
    fn value(&self) -> Option<&[u8]>;
    /// Headers in wire order.
    fn headers(&self) -> &[RecordHeader];
}

impl RecordView for Record {
    fn offset_delta(&self) -> i32 {
        self.offset_delta
    }
    fn timestamp(&self) -> i64 {
        self.timestamp
    }
    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
    fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
    fn headers(&self) -> &[RecordHeader] {
        &self.headers
    }
}

/// The bytes `put_record` writes for `record`, length prefix included
/// or more: the sum of key, value and headers, plus the most that the
/// varints and the attributes byte can take (36 bytes, and 10 per
/// header). It sizes buffers so that they never grow.
pub(crate) fn record_size_bound<V: RecordView>(record: &V) -> usize {
    let headers: usize = record
        .headers()
        .iter()
        .map(|h| 10 + h.key.len() + h.value.as_ref().map_or(0, |v| v.len()))
        .sum();
    36 + record.key().map_or(0, <[u8]>::len) + record.value().map_or(0, <[u8]>::len) + headers
}

/// Appends `record` to `out`, its timestamp relative to `base_timestamp`.
pub(crate) fn put_record<V: RecordView>(
    out: &mut BytesMut,
    record: &V,
    base_timestamp: i64,
) -> Result<(), ProtocolError> {
    let timestamp_delta = record.timestamp().wrapping_sub(base_timestamp);
    let headers_count = len_i32(record.headers().len(), "header list")?;
    let mut body = 1 + varlong_size(timestamp_delta) + varint_size(record.offset_delta());
    body += nullable_size(record.key())?;
    body += nullable_size(record.value())?;
    body += varint_size(headers_count);
    for h in record.headers() {
        body += varint_size(len_i32(h.key.len(), "header key")?) + h.key.len();
        body += nullable_size(h.value.as_deref())?;
    }
    let body_len = len_i32(body, "record")?;
    out.reserve(varint_size(body_len) + body);
    let start = out.len();
    put_varint(out, body_len);
    out.put_i8(0); // attributes
    put_varlong(out, timestamp_delta);
    put_varint(out, record.offset_delta());
    put_nullable(out, record.key());
    put_nullable(out, record.value());
    put_varint(out, headers_count);
    for h in record.headers() {
        put_varint(out, h.key.len() as i32);
        out.put_slice(h.key.as_bytes());
        put_nullable(out, h.value.as_deref());
    }
    debug_assert_eq!(out.len() - start, varint_size(body_len) + body);
    Ok(())
}

fn read_nullable(r: &mut Reader, what: &'static str) -> Result<Option<Bytes>, ProtocolError> {
    // Like Kafka's reader, any negative length means null.
    let len = r.varint(what)?;
    if len < 0 {
        Ok(None)
    } else {
        Ok(Some(r.bytes(len as usize, what)?))
    }
}

/// Reads one record from `r`.
fn read_record(
    r: &mut Reader,
    base_timestamp: i64,
    log_append_time: Option<i64>,
) -> Result<Record, ProtocolError> {
    let len = r.varint("record length")?;
    if len < 0 {
        return Err(ProtocolError::malformed(
            WHAT,
            format!("negative record length {len}"),
        ));
    }
    let mut body = Reader::new(r.bytes(len as usize, "record")?);
    let _attributes = body.i8("record attributes")?;
    let timestamp_delta = body.varlong("record timestampDelta")?;
    let offset_delta = body.varint("record offsetDelta")?;
    let key = read_nullable(&mut body, "record key")?;
    let value = read_nullable(&mut body, "record value")?;
    let count = body.varint("record headers count")?;
    if count < 0 {
        return Err(ProtocolError::malformed(
            WHAT,
            format!("negative header count {count}"),
        ));
    }
    let count = count as usize;
    if count.saturating_mul(MIN_HEADER_SIZE) > body.remaining() {
        return Err(ProtocolError::malformed(
            WHAT,
            format!("{count} headers cannot fit in {} bytes", body.remaining()),
        ));
    }
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        let key_len = body.varint("header key length")?;
        if key_len < 0 {
            return Err(ProtocolError::malformed(
                WHAT,
                format!("negative header key length {key_len}"),
            ));
        }
        let key_bytes = body.bytes(key_len as usize, "header key")?;
        let key = String::from_utf8_lossy(&key_bytes).into_owned();
        let value = read_nullable(&mut body, "header value")?;
        headers.push(RecordHeader { key, value });
    }
    if body.remaining() != 0 {
        return Err(ProtocolError::malformed(
            WHAT,
            format!(
                "{} bytes left over after the record's fields",
                body.remaining()
            ),
        ));
    }
    Ok(Record {
        offset_delta,
        timestamp: log_append_time.unwrap_or(base_timestamp.wrapping_add(timestamp_delta)),
        key,
        value,
        headers,
    })
}

/// Iterator over the records of one batch (see [`RecordBatchView::record_iter`]).
///
/// Yields an error, then stops, when a record is malformed, when the
/// section holds fewer records than `recordsCount`, or when bytes are left
/// over after the last one.
#[derive(Debug, Clone)]
pub struct RecordIter {
    reader: Reader,
    left: usize,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    done: bool,
}

impl RecordIter {
    /// Records still expected according to `recordsCount`.
    pub fn remaining_count(&self) -> usize {
        if self.done { 0 } else { self.left }
    }
}

impl Iterator for RecordIter {
    type Item = Result<Record, ProtocolError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.left == 0 {
            self.done = true;
            if self.reader.remaining() != 0 {
                return Some(Err(ProtocolError::malformed(
                    "record batch",
                    format!(
                        "{} bytes left over after recordsCount records",
                        self.reader.remaining()
                    ),
                )));
            }
            return None;
        }
        if self.reader.remaining() == 0 {
            self.done = true;
            return Some(Err(ProtocolError::malformed(
                "record batch",
                format!(
                    "records section ends {} records short of recordsCount",
                    self.left
                ),
            )));
        }
        self.left -= 1;
        let rec = read_record(&mut self.reader, self.base_timestamp, self.log_append_time);
        if rec.is_err() {
            self.done = true;
        }
        Some(rec)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let upper = self.remaining_count();
        (0, Some(upper.saturating_add(1)))
    }
}

/// A bound for [`RecordBatchView::records`] when nothing better is known:
/// 64 MiB, well above Kafka's default `message.max.bytes` (1 MiB) and
/// `fetch.max.bytes` (50 MiB).
pub const DEFAULT_MAX_DECOMPRESSED: usize = 64 * 1024 * 1024;

impl RecordBatchView {
    /// Decompresses the records section (refusing more than
    /// `max_decompressed` bytes) and iterates over its records.
    ///
    /// The CRC is not checked here; call [`Self::verify_crc`] first for
    /// bytes from the network or from disk.
    pub fn record_iter(&self, max_decompressed: usize) -> Result<RecordIter, ProtocolError> {
        let section =
            compression::decompress(self.compression(), self.records_section(), max_decompressed)?;
        Ok(RecordIter {
            reader: Reader::new(section),
            left: self.records_count().max(0) as usize,
            base_timestamp: self.base_timestamp(),
            log_append_time: self.is_log_append_time().then(|| self.max_timestamp()),
            done: false,
        })
    }

    /// Decodes every record of the batch (see [`Self::record_iter`]).
    pub fn records(&self, max_decompressed: usize) -> Result<Vec<Record>, ProtocolError> {
        let iter = self.record_iter(max_decompressed)?;
        // recordsCount is untrusted: size by what the bytes could hold.
        let cap = iter
            .remaining_count()
            .min(iter.reader.remaining() / MIN_RECORD_SIZE);
        let mut out = Vec::with_capacity(cap);
        for rec in iter {
            out.push(rec?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{BatchSpec, encode_batch};
    use crate::wire::put_uvarint;

    fn one_record_batch(section: &[u8], count: i32) -> RecordBatchView {
        // A valid header around a hand-made records section.
        let spec = BatchSpec::default();
        let empty = encode_batch(&spec, &[]).unwrap();
        let mut b = BytesMut::from(&empty[..]);
        b.put_slice(section);
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        b[57..61].copy_from_slice(&count.to_be_bytes());
        b[27..35].copy_from_slice(&0i64.to_be_bytes()); // baseTimestamp
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let mut f = b.freeze();
        let v = RecordBatchView::split_from(&mut f).unwrap().unwrap();
        v.verify_crc().unwrap();
        v
    }

    fn encoded(r: &Record, base_ts: i64) -> BytesMut {
        let mut out = BytesMut::new();
        put_record(&mut out, r, base_ts).unwrap();
        out
    }

    #[test]
    fn golden_record_with_duplicate_headers() {
        let r = Record::new(1, 105, Some(Bytes::from_static(b"k")), None)
            .with_header("h", Some(Bytes::from_static(b"1")))
            .with_header("h", None);
        let out = encoded(&r, 100);
        let expected: &[u8] = &[
            0x1c, // length 14
            0x00, // attributes
            0x0a, // timestampDelta 5
            0x02, // offsetDelta 1
            0x02, b'k', // key
            0x01, // null value
            0x04, // 2 headers
            0x02, b'h', 0x02, b'1', // h = "1"
            0x02, b'h', 0x01, // h = null
        ];
        assert_eq!(&out[..], expected);
    }

    #[test]
    fn record_count_mismatch_is_an_error() {
        let r = Record::new(0, 0, None, Some(Bytes::from_static(b"v")));
        let sec = encoded(&r, 0);
        assert_eq!(one_record_batch(&sec, 1).records(1024).unwrap(), vec![r]);
        assert!(one_record_batch(&sec, 2).records(1024).is_err());
        assert!(one_record_batch(&sec, 0).records(1024).is_err());
    }

    #[test]
    fn lying_record_count_does_not_allocate() {
        let r = Record::new(0, 0, None, None);
        let sec = encoded(&r, 0);
        let v = one_record_batch(&sec, i32::MAX);
        let iter = v.record_iter(1024).unwrap();
        assert_eq!(iter.remaining_count(), i32::MAX as usize);
        assert!(v.records(1024).is_err());
    }

    #[test]
    fn trailing_bytes_after_records_are_an_error() {
        let r = Record::new(0, 0, None, None);
        let mut sec = encoded(&r, 0);
        sec.put_u8(0);
        assert!(one_record_batch(&sec, 1).records(1024).is_err());
    }

    #[test]
    fn trailing_bytes_inside_a_record_are_an_error() {
        // length says 8, fields take 7.
        let sec = [0x10, 0, 0, 0, 1, 1, 0, 0, 0];
        let err = one_record_batch(&sec, 1).records(1024).unwrap_err();
        assert!(err.to_string().contains("left over"), "{err}");
    }

    #[test]
    fn bad_varints_are_errors() {
        // Overlong length varint.
        let sec = [0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(one_record_batch(&sec, 1).records(1024).is_err());
        // Negative record length.
        let sec = [0x01];
        assert!(one_record_batch(&sec, 1).records(1024).is_err());
        // A header count far beyond the record's bytes.
        let mut sec = BytesMut::new();
        let mut body = BytesMut::from(&[0u8, 0, 0, 1, 1][..]);
        put_uvarint(&mut body, u32::MAX - 1); // zig-zag i32::MAX
        put_varint(&mut sec, body.len() as i32);
        sec.put_slice(&body);
        let err = one_record_batch(&sec, 1).records(1024).unwrap_err();
        assert!(err.to_string().contains("headers cannot fit"), "{err}");
        // Negative header key length.
        let sec = [0x10, 0, 0, 0, 1, 1, 2, 1, 1];
        assert!(one_record_batch(&sec, 1).records(1024).is_err());
    }

    #[test]
    fn invalid_utf8_header_keys_are_replaced_like_java() {
        let sec = [0x12, 0, 0, 0, 1, 1, 2, 2, 0xff, 1];
        let recs = one_record_batch(&sec, 1).records(1024).unwrap();
        assert_eq!(recs[0].headers[0].key, "\u{fffd}");
        assert_eq!(recs[0].headers[0].value, None);
    }

    #[test]
    fn sequence_wraps() {
        let r = Record::new(3, 0, None, None);
        assert_eq!(r.sequence(10), 13);
        assert_eq!(r.sequence(i32::MAX - 1), 1);
        assert_eq!(r.sequence(-1), -1);
        assert_eq!(r.offset(100), 103);
    }
}
