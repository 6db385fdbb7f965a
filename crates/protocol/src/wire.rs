//! Primitive wire types written by hand: fixed-width integers, unsigned
//! varints (flexible versions), zig-zag varints and varlongs (records),
//! compact strings and arrays, UUIDs and tagged fields.
//!
//! [`Reader`] never panics: every read checks the remaining length and a
//! count read off the wire is checked against the bytes left before it is
//! used to size anything.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::error::ProtocolError;

/// A bounds-checked reader over a [`Bytes`] buffer.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
}

fn truncated(what: &'static str) -> ProtocolError {
    ProtocolError::Truncated { what }
}

impl Reader {
    /// Reads from `buf`.
    pub fn new(buf: Bytes) -> Self {
        Self { buf }
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The unread bytes.
    pub fn into_rest(self) -> Bytes {
        self.buf
    }

    /// A read-only view of the unread bytes.
    pub fn rest(&self) -> &Bytes {
        &self.buf
    }

    fn need(&self, n: usize, what: &'static str) -> Result<(), ProtocolError> {
        if self.buf.len() < n {
            Err(truncated(what))
        } else {
            Ok(())
        }
    }

    /// One signed byte.
    pub fn i8(&mut self, what: &'static str) -> Result<i8, ProtocolError> {
        self.need(1, what)?;
        Ok(self.buf.get_i8())
    }

    /// Big-endian i16.
    pub fn i16(&mut self, what: &'static str) -> Result<i16, ProtocolError> {
        self.need(2, what)?;
        Ok(self.buf.get_i16())
    }

    /// Big-endian i32.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, ProtocolError> {
        self.need(4, what)?;
        Ok(self.buf.get_i32())
    }

