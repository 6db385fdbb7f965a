//! A byte-driven source of field values, in the style of `arbitrary`:
//! proptest generates (and shrinks) a byte vector, the generators in
//! `gen_messages` read values from it. When the bytes run out every value is
//! zero, every option `None` and every array empty, so shrinking the bytes
//! shrinks the message.

#![allow(dead_code)]

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use uuid::Uuid;

/// Reads field values off a byte string.
pub struct Entropy {
    data: Vec<u8>,
    pos: usize,
}

impl Entropy {
    /// Values drawn from `data`.
    pub fn new(data: Vec<u8>) -> Self {
        Self { data, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn consumed(&self) -> usize {
        self.pos
    }

    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn fill<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.byte();
        }
        out
    }

    /// Any i8.
    pub fn i8(&mut self) -> i8 {
        self.byte() as i8
    }
    /// Any i16.
    pub fn i16(&mut self) -> i16 {
        i16::from_le_bytes(self.fill())
    }
    /// Any u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.fill())
    }
    /// Any i32.
    pub fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.fill())
    }
    /// Any i64.
    pub fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.fill())
    }
    /// Any bool.
    pub fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }
    /// A finite f64 (NaN would not compare equal to itself).
    pub fn f64(&mut self) -> f64 {
        let f = f64::from_le_bytes(self.fill());
        if f.is_finite() { f } else { 0.0 }
    }
    /// Any UUID.
    pub fn uuid(&mut self) -> Uuid {
        Uuid::from_bytes(self.fill())
    }
    /// A short UTF-8 string, sometimes with multi-byte characters.
    pub fn string(&mut self) -> StrBytes {
        const CHARS: &[char] = &['a', 'b', 'z', '0', '9', '-', '_', '.', ' ', 'é', '€', '🦀'];
        let n = (self.byte() % 9) as usize;
        let s: String = (0..n)
            .map(|_| CHARS[self.byte() as usize % CHARS.len()])
            .collect();
        StrBytes::from_string(s)
    }
    /// A short byte string.
    pub fn bytes(&mut self) -> Bytes {
        let n = (self.byte() % 17) as usize;
        Bytes::from((0..n).map(|_| self.byte()).collect::<Vec<u8>>())
    }
    /// `None` or a value, about half the time each.
    pub fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        if self.byte() & 1 == 1 {
            Some(f(self))
        } else {
            None
        }
    }
    /// An array of 0 to 3 elements.
    pub fn vec<T>(&mut self, mut f: impl FnMut(&mut Self) -> T) -> Vec<T> {
        let n = (self.byte() % 4) as usize;
        (0..n).map(|_| f(self)).collect()
    }
    /// Unknown tagged fields (tags far above any known one), mostly none.
    pub fn unknown_tagged_fields(&mut self) -> BTreeMap<i32, Bytes> {
        let mut out = BTreeMap::new();
        if self.byte().is_multiple_of(4) {
            let n = 1 + self.byte() % 2;
            for _ in 0..n {
                let tag = 1000 + i32::from(self.byte() % 8);
                let v = self.bytes();
                out.insert(tag, v);
            }
        }
        out
    }
}
