//! Record batch codec: round trips for every compression codec, decoders
//! that never panic on arbitrary or mutated bytes, and cross-checks against
//! kafka-protocol's record codec in both directions.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType as KpTimestampType,
};
use proptest::prelude::*;
use sharestream::protocol::records::{
    BatchBuilder, BatchSpec, Compression, ControlType, Record, RecordBatchView, RecordHeader,
    TimestampType, control_batch, encode_batch,
};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];
const MAX: usize = 16 << 20;

fn kp_codec(c: Compression) -> KpCompression {
    match c {
        Compression::None => KpCompression::None,
        Compression::Gzip => KpCompression::Gzip,
        Compression::Snappy => KpCompression::Snappy,
        Compression::Lz4 => KpCompression::Lz4,
        Compression::Zstd => KpCompression::Zstd,
    }
}

fn single(mut wire: Bytes) -> RecordBatchView {
    let v = RecordBatchView::split_from(&mut wire).unwrap().unwrap();
    assert!(wire.is_empty(), "one batch expected");
    v
}

fn opt_bytes(max: usize) -> impl Strategy<Value = Option<Bytes>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from))
}

/// Header keys from a tiny alphabet, so duplicates are frequent.
fn headers() -> impl Strategy<Value = Vec<RecordHeader>> {
    proptest::collection::vec(
        ("[ab]{0,2}", opt_bytes(8)).prop_map(|(k, v)| RecordHeader::new(k, v)),
        0..5,
    )
}

/// Records with strictly increasing (possibly gapped) offset deltas.
fn records(
    max: usize,
    ts: impl Strategy<Value = i64> + Clone,
) -> impl Strategy<Value = Vec<Record>> {
    proptest::collection::vec(
        (1i32..4, ts, opt_bytes(16), opt_bytes(300), headers()),
        0..max,
    )
    .prop_map(|rs| {
        let mut delta = -1;
        rs.into_iter()
            .map(|(gap, timestamp, key, value, headers)| {
                delta += gap;
                Record {
                    offset_delta: delta,
                    timestamp,
                    key,
                    value,
                    headers,
                }
            })
            .collect()
    })
}

fn spec() -> impl Strategy<Value = BatchSpec> {
    (
        any::<i64>(),
        any::<i32>(),
        prop_oneof![Just(-1i64), 0i64..1 << 40],
        any::<i16>(),
        prop_oneof![Just(-1i32), 0i32..i32::MAX],
        any::<bool>(),
        0usize..5,
    )
        .prop_map(|(base_offset, ple, pid, pe, seq, txn, c)| BatchSpec {
            base_offset,
            partition_leader_epoch: ple,
            producer_id: pid,
            producer_epoch: pe,
            base_sequence: seq,
            transactional: txn,
            compression: CODECS[c],
            ..BatchSpec::default()
        })
}

fn check_header(v: &RecordBatchView, spec: &BatchSpec, recs: &[Record]) {
    assert_eq!(v.base_offset(), spec.base_offset);
    assert_eq!(v.partition_leader_epoch(), spec.partition_leader_epoch);
    assert_eq!(v.producer_id(), spec.producer_id);
    assert_eq!(v.producer_epoch(), spec.producer_epoch);
    assert_eq!(v.base_sequence(), spec.base_sequence);
    assert_eq!(v.is_transactional(), spec.transactional);
    assert_eq!(v.compression(), spec.compression);
    assert_eq!(v.records_count() as usize, recs.len());
    match recs.last() {
        Some(last) => {
            assert_eq!(v.last_offset_delta(), last.offset_delta);
            assert_eq!(v.base_timestamp(), recs[0].timestamp);
            assert_eq!(
                v.max_timestamp(),
                recs.iter().map(|r| r.timestamp).max().unwrap()
            );
        }
        None => {
            assert_eq!(v.last_offset_delta(), 0);
            assert_eq!(v.max_timestamp(), -1);
        }
    }
}

