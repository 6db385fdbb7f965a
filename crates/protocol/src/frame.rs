//! Length-prefixed framing of the Kafka wire protocol.
//!
//! Every request and response is preceded by a big-endian `i32` holding the
//! size of what follows. [`FrameDecoder`] cuts frames out of a byte stream
//! without doing any I/O: the caller appends whatever bytes arrived and asks
//! for the next frame. "Not enough bytes yet" (`Ok(None)`) is kept apart
//! from "this stream is broken" ([`FrameError`]).
//!
//! A hostile length prefix can never cause a large allocation: the prefix is
//! checked against the configured maximum before anything is reserved, and
//! the decoder reserves at most what actually arrived (it never pre-sizes its
//! buffer from the prefix).

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Default maximum frame size: 100 MiB, Kafka's `socket.request.max.bytes`.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 100 * 1024 * 1024;

/// Size of the length prefix in bytes.
pub const LENGTH_PREFIX_SIZE: usize = 4;

/// Why a stream of frames cannot be read any further.
///
/// Once a [`FrameDecoder`] has returned one of these the stream is out of
/// sync and the connection must be closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length prefix is negative.
    #[error("negative frame length {0}")]
    NegativeLength(i32),
    /// The length prefix exceeds the configured maximum.
    #[error("frame of {size} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// The size announced by the prefix.
        size: usize,
        /// The configured maximum.
        max: usize,
    },
}

/// Incremental, I/O-free frame decoder.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max_frame_size: usize,
    broken: Option<FrameError>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_SIZE)
    }
}

impl FrameDecoder {
    /// A decoder refusing frames larger than `max_frame_size` bytes.
    pub fn new(max_frame_size: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            max_frame_size,
            broken: None,
        }
    }

    /// The configured maximum frame size.
    pub fn max_frame_size(&self) -> usize {
        self.max_frame_size
    }

    /// Appends bytes read from the stream.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The internal buffer, for reading from a socket straight into it
    /// (`AsyncReadExt::read_buf`). Only append to it.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes buffered and not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// How many more bytes are needed before the next frame is complete, if
    /// known. Useful to size the next read.
    pub fn bytes_needed(&self) -> usize {
        if self.buf.len() < LENGTH_PREFIX_SIZE {
            return LENGTH_PREFIX_SIZE - self.buf.len();
        }
        let size = peek_length(&self.buf);
        if size < 0 || size as usize > self.max_frame_size {
            return 0;
        }
        (LENGTH_PREFIX_SIZE + size as usize).saturating_sub(self.buf.len())
    }

    /// Returns the next complete frame body (without its prefix), `Ok(None)`
    /// when more bytes are needed, or an error when the stream is broken.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if let Some(err) = &self.broken {
            return Err(err.clone());
        }
        if self.buf.len() < LENGTH_PREFIX_SIZE {
            return Ok(None);
        }
        let size = peek_length(&self.buf);
        if size < 0 {
            let err = FrameError::NegativeLength(size);
            self.broken = Some(err.clone());
            return Err(err);
        }
        let size = size as usize;
        if size > self.max_frame_size {
            let err = FrameError::TooLarge {
                size,
                max: self.max_frame_size,
            };
            self.broken = Some(err.clone());
            return Err(err);
        }
        if self.buf.len() < LENGTH_PREFIX_SIZE + size {
            return Ok(None);
        }
        self.buf.advance(LENGTH_PREFIX_SIZE);
        Ok(Some(self.buf.split_to(size).freeze()))
    }
}

fn peek_length(buf: &[u8]) -> i32 {
    i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]])
}

/// Writes `body` with its length prefix into `out`.
pub fn encode_frame(body: &[u8], out: &mut BytesMut) {
    out.reserve(LENGTH_PREFIX_SIZE + body.len());
    out.put_i32(body.len() as i32);
    out.put_slice(body);
}

/// Reserves room for a length prefix at the end of `out` and returns its
/// position; call [`finish_frame`] once the body has been written after it.
/// This avoids copying the body.
pub fn start_frame(out: &mut BytesMut) -> usize {
    let pos = out.len();
    out.put_i32(0);
    pos
}

/// Fills in the length prefix reserved by [`start_frame`] at `pos`.
pub fn finish_frame(out: &mut BytesMut, pos: usize) {
    let size = (out.len() - pos - LENGTH_PREFIX_SIZE) as i32;
    out[pos..pos + LENGTH_PREFIX_SIZE].copy_from_slice(&size.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn needs_more_bytes_is_not_an_error() {
        let mut d = FrameDecoder::default();
        assert_eq!(d.next_frame(), Ok(None));
        d.extend_from_slice(&[0, 0]);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(d.bytes_needed(), 2);
        d.extend_from_slice(&[0, 3, b'a']);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(d.bytes_needed(), 2);
        d.extend_from_slice(b"bc");
        assert_eq!(d.next_frame(), Ok(Some(Bytes::from_static(b"abc"))));
        assert_eq!(d.next_frame(), Ok(None));
    }

    #[test]
    fn hostile_prefix_is_refused_without_allocation() {
        let mut d = FrameDecoder::new(1024);
        d.extend_from_slice(&i32::MAX.to_be_bytes());
        let cap_before = d.buf.capacity();
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLarge {
                size: i32::MAX as usize,
                max: 1024
            })
        );
        assert_eq!(d.buf.capacity(), cap_before);
        // Stays broken.
        assert!(d.next_frame().is_err());
    }

    #[test]
    fn negative_prefix_is_malformed() {
        let mut d = FrameDecoder::default();
        d.extend_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(d.next_frame(), Err(FrameError::NegativeLength(-5)));
    }

    #[test]
    fn zero_length_frame() {
        let mut d = FrameDecoder::default();
        d.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(d.next_frame(), Ok(Some(Bytes::new())));
    }

    #[test]
    fn start_finish_frame() {
        let mut out = BytesMut::new();
        let pos = start_frame(&mut out);
        out.put_slice(b"hello");
        finish_frame(&mut out, pos);
        let mut d = FrameDecoder::default();
        d.extend_from_slice(&out);
        assert_eq!(d.next_frame(), Ok(Some(Bytes::from_static(b"hello"))));
    }

    proptest! {
        /// Frames split at arbitrary points come back whole and in order.
        #[test]
        fn round_trip_any_split(bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..10),
                                chunk in 1usize..64) {
            let mut wire = BytesMut::new();
            for b in &bodies { encode_frame(b, &mut wire); }
            let mut d = FrameDecoder::new(1000);
            let mut got = Vec::new();
            for piece in wire.chunks(chunk) {
                d.extend_from_slice(piece);
                while let Some(f) = d.next_frame().unwrap() { got.push(f.to_vec()); }
            }
            prop_assert_eq!(got, bodies);
            prop_assert_eq!(d.buffered(), 0);
        }

        /// Arbitrary bytes never panic and never allocate beyond what arrived.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut d = FrameDecoder::new(512);
            d.extend_from_slice(&bytes);
            while let Ok(Some(f)) = d.next_frame() {
                prop_assert!(f.len() <= 512);
            }
            prop_assert!(d.buf.capacity() <= bytes.len().max(64) * 2);
        }
    }
}
