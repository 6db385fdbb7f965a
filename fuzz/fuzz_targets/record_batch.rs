//! Bytes as a record set: split into batch views, check every CRC. Any panic
//! or abort is a bug. (Minimal target; the records helper may extend it.)
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sharestream::protocol::records::batch::RecordBatchView;

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

fuzz_target!(|data: &[u8]| {
    let mut buf = Bytes::copy_from_slice(data);
    while let Ok(Some(batch)) = RecordBatchView::split_from(&mut buf) {
        let _ = batch.verify_crc();
        let _ = batch.last_offset();
        let _ = batch.records_section();
    }
});
