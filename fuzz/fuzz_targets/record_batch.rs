//! Fuzz target: arbitrary bytes through batch splitting, CRC check, full
//! record decoding and the cheap control-marker parser. None may panic, and
//! a successful decode must hold exactly `recordsCount` records.
//!
//! The first input byte is a mode: when its low bit is set, each batch's
//! CRC is patched to match before decoding, so the fuzzer reaches the
//! records decoder (and every decompressor) instead of stopping at the
//! checksum. Needs `bytes`, `libfuzzer-sys` and `sharestream`.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use sharestream_protocol::records::RecordBatchView;
use sharestream_protocol::records::batch::CRC_OFFSET;

#[global_allocator]
static GLOBAL: sharestream_protocol::alloc::GuardedAlloc = sharestream_protocol::alloc::GuardedAlloc::new();

/// Bound on decompressed records per batch while fuzzing.
const MAX_DECOMPRESSED: usize = 1 << 20;

fn exercise(batch: &RecordBatchView) {
    let _ = batch.verify_crc();
    let _ = (batch.last_offset(), batch.last_sequence());
    if let Ok(records) = batch.records(MAX_DECOMPRESSED) {
        assert_eq!(records.len(), batch.records_count() as usize);
        for r in &records {
            let _ = (r.offset(batch.base_offset()), r.sequence(batch.base_sequence()));
        }
    }
    let _ = batch.control_type();
    let _ = batch.end_txn_marker();
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut buf = Bytes::copy_from_slice(rest);
    while let Ok(Some(batch)) = RecordBatchView::split_from(&mut buf) {
        exercise(&batch);
        if mode & 1 == 1 {
            let crc = batch.compute_crc();
            let mut m = BytesMut::from(&batch.into_bytes()[..]);
            m[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            let mut fixed = m.freeze();
            if let Ok(Some(batch)) = RecordBatchView::split_from(&mut fixed) {
                assert!(batch.verify_crc().is_ok());
                exercise(&batch);
            }
        }
    }
    let _ = RecordBatchView::parse_all(Bytes::copy_from_slice(rest));
});