// ---------------------------------------------------------------- round trips

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_every_codec(spec in spec(), recs in records(12, any::<i64>())) {
        let wire = encode_batch(&spec, &recs).unwrap();
        let v = single(wire);
        v.verify_crc().unwrap();
        check_header(&v, &spec, &recs);
        prop_assert_eq!(v.records(MAX).unwrap(), recs);
        prop_assert_eq!(v.control_type(), None);
    }

    /// Arbitrary bytes: split, CRC and decode return, never panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut buf = Bytes::from(bytes);
        if let Ok(Some(v)) = RecordBatchView::split_from(&mut buf) {
            let _ = v.verify_crc();
            let _ = (v.last_offset(), v.last_sequence(), v.compression());
            if let Ok(rs) = v.records(1 << 16) {
                for r in rs {
                    let _ = (r.offset(v.base_offset()), r.sequence(v.base_sequence()));
                }
            }
            let _ = v.control_type();
            let _ = v.end_txn_marker();
        }
    }

    /// A valid batch with some bytes flipped (and the CRC optionally fixed
    /// up, so the records decoder sees the damage): never a panic, and a
    /// flip the CRC covers is always caught by it.
    #[test]
    fn mutated_batches_never_panic(
        spec in spec(),
        recs in records(6, -1i64..1 << 41),
        control in any::<bool>(),
        flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..4),
        fix_crc in any::<bool>(),
        cut in proptest::option::of(any::<usize>()),
    ) {
        let wire = if control {
            control_batch(spec.transactional, spec.producer_id, spec.producer_epoch, 3, 10)
        } else {
            encode_batch(&spec, &recs).unwrap()
        };
        let mut m = BytesMut::from(&wire[..]);
        for (at, x) in flips {
            let at = at % m.len();
            m[at] ^= x;
        }
        if fix_crc {
            let crc = crc32c::crc32c(&m[21..]);
            m[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        if let Some(c) = cut {
            m.truncate(c % (m.len() + 1));
        }
        let mut buf = m.freeze();
        while let Ok(Some(v)) = RecordBatchView::split_from(&mut buf) {
            let crc = v.verify_crc();
            if !fix_crc && cut.is_none() && v.size() == wire.len() && v.bytes()[21..] != wire[21..] {
                prop_assert!(crc.is_err());
            }
            if let Ok(rs) = v.records(1 << 20) {
                prop_assert!(rs.len() == v.records_count() as usize);
            }
            let _ = v.control_type();
            let _ = v.end_txn_marker();
        }
    }
}

#[test]
fn empty_batches_round_trip_for_every_codec() {
    for codec in CODECS {
        let spec = BatchSpec {
            compression: codec,
            last_offset_delta: Some(4),
            ..BatchSpec::default()
        };
        let v = single(encode_batch(&spec, &[]).unwrap());
        v.verify_crc().unwrap();
        assert_eq!(v.records_count(), 0);
        assert_eq!(v.last_offset_delta(), 4, "{codec:?}");
        assert!(v.records(MAX).unwrap().is_empty(), "{codec:?}");
    }
}

#[test]
fn large_values_round_trip_for_every_codec() {
    // Values larger than snappy's 32 KiB and lz4's 64 KiB blocks, some
    // incompressible, some very compressible.
    let mut noise = Vec::with_capacity(300 * 1024);
    let mut x: u32 = 0x1234_5678;
    for _ in 0..300 * 1024 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.push(x as u8);
    }
    let recs = vec![
        Record::new(
            0,
            1,
            Some(Bytes::from_static(b"noise")),
            Some(Bytes::from(noise)),
        ),
        Record::new(1, 2, None, Some(Bytes::from(vec![b'z'; 200 * 1024])))
            .with_header("big", Some(Bytes::from(vec![1u8; 70 * 1024]))),
    ];
    for codec in CODECS {
        let spec = BatchSpec {
            compression: codec,
            ..BatchSpec::default()
        };
        let v = single(encode_batch(&spec, &recs).unwrap());
        v.verify_crc().unwrap();
        assert_eq!(v.records(MAX).unwrap(), recs, "{codec:?}");
        // A bound below the decompressed size is refused (uncompressed
        // sections are not inflated, so the bound does not apply).
        if codec != Compression::None {
            assert!(v.records(100 * 1024).is_err(), "{codec:?}");
        }
    }
}

#[test]
fn decompression_bombs_are_refused() {
    // 8 MiB of zeros in one record compresses to a few KiB.
    let recs = vec![Record::new(
        0,
        0,
        None,
        Some(Bytes::from(vec![0u8; 8 << 20])),
    )];
    for codec in CODECS.into_iter().skip(1) {
        let spec = BatchSpec {
            compression: codec,
            ..BatchSpec::default()
        };
        let v = single(encode_batch(&spec, &recs).unwrap());
        assert!(v.size() < 1 << 20, "{codec:?} is {} bytes", v.size());
        let err = v.records(1 << 20).unwrap_err();
        assert!(err.to_string().contains("more than"), "{codec:?}: {err}");
    }
}

