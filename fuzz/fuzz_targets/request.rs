//! Bytes off a socket, through the broker's decoding path: framing, request
//! header, request body by key and version. Any panic or abort is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sharestream_protocol::api::{decode_request, decode_request_header};
use sharestream_protocol::frame::FrameDecoder;

// kafka-protocol sizes arrays from wire counts; without the guard every
// hostile count is an abort (or a libFuzzer malloc-limit report).
#[global_allocator]
static GLOBAL: sharestream_protocol::alloc::GuardedAlloc = sharestream_protocol::alloc::GuardedAlloc::new();

fuzz_target!(|data: &[u8]| {
    let mut decoder = FrameDecoder::new(1 << 20);
    decoder.extend_from_slice(data);
    while let Ok(Some(mut frame)) = decoder.next_frame() {
        if let Ok(header) = decode_request_header(&mut frame) {
            let _ = decode_request(header.api_key, header.api_version, &mut frame);
        }
    }
});
