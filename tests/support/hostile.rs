//! Tiny frames announcing huge arrays, shared by the hostile-frame tests.

use bytes::{Bytes, BytesMut};
use sharestream::protocol::ProtocolError;
use sharestream::protocol::api::{ApiRequest, decode_request, decode_request_header};
use sharestream::protocol::frame::{FrameDecoder, encode_frame};

/// A request frame (header + body, no length prefix) with a hostile count.
pub struct HostileRequest {
    pub name: &'static str,
    pub frame: &'static [u8],
}

/// Requests whose first array announces far more elements than the frame holds.
pub const REQUESTS: &[HostileRequest] = &[
    HostileRequest {
        // The upstream reproducer: 0x033c0c00 = 54,265,856 topics (~3.6 GiB).
        name: "Metadata v0, 54 million topics",
        frame: &[
            0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0xff, // header v1
            0x03, 0x3c, 0x0c, 0x00, 0x00, 0xb6,
        ],
    },
    HostileRequest {
        name: "Metadata v0, i32::MAX topics",
        frame: &[
            0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xff, // header v1
            0x7f, 0xff, 0xff, 0xff, 0x00, 0x01,
        ],
    },
    HostileRequest {
        name: "Metadata v12, compact count 2^32-2",
        frame: &[
            0x00, 0x03, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x03, 0xff, 0xff, 0x00, // header v2
            0xff, 0xff, 0xff, 0xff, 0x0f, 0x00,
        ],
    },
    HostileRequest {
        name: "Produce v9, compact count 2^32-2",
        frame: &[
            0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x04, 0xff, 0xff, 0x00, // header v2
            0x00, // transactional id: null
            0x00, 0x01, // acks
            0x00, 0x00, 0x00, 0x64, // timeout
            0xff, 0xff, 0xff, 0xff, 0x0f, // topic data
            0x00,
        ],
    },
    HostileRequest {
        name: "TxnShareAcknowledge v0, compact count 2^32-2",
        frame: &[
            0x00, 0x5f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0xff, 0xff, 0x00, // header v2
            0x02, b't', 0x02, b'g', // transactional id, group id
            0, 0, 0, 0, 0, 0, 0, 1, 0, 0, // producer id, epoch
            0x02, b'm', 0, 0, 0, 1, // member id, member epoch
            0xff, 0xff, 0xff, 0xff, 0x0f, // topics
            0x00,
        ],
    },
];

/// Runs one hostile request frame through the broker's decoding path:
/// framing, header, body.
pub fn decode_hostile_request(frame: &[u8]) -> Result<(), ProtocolError> {
    let mut wire = BytesMut::new();
    encode_frame(frame, &mut wire);
    let mut decoder = FrameDecoder::default();
    decoder.extend_from_slice(&wire);
    let mut body = decoder.next_frame()?.expect("a complete frame");
    let header = decode_request_header(&mut body).map_err(|e| e.error)?;
    decode_request(header.api_key, header.api_version, &mut body).map(|_| ())
}

#[allow(dead_code)]
/// Runs hostile response bodies through the client's decoding path.
pub fn decode_hostile_responses() -> Vec<(&'static str, Result<(), ProtocolError>)> {
    use kafka_protocol::messages::{FetchRequest, MetadataRequest};
    // Metadata v0: brokers count i32::MAX.
    let mut metadata = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0x00]);
    // Fetch v12: throttle, error, session id, then responses count 2^32-2.
    let mut fetch = Bytes::from_static(&[
        0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00,
    ]);
    vec![
        (
            "MetadataResponse v0, i32::MAX brokers",
            MetadataRequest::decode_response(&mut metadata, 0).map(|_| ()),
        ),
        (
            "FetchResponse v12, compact count 2^32-2",
            FetchRequest::decode_response(&mut fetch, 12).map(|_| ()),
        ),
    ]
}
