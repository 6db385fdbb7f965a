//! Compression codecs of the records section, in the byte formats the Java
//! client and broker read and write.
//!
//! | codec  | written as                                                   |
//! |--------|--------------------------------------------------------------|
//! | gzip   | one gzip member (any number of members is read)              |
//! | snappy | xerial framing: 16-byte header, then `[i32 BE length][raw snappy block]` per 32 KiB of input; plain raw snappy (librdkafka's producer) is also read |
//! | lz4    | standard LZ4 frame, 64 KiB independent blocks, no checksums (what Java's `KafkaLZ4BlockOutputStream` writes); frames with checksums are also read |
//! | zstd   | one zstd frame, level 3 (Kafka's default)                    |
//!
//! Decompression is bounded: every decoder stops and fails once the output
//! would exceed the caller's `max_decompressed`, and a length read off the
//! wire (snappy's declared block length) is checked against that bound
//! before anything is allocated. A decompression bomb costs at most
//! `max_decompressed` bytes of memory and a bounded amount of work.

use std::io::{Read, Write};

use bytes::Bytes;

use super::batch::Compression;
use crate::ProtocolError;

/// xerial snappy-java's stream magic.
pub const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// xerial header: magic, version (i32 BE), compatible version (i32 BE).
pub const XERIAL_HEADER_SIZE: usize = 16;
/// The block size of Java's `SnappyOutputStream`.
pub const XERIAL_BLOCK_SIZE: usize = 32 * 1024;
/// zstd level Kafka uses by default.
pub const ZSTD_LEVEL: i32 = 3;

const WHAT: &str = "compressed records";

fn codec_error(codec: Compression, err: impl std::fmt::Display) -> ProtocolError {
    ProtocolError::malformed(WHAT, format!("{}: {err}", codec.name()))
}

fn too_large(codec: Compression, max: usize) -> ProtocolError {
    ProtocolError::malformed(
        WHAT,
        format!(
            "{}: records decompress to more than the {max} bytes allowed",
            codec.name()
        ),
    )
}

/// Compresses a records section with `codec`.
pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, ProtocolError> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2 + 32),
                flate2::Compression::default(),
            );
            enc.write_all(data).map_err(|e| codec_error(codec, e))?;
            enc.finish().map_err(|e| codec_error(codec, e))
        }
        Compression::Snappy => xerial_compress(data),
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(false);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(
                info,
                Vec::with_capacity(data.len() / 2 + 32),
            );
            enc.write_all(data).map_err(|e| codec_error(codec, e))?;
            enc.finish().map_err(|e| codec_error(codec, e))
        }
        Compression::Zstd => {
            zstd::bulk::compress(data, ZSTD_LEVEL).map_err(|e| codec_error(codec, e))
        }
    }
}

fn xerial_compress(data: &[u8]) -> Result<Vec<u8>, ProtocolError> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_SIZE + data.len() / 2 + 16);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes()); // version
    out.extend_from_slice(&1i32.to_be_bytes()); // compatible version
    let mut encoder = snap::raw::Encoder::new();
    for chunk in data.chunks(XERIAL_BLOCK_SIZE) {
        let len_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let start = out.len();
        out.resize(start + snap::raw::max_compress_len(chunk.len()), 0);
        let n = encoder
            .compress(chunk, &mut out[start..])
            .map_err(|e| codec_error(Compression::Snappy, e))?;
        out.truncate(start + n);
        out[len_at..start].copy_from_slice(&(n as i32).to_be_bytes());
    }
    Ok(out)
}

