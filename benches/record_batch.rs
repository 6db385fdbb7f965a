//! Record batch encode/decode throughput.
//!
//! Batches of 64 records with 1 KiB values (and a 16-byte key and one
//! header), uncompressed and lz4. Decoding means split + CRC-32C check +
//! decompression + decoding every record. Throughput is counted in bytes of
//! the *uncompressed* batch, so the MB/s figures of both codecs compare.

use std::hint::black_box;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sharestream::protocol::records::{
    BatchSpec, Compression, Record, RecordBatchView, encode_batch,
};

const RECORDS: usize = 64;
const VALUE_SIZE: usize = 1024;

/// Values that compress like real payloads (text-ish, some repetition).
fn records() -> Vec<Record> {
    let words: [&[u8]; 8] = [
        b"order ",
        b"id=",
        b"customer ",
        b"amount ",
        b"EUR ",
        b"status=paid ",
        b"ts ",
        b"sku ",
    ];
    let mut x: u32 = 0x9e37_79b9;
    (0..RECORDS)
        .map(|i| {
            let mut v = Vec::with_capacity(VALUE_SIZE);
            while v.len() < VALUE_SIZE {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                v.extend_from_slice(words[(x % 8) as usize]);
                v.extend_from_slice((x % 100_000).to_string().as_bytes());
            }
            v.truncate(VALUE_SIZE);
            Record::new(
                i as i32,
                1_700_000_000_000 + i as i64,
                Some(Bytes::from(format!("key-{i:012}"))),
                Some(Bytes::from(v)),
            )
            .with_header("trace-id", Some(Bytes::from_static(b"0123456789abcdef")))
        })
        .collect()
}

fn spec(compression: Compression) -> BatchSpec {
    BatchSpec {
        producer_id: 1000,
        producer_epoch: 0,
        base_sequence: 0,
        compression,
        ..BatchSpec::default()
    }
}

fn bench(c: &mut Criterion) {
    let recs = records();
    let plain_size = encode_batch(&spec(Compression::None), &recs).unwrap().len() as u64;

    let mut decode = c.benchmark_group("record_batch_decode");
    decode.throughput(Throughput::Bytes(plain_size));
    for codec in [Compression::None, Compression::Lz4] {
        let wire = encode_batch(&spec(codec), &recs).unwrap();
        decode.bench_with_input(
            BenchmarkId::from_parameter(codec.name()),
            &wire,
            |b, wire| {
                b.iter(|| {
                    let mut buf = wire.clone();
                    let batch = RecordBatchView::split_from(&mut buf).unwrap().unwrap();
                    batch.verify_crc().unwrap();
                    black_box(batch.records(1 << 24).unwrap())
                })
            },
        );
    }
    decode.finish();

    let mut encode = c.benchmark_group("record_batch_encode");
    encode.throughput(Throughput::Bytes(plain_size));
    for codec in [Compression::None, Compression::Lz4] {
        encode.bench_with_input(
            BenchmarkId::from_parameter(codec.name()),
            &recs,
            |b, recs| b.iter(|| black_box(encode_batch(&spec(codec), recs).unwrap())),
        );
    }
    encode.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