#[test]
fn lying_records_count_is_an_error_for_every_codec() {
    let recs = vec![Record::new(0, 0, None, Some(Bytes::from_static(b"v")))];
    for codec in CODECS {
        let spec = BatchSpec {
            compression: codec,
            ..BatchSpec::default()
        };
        let wire = encode_batch(&spec, &recs).unwrap();
        let mut m = BytesMut::from(&wire[..]);
        m[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&m[21..]);
        m[17..21].copy_from_slice(&crc.to_be_bytes());
        let v = single(m.freeze());
        v.verify_crc().unwrap();
        assert!(v.records(MAX).is_err(), "{codec:?}");
    }
}

#[test]
fn log_append_time_records_report_max_timestamp() {
    let spec = BatchSpec {
        timestamp_type: TimestampType::LogAppendTime,
        ..BatchSpec::default()
    };
    let recs = vec![
        Record::new(0, 10, None, None),
        Record::new(1, 30, None, None),
    ];
    let v = single(encode_batch(&spec, &recs).unwrap());
    assert!(v.is_log_append_time());
    let out = v.records(MAX).unwrap();
    assert!(out.iter().all(|r| r.timestamp == 30));
}

#[test]
fn encoder_refuses_bad_offset_deltas() {
    let spec = BatchSpec::default();
    let dup = [Record::new(0, 0, None, None), Record::new(0, 0, None, None)];
    assert!(encode_batch(&spec, &dup).is_err());
    assert!(encode_batch(&spec, &[Record::new(-1, 0, None, None)]).is_err());
    let short = BatchSpec {
        last_offset_delta: Some(0),
        ..BatchSpec::default()
    };
    assert!(
        encode_batch(
            &short,
            &[Record::new(0, 0, None, None), Record::new(2, 0, None, None)]
        )
        .is_err()
    );
}