/// Decompresses a records section, refusing output larger than
/// `max_decompressed` bytes. `Compression::None` returns `data` as is.
pub fn decompress(
    codec: Compression,
    data: Bytes,
    max_decompressed: usize,
) -> Result<Bytes, ProtocolError> {
    match codec {
        Compression::None => Ok(data),
        Compression::Gzip => read_capped(
            codec,
            flate2::read::MultiGzDecoder::new(&data[..]),
            max_decompressed,
        ),
        Compression::Snappy => snappy_decompress(&data, max_decompressed),
        Compression::Lz4 => read_capped(
            codec,
            lz4_flex::frame::FrameDecoder::new(&data[..]),
            max_decompressed,
        ),
        Compression::Zstd => {
            let mut dec = zstd::stream::read::Decoder::with_buffer(&data[..])
                .map_err(|e| codec_error(codec, e))?;
            dec.window_log_max(zstd_window_log_max(max_decompressed))
                .map_err(|e| codec_error(codec, e))?;
            read_capped(codec, dec, max_decompressed)
        }
    }
}

/// The largest zstd window we accept. A window never needs to exceed the
/// content, but streaming encoders (zstd-jni in the Java producer) declare
/// a window from the level's table whatever the input size: up to 2^23 for
/// levels up to 19. So the limit is the bound rounded up to a power of two,
/// but never below 2^23 and never above zstd's own default of 2^27.
fn zstd_window_log_max(max_decompressed: usize) -> u32 {
    let needed = usize::BITS - max_decompressed.saturating_sub(1).leading_zeros();
    needed.clamp(23, 27)
}

fn read_capped(codec: Compression, reader: impl Read, max: usize) -> Result<Bytes, ProtocolError> {
    let mut out = Vec::new();
    let limit = (max as u64).saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| codec_error(codec, e))?;
    if out.len() > max {
        return Err(too_large(codec, max));
    }
    Ok(Bytes::from(out))
}