    /// Big-endian u32.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, ProtocolError> {
        self.need(4, what)?;
        Ok(self.buf.get_u32())
    }

    /// Big-endian i64.
    pub fn i64(&mut self, what: &'static str) -> Result<i64, ProtocolError> {
        self.need(8, what)?;
        Ok(self.buf.get_i64())
    }

    /// A 16-byte UUID.
    pub fn uuid(&mut self, what: &'static str) -> Result<Uuid, ProtocolError> {
        self.need(16, what)?;
        let mut b = [0u8; 16];
        self.buf.copy_to_slice(&mut b);
        Ok(Uuid::from_bytes(b))
    }

    /// `n` raw bytes, zero-copy.
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<Bytes, ProtocolError> {
        self.need(n, what)?;
        Ok(self.buf.split_to(n))
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize, what: &'static str) -> Result<(), ProtocolError> {
        self.need(n, what)?;
        self.buf.advance(n);
        Ok(())
    }

    /// Unsigned LEB128 varint of at most 5 bytes (32 bits).
    pub fn uvarint(&mut self, what: &'static str) -> Result<u32, ProtocolError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.i8(what)? as u8;
            if i == 4 && b > 0x0f {
                return Err(ProtocolError::malformed(what, "varint longer than 32 bits"));
            }
            value |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtocolError::malformed(what, "varint longer than 5 bytes"))
    }

    /// Unsigned LEB128 varlong of at most 10 bytes (64 bits).
    pub fn uvarlong(&mut self, what: &'static str) -> Result<u64, ProtocolError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let b = self.i8(what)? as u8;
            if i == 9 && b > 0x01 {
                return Err(ProtocolError::malformed(
                    what,
                    "varlong longer than 64 bits",
                ));
            }
            value |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtocolError::malformed(
            what,
            "varlong longer than 10 bytes",
        ))
    }

    /// Zig-zag varint (record fields).
    pub fn varint(&mut self, what: &'static str) -> Result<i32, ProtocolError> {
        let v = self.uvarint(what)?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    /// Zig-zag varlong (record fields).
    pub fn varlong(&mut self, what: &'static str) -> Result<i64, ProtocolError> {
        let v = self.uvarlong(what)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// Compact array length: `None` for a null array. The count is checked
    /// against the bytes left, each element taking at least
    /// `min_element_size` bytes, so it can safely size a collection.
    pub fn compact_array_len(
        &mut self,
        min_element_size: usize,
        what: &'static str,
    ) -> Result<Option<usize>, ProtocolError> {
        let n = self.uvarint(what)?;
        if n == 0 {
            return Ok(None);
        }
        let n = (n - 1) as usize;
        if n.saturating_mul(min_element_size.max(1)) > self.remaining() {
            return Err(ProtocolError::malformed(
                what,
                format!(
                    "array of {n} elements cannot fit in {} bytes",
                    self.remaining()
                ),
            ));
        }
        Ok(Some(n))
    }

    /// Compact nullable string.
    pub fn compact_nullable_string(
        &mut self,
        what: &'static str,
    ) -> Result<Option<String>, ProtocolError> {
        let n = self.uvarint(what)?;
        if n == 0 {
            return Ok(None);
        }
        let b = self.bytes((n - 1) as usize, what)?;
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| ProtocolError::malformed(what, "string is not valid UTF-8"))
    }

    /// Compact non-nullable string.
    pub fn compact_string(&mut self, what: &'static str) -> Result<String, ProtocolError> {
        self.compact_nullable_string(what)?
            .ok_or_else(|| ProtocolError::malformed(what, "null where a string is required"))
    }

    /// Reads a tagged-field section, handing each field to `on_field(tag,
    /// reader over its bytes)`. `on_field` returns `Ok(false)` for tags it
    /// does not know; those are skipped, as the protocol requires.
    pub fn tagged_fields(
        &mut self,
        what: &'static str,
        mut on_field: impl FnMut(u32, &mut Reader) -> Result<bool, ProtocolError>,
    ) -> Result<(), ProtocolError> {
        let count = self.uvarint(what)?;
        let mut last: Option<u32> = None;
        for _ in 0..count {
            let tag = self.uvarint(what)?;
            if last.is_some_and(|l| tag <= l) {
                return Err(ProtocolError::malformed(
                    what,
                    "tagged fields not in strictly increasing tag order",
                ));
            }
            last = Some(tag);
            let size = self.uvarint(what)? as usize;
            let mut field = Reader::new(self.bytes(size, what)?);
            if on_field(tag, &mut field)? && field.remaining() != 0 {
                return Err(ProtocolError::malformed(
                    what,
                    format!(
                        "tagged field {tag} has {} trailing bytes",
                        field.remaining()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Appends an unsigned LEB128 varint.
pub fn put_uvarint(out: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// Appends an unsigned LEB128 varlong.
pub fn put_uvarlong(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// Appends a zig-zag varint.
pub fn put_varint(out: &mut BytesMut, v: i32) {
    put_uvarint(out, ((v << 1) ^ (v >> 31)) as u32);
}

/// Appends a zig-zag varlong.
pub fn put_varlong(out: &mut BytesMut, v: i64) {
    put_uvarlong(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Size in bytes of an unsigned varint.
pub fn uvarint_size(mut v: u32) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Size in bytes of a zig-zag varint.
pub fn varint_size(v: i32) -> usize {
    uvarint_size(((v << 1) ^ (v >> 31)) as u32)
}

/// Size in bytes of a zig-zag varlong.
pub fn varlong_size(v: i64) -> usize {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

/// Appends a compact nullable string.
pub fn put_compact_nullable_string(out: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(out, 0),
        Some(s) => put_compact_string(out, s),
    }
}

/// Appends a compact string.
pub fn put_compact_string(out: &mut BytesMut, s: &str) {
    put_uvarint(out, s.len() as u32 + 1);
    out.put_slice(s.as_bytes());
}

/// Appends a compact array length (`None` = null array).
pub fn put_compact_array_len(out: &mut BytesMut, n: Option<usize>) {
    match n {
        None => put_uvarint(out, 0),
        Some(n) => put_uvarint(out, n as u32 + 1),
    }
}

/// Appends a UUID.
pub fn put_uuid(out: &mut BytesMut, u: &Uuid) {
    out.put_slice(u.as_bytes());
}

/// Appends a tagged-field section. `fields` are `(tag, encoded value)` and
/// must be in increasing tag order.
pub fn put_tagged_fields(out: &mut BytesMut, fields: &[(u32, BytesMut)]) {
    put_uvarint(out, fields.len() as u32);
    for (tag, value) in fields {
        put_uvarint(out, *tag);
        put_uvarint(out, value.len() as u32);
        out.put_slice(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn uvarint_golden() {
        let cases: &[(u32, &[u8])] = &[
            (0, &[0]),
            (1, &[1]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (u32::MAX, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (v, bytes) in cases {
            let mut out = BytesMut::new();
            put_uvarint(&mut out, *v);
            assert_eq!(&out[..], *bytes, "{v}");
            assert_eq!(uvarint_size(*v), bytes.len());
            let mut r = Reader::new(Bytes::copy_from_slice(bytes));
            assert_eq!(r.uvarint("t").unwrap(), *v);
        }
    }

    #[test]
    fn zigzag_golden() {
        let cases: &[(i32, &[u8])] = &[
            (0, &[0]),
            (-1, &[1]),
            (1, &[2]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
        ];
        for (v, bytes) in cases {
            let mut out = BytesMut::new();
            put_varint(&mut out, *v);
            assert_eq!(&out[..], *bytes, "{v}");
        }
    }

    #[test]
    fn overlong_varint_is_malformed() {
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]));
        assert!(matches!(
            r.uvarint("t"),
            Err(ProtocolError::Malformed { .. })
        ));
    }

    #[test]
    fn hostile_array_count_is_refused() {
        let mut out = BytesMut::new();
        put_uvarint(&mut out, u32::MAX);
        let mut r = Reader::new(out.freeze());
        assert!(r.compact_array_len(1, "t").is_err());
    }

    proptest! {
        #[test]
        fn varlong_round_trip(v in any::<i64>()) {
            let mut out = BytesMut::new();
            put_varlong(&mut out, v);
            prop_assert_eq!(out.len(), varlong_size(v));
            let mut r = Reader::new(out.freeze());
            prop_assert_eq!(r.varlong("t").unwrap(), v);
            prop_assert_eq!(r.remaining(), 0);
        }

        #[test]
        fn varint_round_trip(v in any::<i32>()) {
            let mut out = BytesMut::new();
            put_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_size(v));
            let mut r = Reader::new(out.freeze());
            prop_assert_eq!(r.varint("t").unwrap(), v);
        }

        #[test]
        fn strings_round_trip(s in proptest::option::of(".{0,40}")) {
            let mut out = BytesMut::new();
            put_compact_nullable_string(&mut out, s.as_deref());
            let mut r = Reader::new(out.freeze());
            prop_assert_eq!(r.compact_nullable_string("t").unwrap(), s);
        }

        #[test]
        fn reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = Reader::new(Bytes::from(bytes));
            let _ = r.uvarint("a");
            let _ = r.varlong("b");
            let _ = r.compact_nullable_string("c");
            let _ = r.compact_array_len(8, "d");
            let _ = r.tagged_fields("e", |_, _| Ok(false));
            let _ = r.uuid("f");
        }
    }
}