#[test]
fn builder_numbers_records() {
    let mut b = BatchBuilder::new(BatchSpec {
        producer_id: 7,
        producer_epoch: 1,
        base_sequence: 100,
        ..BatchSpec::default()
    });
    for i in 0..3 {
        b.append(1000 + i, None, Some(Bytes::from(vec![i as u8])), vec![]);
    }
    assert_eq!(b.len(), 3);
    let v = single(b.build().unwrap());
    assert_eq!(v.last_offset_delta(), 2);
    assert_eq!(v.last_sequence(), 102);
    let recs = v.records(MAX).unwrap();
    assert_eq!(
        recs.iter().map(|r| r.offset_delta).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
}

// ------------------------------------------------------ kafka-protocol cross-checks

fn dedup_headers(recs: &mut [Record]) {
    for r in recs {
        let mut seen = std::collections::HashSet::new();
        r.headers.retain(|h| seen.insert(h.key.clone()));
    }
}

fn kp_headers(hs: &[RecordHeader]) -> IndexMap<StrBytes, Option<Bytes>> {
    hs.iter()
        .map(|h| (StrBytes::from_string(h.key.clone()), h.value.clone()))
        .collect()
}

fn from_kp_headers(hs: &IndexMap<StrBytes, Option<Bytes>>) -> Vec<RecordHeader> {
    hs.iter()
        .map(|(k, v)| RecordHeader::new(k.to_string(), v.clone()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Our encoder, kafka-protocol's decoder.
    #[test]
    fn kafka_protocol_decodes_our_batches(
        spec in spec(),
        recs in records(10, 0i64..1 << 41).prop_filter("non-empty", |r| !r.is_empty()),
    ) {
        let mut recs = recs;
        dedup_headers(&mut recs);
        let mut wire = encode_batch(&spec, &recs).unwrap();
        let set = RecordBatchDecoder::decode(&mut wire).unwrap();
        prop_assert!(wire.is_empty());
        prop_assert_eq!(set.compression, kp_codec(spec.compression));
        prop_assert_eq!(set.records.len(), recs.len());
        for (kp, ours) in set.records.iter().zip(&recs) {
            prop_assert_eq!(kp.offset, ours.offset(spec.base_offset));
            prop_assert_eq!(kp.timestamp, ours.timestamp);
            prop_assert_eq!(&kp.key, &ours.key);
            prop_assert_eq!(&kp.value, &ours.value);
            prop_assert_eq!(from_kp_headers(&kp.headers), ours.headers.clone());
            prop_assert_eq!(kp.producer_id, spec.producer_id);
            prop_assert_eq!(kp.producer_epoch, spec.producer_epoch);
            prop_assert_eq!(kp.partition_leader_epoch, spec.partition_leader_epoch);
            if spec.base_sequence >= 0 {
                // (kafka-protocol reports -1 + delta when there is no sequence.)
                prop_assert_eq!(kp.sequence, ours.sequence(spec.base_sequence));
            }
            prop_assert_eq!(kp.transactional, spec.transactional);
            prop_assert!(!kp.control);
            prop_assert_eq!(kp.timestamp_type, KpTimestampType::Creation);
        }
    }

    /// kafka-protocol's encoder, our decoder.
    #[test]
    fn we_decode_kafka_protocol_batches(
        spec in spec(),
        recs in records(10, 0i64..1 << 41).prop_filter("non-empty", |r| !r.is_empty()),
        base_sequence in 0i32..1 << 20,
    ) {
        let mut recs = recs;
        dedup_headers(&mut recs);
        let producer_id = spec.producer_id.max(0);
        let kp: Vec<KpRecord> = recs
            .iter()
            .map(|r| KpRecord {
                transactional: spec.transactional,
                control: false,
                partition_leader_epoch: spec.partition_leader_epoch,
                producer_id,
                producer_epoch: spec.producer_epoch,
                timestamp_type: KpTimestampType::Creation,
                offset: spec.base_offset.rem_euclid(1 << 50) + r.offset_delta as i64,
                sequence: base_sequence + r.offset_delta,
                timestamp: r.timestamp,
                key: r.key.clone(),
                value: r.value.clone(),
                headers: kp_headers(&r.headers),
                delete_horizon: false,
            })
            .collect();
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            &kp,
            &RecordEncodeOptions { version: 2, compression: kp_codec(spec.compression) },
        )
        .unwrap();
        let v = single(out.freeze());
        v.verify_crc().unwrap();
        prop_assert_eq!(v.compression(), spec.compression);
        prop_assert_eq!(v.producer_id(), producer_id);
        prop_assert_eq!(v.producer_epoch(), spec.producer_epoch);
        // Its batch starts at the first record's offset and sequence.
        prop_assert_eq!(v.base_sequence(), kp[0].sequence);
        prop_assert_eq!(v.base_offset(), kp[0].offset);
        prop_assert_eq!(v.is_transactional(), spec.transactional);
        prop_assert_eq!(v.partition_leader_epoch(), spec.partition_leader_epoch);
        let ours = v.records(MAX).unwrap();
        prop_assert_eq!(ours.len(), kp.len());
        for (o, k) in ours.iter().zip(&kp) {
            prop_assert_eq!(o.offset(v.base_offset()), k.offset);
            prop_assert_eq!(o.timestamp, k.timestamp);
            prop_assert_eq!(&o.key, &k.key);
            prop_assert_eq!(&o.value, &k.value);
            prop_assert_eq!(o.headers.clone(), from_kp_headers(&k.headers));
            prop_assert_eq!(o.sequence(v.base_sequence()), k.sequence);
        }
    }
}

#[test]
fn kafka_protocol_reads_our_markers() {
    for commit in [true, false] {
        let mut wire = control_batch(commit, 12, 4, 9, 5000);
        let set = RecordBatchDecoder::decode(&mut wire).unwrap();
        assert_eq!(set.records.len(), 1);
        let r = &set.records[0];
        assert!(r.control && r.transactional);
        assert_eq!(r.producer_id, 12);
        assert_eq!(r.producer_epoch, 4);
        assert_eq!(r.timestamp, 5000);
        assert_eq!(
            r.key.as_deref(),
            Some(&[0u8, 0, 0, if commit { 1 } else { 0 }][..])
        );
        assert_eq!(r.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 9][..]));
    }
}

#[test]
fn we_read_kafka_protocol_markers() {
    for (type_id, expected) in [(0i16, ControlType::Abort), (1, ControlType::Commit)] {
        let mut key = Vec::new();
        key.extend_from_slice(&0i16.to_be_bytes());
        key.extend_from_slice(&type_id.to_be_bytes());
        let rec = KpRecord {
            transactional: true,
            control: true,
            partition_leader_epoch: 3,
            producer_id: 77,
            producer_epoch: 2,
            timestamp_type: KpTimestampType::Creation,
            offset: 500,
            sequence: -1,
            timestamp: 1,
            key: Some(Bytes::from(key)),
            value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 6])),
            headers: IndexMap::new(),
            delete_horizon: false,
        };
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            [&rec],
            &RecordEncodeOptions {
                version: 2,
                compression: KpCompression::None,
            },
        )
        .unwrap();
        let v = single(out.freeze());
        assert_eq!(v.control_type(), Some(expected));
        let m = v.end_txn_marker().unwrap().unwrap();
        assert_eq!(m.control_type, expected);
        assert_eq!(m.coordinator_epoch, 6);
    }
}