fn snappy_decompress(data: &[u8], max: usize) -> Result<Bytes, ProtocolError> {
    let codec = Compression::Snappy;
    if data.is_empty() {
        // Java's SnappyOutputStream writes nothing at all for empty input.
        return Ok(Bytes::new());
    }
    if data.len() < XERIAL_HEADER_SIZE || data[..8] != XERIAL_MAGIC {
        // Plain raw snappy, as librdkafka produces it.
        let len = snap::raw::decompress_len(data).map_err(|e| codec_error(codec, e))?;
        if len > max {
            return Err(too_large(codec, max));
        }
        let mut out = vec![0u8; len];
        let n = snap::raw::Decoder::new()
            .decompress(data, &mut out)
            .map_err(|e| codec_error(codec, e))?;
        out.truncate(n);
        return Ok(Bytes::from(out));
    }
    let mut rest = &data[XERIAL_HEADER_SIZE..];
    let mut out: Vec<u8> = Vec::new();
    let mut decoder = snap::raw::Decoder::new();
    while !rest.is_empty() {
        if rest.len() >= 8 && rest[..8] == XERIAL_MAGIC {
            // Concatenated xerial streams: a fresh header, then more blocks.
            if rest.len() < XERIAL_HEADER_SIZE {
                return Err(codec_error(codec, "truncated xerial header"));
            }
            rest = &rest[XERIAL_HEADER_SIZE..];
            continue;
        }
        if rest.len() < 4 {
            return Err(codec_error(codec, "truncated xerial block length"));
        }
        let block_len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        rest = &rest[4..];
        if block_len < 0 || block_len as usize > rest.len() {
            return Err(codec_error(
                codec,
                format!(
                    "xerial block of {block_len} bytes with {} bytes left",
                    rest.len()
                ),
            ));
        }
        let (block, tail) = rest.split_at(block_len as usize);
        rest = tail;
        let len = snap::raw::decompress_len(block).map_err(|e| codec_error(codec, e))?;
        let start = out.len();
        if len > max - start {
            return Err(too_large(codec, max));
        }
        out.resize(start + len, 0);
        let n = decoder
            .decompress(block, &mut out[start..])
            .map_err(|e| codec_error(codec, e))?;
        out.truncate(start + n);
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn xerial_layout_matches_snappy_java() {
        let data: Vec<u8> = (0..XERIAL_BLOCK_SIZE * 2 + 100)
            .map(|i| (i % 251) as u8)
            .collect();
        let c = compress(Compression::Snappy, &data).unwrap();
        assert_eq!(
            &c[..16],
            &[
                0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1
            ]
        );
        // Three blocks: 32 KiB, 32 KiB, 100 bytes.
        let mut rest = &c[16..];
        let mut sizes = Vec::new();
        while !rest.is_empty() {
            let n = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            let block = &rest[4..4 + n];
            sizes.push(snap::raw::decompress_len(block).unwrap());
            rest = &rest[4 + n..];
        }
        assert_eq!(sizes, vec![XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE, 100]);
        assert_eq!(
            &decompress(Compression::Snappy, c.into(), 1 << 20).unwrap()[..],
            &data[..]
        );
    }

    #[test]
    fn raw_snappy_is_read() {
        let data = b"records written by librdkafka as raw snappy, no xerial header".repeat(3);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            &decompress(Compression::Snappy, raw.into(), 1 << 20).unwrap()[..],
            &data[..]
        );
    }

    #[test]
    fn concatenated_xerial_streams_are_read() {
        let mut c = compress(Compression::Snappy, b"first ").unwrap();
        c.extend(compress(Compression::Snappy, b"second").unwrap());
        assert_eq!(
            &decompress(Compression::Snappy, c.into(), 100).unwrap()[..],
            b"first second"
        );
    }

    #[test]
    fn lz4_frame_header_matches_kafka() {
        let c = compress(Compression::Lz4, b"hello kafka lz4").unwrap();
        // Magic, FLG = version 01 + block independence, BD = 64 KiB max block.
        assert_eq!(&c[..6], &[0x04, 0x22, 0x4d, 0x18, 0x60, 0x40]);
        // End mark, no content checksum after it.
        assert_eq!(&c[c.len() - 4..], &[0, 0, 0, 0]);
    }

    #[test]
    fn bombs_are_refused_for_every_codec() {
        let zeros = vec![0u8; 4 << 20];
        for codec in ALL {
            if codec == Compression::None {
                continue;
            }
            let c = compress(codec, &zeros).unwrap();
            assert!(c.len() < 1 << 20, "{codec:?} compressed to {}", c.len());
            let err = decompress(codec, c.clone().into(), 64 * 1024).unwrap_err();
            assert!(err.to_string().contains("more than"), "{codec:?}: {err}");
            // The same data within the bound decompresses.
            assert_eq!(decompress(codec, c.into(), 4 << 20).unwrap().len(), 4 << 20);
        }
    }

    #[test]
    fn lying_snappy_lengths_are_refused_before_allocation() {
        // Raw snappy whose preamble claims 2^32-1 bytes.
        let raw = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        assert!(decompress(Compression::Snappy, Bytes::copy_from_slice(&raw), 1 << 20).is_err());
        // xerial block claiming more bytes than are left.
        let mut x = compress(Compression::Snappy, b"abc").unwrap();
        x[16..20].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decompress(Compression::Snappy, x.into(), 1 << 20).is_err());
    }

    proptest! {
        #[test]
        fn codecs_round_trip(data in proptest::collection::vec(any::<u8>(), 0..5000), idx in 0usize..5) {
            let codec = ALL[idx];
            let c = compress(codec, &data).unwrap();
            let d = decompress(codec, c.into(), data.len()).unwrap();
            prop_assert_eq!(&d[..], &data[..]);
        }

        #[test]
        fn decompress_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300), idx in 0usize..5) {
            let _ = decompress(ALL[idx], data.into(), 1 << 16);
        }

        #[test]
        fn mutated_streams_never_panic(
            data in proptest::collection::vec(any::<u8>(), 1..2000),
            idx in 1usize..5,
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        ) {
            let codec = ALL[idx];
            let mut c = compress(codec, &data).unwrap();
            for (at, x) in flips {
                let at = at % c.len();
                c[at] ^= x;
            }
            if let Ok(d) = decompress(codec, c.into(), 4096) {
                prop_assert!(d.len() <= 4096);
            }
        }
    }
}
