//! Golden request frames of Apache Kafka's Java clients, decoded by our
//! protocol layer without Java.
//!
//! tests/golden/java/*.hex are real frames (header + body, no length
//! prefix) that kafka-clients 4.4.0 sent to our embedded broker through a
//! recording proxy while the interop Check scenarios ran (how to re-capture:
//! tests/golden/java/README.md). Each must decode through our entry points
//! (`decode_request_header`, `decode_request`) with nothing left over,
//! re-encode to the very same bytes, and carry the values the scenario
//! used: group, transactional id, topics, member id shape, record counts.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestKind;
use kafka_protocol::protocol::Encodable;
use sharestream::protocol::api::{
    AnyRequest, ApiRequest, RequestHeaderInfo, decode_request, decode_request_header,
};
use sharestream::protocol::records::RecordBatchView;

/// Reads a golden frame; returns its header and decoded request, after
/// checking that our layer re-encodes the body byte for byte.
fn golden(name: &str) -> (RequestHeaderInfo, RequestKind) {
    let path = format!(
        "{}/tests/golden/java/{name}.hex",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let hex: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    let mut frame = Bytes::from(bytes);
    let header = decode_request_header(&mut frame).unwrap_or_else(|e| panic!("{name}: {e}"));
    let body = frame.clone();
    let mut again = BytesMut::new();
    let v = header.api_version;
    // ShareFetch and ShareAcknowledge decode into our v1-2 wrappers
    // (src/protocol/share_v2.rs) and re-encode through them.
    let req = match decode_request(header.api_key, v, &mut frame) {
        Ok(AnyRequest::Kafka(k)) => {
            encode_body(&k, v, &mut again);
            *k
        }
        Ok(AnyRequest::ShareFetch(r)) => {
            r.encode_request(&mut again, v).expect("re-encode");
            RequestKind::ShareFetch(r.request)
        }
        Ok(AnyRequest::ShareAcknowledge(r)) => {
            r.encode_request(&mut again, v).expect("re-encode");
            RequestKind::ShareAcknowledge(r.request)
        }
        other => panic!("{name}: {other:?}"),
    };
    assert!(frame.is_empty(), "{name}: {} bytes left over", frame.len());
    assert_eq!(&again[..], &body[..], "{name}: our re-encoding differs");
    (header, req)
}

fn encode_body(req: &RequestKind, v: i16, out: &mut BytesMut) {
    let r = match req {
        RequestKind::ShareGroupHeartbeat(r) => r.encode(out, v),
        RequestKind::Produce(r) => r.encode(out, v),
        RequestKind::Fetch(r) => r.encode(out, v),
        RequestKind::InitProducerId(r) => r.encode(out, v),
        RequestKind::EndTxn(r) => r.encode(out, v),
        other => panic!("no golden frame of {other:?}"),
    };
    r.expect("re-encode");
}

/// Java's member ids: a random Uuid in URL-safe base64, 22 characters.
fn is_java_member_id(id: &str) -> bool {
    id.len() == 22
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn client_id(h: &RequestHeaderInfo) -> &str {
    h.client_id.as_deref().unwrap_or("")
}

#[test]
fn share_group_heartbeat_join_and_leave() {
    let (h, req) = golden("share_group_heartbeat");
    assert_eq!((h.api_key, h.api_version), (76, 1));
    assert!(client_id(&h).starts_with("consumer-golden-share-"), "{h:?}");
    let RequestKind::ShareGroupHeartbeat(r) = req else {
        panic!()
    };
    assert_eq!(r.group_id.0.as_str(), "golden-share");
    assert!(is_java_member_id(&r.member_id), "{}", r.member_id);
    assert_eq!(r.member_epoch, 0, "the join heartbeat");
    let topics: Vec<&str> = r
        .subscribed_topic_names
        .iter()
        .flatten()
        .map(|t| t.0.as_str())
        .collect();
    assert_eq!(topics, ["golden-share"]);

    let (h2, req) = golden("share_group_heartbeat_leave");
    assert_eq!((h2.api_key, h2.api_version), (76, 1));
    let RequestKind::ShareGroupHeartbeat(leave) = req else {
        panic!()
    };
    assert_eq!(leave.member_epoch, -1, "leaving the group");
    assert_eq!(leave.member_id, r.member_id, "the same member leaves");
}

#[test]
fn share_fetch_opens_a_share_session() {
    let (h, req) = golden("share_fetch");
    assert_eq!((h.api_key, h.api_version), (78, 1));
    assert!(client_id(&h).starts_with("consumer-golden-share-"));
    let RequestKind::ShareFetch(r) = req else {
        panic!()
    };
    assert_eq!(
        r.group_id.as_ref().map(|g| g.0.as_str()),
        Some("golden-share")
    );
    assert!(is_java_member_id(r.member_id.as_deref().unwrap_or("")));
    assert_eq!(r.share_session_epoch, 0);
    assert!(r.max_records > 0 && r.max_bytes > 0, "{r:?}");
    assert_eq!(r.topics.len(), 1);
    assert!(!r.topics[0].topic_id.is_nil());
    let parts: Vec<i32> = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(parts, [0]);
}

#[test]
fn share_acknowledge_carries_explicit_acknowledgements() {
    let (h, req) = golden("share_acknowledge");
    assert_eq!((h.api_key, h.api_version), (79, 1));
    assert!(client_id(&h).starts_with("consumer-golden-share-"));
    let RequestKind::ShareAcknowledge(r) = req else {
        panic!()
    };
    assert_eq!(
        r.group_id.as_ref().map(|g| g.0.as_str()),
        Some("golden-share")
    );
    assert!(is_java_member_id(r.member_id.as_deref().unwrap_or("")));
    assert!(
        r.share_session_epoch > 0,
        "inside the session the fetch opened"
    );
    let batches: Vec<_> = r
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.acknowledgement_batches)
        .collect();
    assert!(!batches.is_empty());
    // The scenario RELEASEs the first record it gets and ACCEPTs the rest.
    let types: Vec<i8> = batches
        .iter()
        .flat_map(|b| b.acknowledge_types.clone())
        .collect();
    assert!(types.contains(&1) && types.contains(&2), "{types:?}");
    for b in batches {
        assert!(
            0 <= b.first_offset && b.first_offset <= b.last_offset,
            "{b:?}"
        );
        // ACCEPT 1, RELEASE 2, REJECT 3; one type per batch or per offset.
        assert!(
            b.acknowledge_types.iter().all(|t| (1..=3).contains(t)),
            "{b:?}"
        );
        let n = (b.last_offset - b.first_offset + 1) as usize;
        assert!(b.acknowledge_types.len() == 1 || b.acknowledge_types.len() == n);
    }
}

#[test]
fn transactional_producer_frames() {
    let (h, req) = golden("init_producer_id_txn");
    assert_eq!((h.api_key, h.api_version), (22, 5));
    assert!(client_id(&h).starts_with("producer-golden-txn"));
    let RequestKind::InitProducerId(r) = req else {
        panic!()
    };
    assert_eq!(
        r.transactional_id.as_ref().map(|t| t.0.as_str()),
        Some("golden-txn")
    );
    assert!(r.transaction_timeout_ms > 0);
    assert_eq!(
        (r.producer_id.0, r.producer_epoch),
        (-1, -1),
        "a fresh producer"
    );

    let (h, req) = golden("produce_txn");
    assert_eq!((h.api_key, h.api_version), (0, 12));
    let RequestKind::Produce(r) = req else {
        panic!()
    };
    assert_eq!(
        r.transactional_id.as_ref().map(|t| t.0.as_str()),
        Some("golden-txn")
    );
    assert_eq!(r.acks, -1);
    assert_eq!(r.topic_data.len(), 1);
    assert_eq!(r.topic_data[0].name.0.as_str(), "golden");
    let p = &r.topic_data[0].partition_data[0];
    assert_eq!(p.index, 0);
    let batches = RecordBatchView::parse_all(p.records.clone().expect("records")).unwrap();
    assert_eq!(batches.len(), 1);
    let b = &batches[0];
    b.verify_crc().unwrap();
    assert!(b.is_transactional() && !b.is_control());
    assert!(b.producer_id() >= 0 && b.base_sequence() == 0);
    let values: Vec<String> = b
        .records(1 << 20)
        .unwrap()
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap())
        .collect();
    assert_eq!(values, ["committed-0-0", "committed-0-1", "committed-0-2"]);

    let (h, req) = golden("end_txn");
    assert_eq!((h.api_key, h.api_version), (26, 5));
    let RequestKind::EndTxn(e) = req else {
        panic!()
    };
    assert_eq!(e.transactional_id.0.as_str(), "golden-txn");
    assert!(e.committed);
    assert_eq!(
        e.producer_id.0,
        b.producer_id(),
        "the producer of the batch commits"
    );
}

#[test]
fn fetch_of_a_read_committed_consumer() {
    let (h, req) = golden("fetch");
    assert_eq!((h.api_key, h.api_version), (1, 16));
    assert!(client_id(&h).starts_with("consumer-"));
    let RequestKind::Fetch(r) = req else { panic!() };
    assert_eq!(r.isolation_level, 1, "read_committed");
    assert_eq!(
        r.replica_state.replica_id.0, -1,
        "a consumer, not a follower"
    );
    assert_eq!(r.topics.len(), 1);
    assert!(!r.topics[0].topic_id.is_nil());
    let p = &r.topics[0].partitions[0];
    assert_eq!((p.partition, p.fetch_offset), (0, 0));
    assert!(p.partition_max_bytes > 0);
}
