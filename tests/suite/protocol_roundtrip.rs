//! Property tests of the protocol layer over every message sharestream uses,
//! request and response, at every version the codec supports:
//!
//! - round trips through our own entry points (`ApiRequest`, the frame and
//!   header functions of `protocol::api`, `FrameDecoder`): decode(encode(m))
//!   == m, nothing left over, and re-encoding gives the same bytes;
//! - never-panic: arbitrary bytes and mutated valid encodings (bit flips,
//!   truncations, insertions, hostile counts) decode to `Ok` or `Err`, never
//!   a panic or an abort.
//!
//! Messages are filled with generated values (strings, ids, nested arrays,
//! unknown tagged fields) by version-aware generators written by
//! `scripts/gen_message_generators.py`: a version only gets the fields it
//! carries, since the crate refuses to encode any other non-default field.
//! Case counts are bounded so the file runs in seconds in debug.

use crate::support::entropy;
use crate::support::gen_messages;
use crate::support::gen_streams;

use std::cell::Cell;
use std::fmt::Debug;

use bytes::{BufMut, Bytes, BytesMut};
use entropy::Entropy as G;
use gen_messages as gm;
use kafka_protocol::messages::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sharestream::protocol::ProtocolError;
use sharestream::protocol::api::{
    AnyRequest, ApiRequest, Versions, codec_versions, decode_request, decode_request_header,
    decode_response_header, encode_request_frame, encode_response_frame, request_header_version,
};
use sharestream::protocol::api_versions_v5::{API_VERSIONS_VERSIONS, ApiVersionsV5Request};
use sharestream::protocol::frame::{FrameDecoder, encode_frame};
use sharestream::protocol::share_v2::{
    SHARE_VERSIONS, ShareAcknowledgeV2Request, ShareAcknowledgeV2Response, ShareFetchV2Request,
};
use sharestream::protocol::streams_group as sg;
use sharestream::protocol::txn_share_ack::*;

const ROUND_TRIP_CASES: u32 = 24;
const MUTATION_CASES: u32 = 24;
const ARBITRARY_CASES: u32 = 12;
const CLIENT_ID: &str = "client-é";

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn entropy() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..384)
}

/// A round trip of generated values at a version; `Ok(false)` if the
/// message could not be encoded.
type RoundTrip = fn(Vec<u8>, i16) -> Result<bool, TestCaseError>;

/// One API under test: how to generate, encode and decode it.
struct Api {
    name: &'static str,
    key: i16,
    versions: Versions,
    /// Round trip of a generated request; `false` if it could not be encoded.
    request_round_trip: RoundTrip,
    /// Round trip of a generated response; `false` if it could not be encoded.
    response_round_trip: RoundTrip,
    /// A valid request frame body (header + body) from generated values.
    request_frame: fn(Vec<u8>, i16) -> Option<Bytes>,
    /// A valid response body from generated values.
    response_body: fn(Vec<u8>, i16) -> Option<Bytes>,
    /// Decodes a response body through `ApiRequest::decode_response`.
    decode_response: fn(&mut Bytes, i16) -> Result<(), ProtocolError>,
}

/// Cuts the single frame out of `wire` with our `FrameDecoder`.
fn one_frame(wire: &[u8]) -> Result<Bytes, TestCaseError> {
    let mut d = FrameDecoder::default();
    d.extend_from_slice(wire);
    let frame = d
        .next_frame()
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(d.buffered(), 0);
    frame.ok_or_else(|| TestCaseError::fail("incomplete frame"))
}

fn request_round_trip<R>(req: R, v: i16, to_any: fn(R) -> AnyRequest) -> Result<bool, TestCaseError>
where
    R: ApiRequest + Clone + PartialEq + Debug,
{
    let mut wire = BytesMut::new();
    match encode_request_frame(&req, v, 0x1234_5678, Some(CLIENT_ID), &mut wire) {
        Ok(()) => {}
        Err(ProtocolError::Encode { .. }) => {
            prop_assert!(wire.is_empty(), "a failed encode leaves nothing behind");
            return Ok(false);
        }
        Err(e) => return Err(TestCaseError::fail(format!("{e}"))),
    }
    let mut frame = one_frame(&wire)?;
    let header =
        decode_request_header(&mut frame).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(header.api_key, R::API_KEY);
    prop_assert_eq!(header.api_version, v);
    prop_assert_eq!(header.correlation_id, 0x1234_5678);
    prop_assert_eq!(header.client_id.as_deref(), Some(CLIENT_ID));
    let body = frame.clone();

    // By key, as the broker decodes.
    let any = decode_request(header.api_key, v, &mut frame)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(frame.is_empty(), "{} bytes left over", frame.len());
    prop_assert_eq!(any, to_any(req.clone()));

    // By type, and back to the same bytes.
    let mut b = body.clone();
    let decoded = R::decode_request(&mut b, v).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(b.is_empty());
    prop_assert_eq!(&decoded, &req);
    let mut again = BytesMut::new();
    decoded
        .encode_request(&mut again, v)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&again[..], &body[..]);
    Ok(true)
}

fn response_round_trip<R>(resp: R::Response, v: i16) -> Result<bool, TestCaseError>
where
    R: ApiRequest,
    R::Response: Clone + PartialEq + Debug,
{
    let mut wire = BytesMut::new();
    match encode_response_frame::<R>(&resp, v, -7, &mut wire) {
        Ok(()) => {}
        Err(ProtocolError::Encode { .. }) => {
            prop_assert!(wire.is_empty(), "a failed encode leaves nothing behind");
            return Ok(false);
        }
        Err(e) => return Err(TestCaseError::fail(format!("{e}"))),
    }
    let mut frame = one_frame(&wire)?;
    let corr = decode_response_header(&mut frame, R::API_KEY, v)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(corr, -7);
    let body = frame.clone();
    let decoded =
        R::decode_response(&mut frame, v).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(frame.is_empty(), "{} bytes left over", frame.len());
    prop_assert_eq!(&decoded, &resp);
    let mut again = BytesMut::new();
    R::encode_response(&decoded, &mut again, v).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&again[..], &body[..]);
    Ok(true)
}

fn request_frame<R: ApiRequest>(req: R, v: i16) -> Option<Bytes> {
    let mut wire = BytesMut::new();
    encode_request_frame(&req, v, 42, Some(CLIENT_ID), &mut wire).ok()?;
    Some(wire.freeze().slice(4..))
}

fn response_body<R: ApiRequest>(resp: R::Response, v: i16) -> Option<Bytes> {
    let mut out = BytesMut::new();
    R::encode_response(&resp, &mut out, v).ok()?;
    Some(out.freeze())
}

macro_rules! kafka_api {
    ($req:ty, $gen_req:path, $gen_resp:path) => {
        Api {
            name: stringify!($req),
            key: <$req as ApiRequest>::API_KEY,
            versions: <$req as ApiRequest>::versions(),
            request_round_trip: |data, v| {
                let req = $gen_req(&mut G::new(data), v);
                request_round_trip(req, v, |r| AnyRequest::Kafka(Box::new(r.into())))
            },
            response_round_trip: |data, v| {
                response_round_trip::<$req>($gen_resp(&mut G::new(data), v), v)
            },
            request_frame: |data, v| request_frame($gen_req(&mut G::new(data), v), v),
            response_body: |data, v| response_body::<$req>($gen_resp(&mut G::new(data), v), v),
            decode_response: |b, v| <$req>::decode_response(b, v).map(|_| ()),
        }
    };
}

fn gen_share_fetch(g: &mut G, v: i16) -> ShareFetchV2Request {
    let request = gm::share_fetch_request__ShareFetchRequest(g, 1);
    let (share_acquire_mode, is_renew_ack) = if v >= 2 {
        (g.i8(), g.bool())
    } else {
        (0, false)
    };
    ShareFetchV2Request {
        request,
        share_acquire_mode,
        is_renew_ack,
    }
}

fn gen_api_versions(g: &mut G, v: i16) -> ApiVersionsV5Request {
    let request = gm::api_versions_request__ApiVersionsRequest(g, v.min(4));
    let (cluster_id, node_id) = if v >= 5 {
        (g.opt(|g| g.string().to_string()), g.i32())
    } else {
        (None, -1)
    };
    ApiVersionsV5Request {
        request,
        cluster_id,
        node_id,
    }
}

fn gen_share_ack(g: &mut G, v: i16) -> ShareAcknowledgeV2Request {
    let request = gm::share_acknowledge_request__ShareAcknowledgeRequest(g, 1);
    ShareAcknowledgeV2Request {
        request,
        is_renew_ack: v >= 2 && g.bool(),
    }
}

fn gen_share_ack_response(g: &mut G, v: i16) -> ShareAcknowledgeV2Response {
    let response = gm::share_acknowledge_response__ShareAcknowledgeResponse(g, 1);
    ShareAcknowledgeV2Response {
        response,
        acquisition_lock_timeout_ms: if v >= 2 { g.i32() } else { 0 },
    }
}

fn gen_txn_request(g: &mut G) -> TxnShareAcknowledgeRequest {
    let s = |g: &mut G| g.opt(|g| g.string().to_string());
    TxnShareAcknowledgeRequest {
        transactional_id: s(g),
        group_id: s(g),
        producer_id: g.i64(),
        producer_epoch: g.i16(),
        member_id: s(g),
        member_epoch: g.i32(),
        topics: g.vec(|g| TxnShareAcknowledgeTopic {
            topic_id: g.uuid(),
            partitions: g.vec(|g| TxnShareAcknowledgePartition {
                partition_index: g.i32(),
                acknowledgement_batches: g.vec(|g| TxnShareAcknowledgementBatch {
                    first_offset: g.i64(),
                    last_offset: g.i64(),
                    acknowledge_types: g.vec(|g| g.i8()),
                }),
            }),
        }),
    }
}

fn gen_txn_response(g: &mut G) -> TxnShareAcknowledgeResponse {
    TxnShareAcknowledgeResponse {
        throttle_time_ms: g.i32(),
        error_code: g.i16(),
        responses: g.vec(|g| TxnShareAcknowledgeTopicResponse {
            topic_id: g.uuid(),
            partitions: g.vec(|g| TxnShareAcknowledgePartitionResponse {
                partition_index: g.i32(),
                error_code: g.i16(),
                error_message: g.opt(|g| g.string().to_string()),
                current_leader: LeaderIdAndEpoch {
                    leader_id: g.i32(),
                    leader_epoch: g.i32(),
                },
            }),
        }),
        node_endpoints: g.vec(|g| NodeEndpoint {
            node_id: g.i32(),
            host: g.string().to_string(),
            port: g.i32(),
            rack: g.opt(|g| g.string().to_string()),
        }),
    }
}

fn apis() -> Vec<Api> {
    vec![
        // ApiVersions v0-5 through our wrapper (api_versions_v5.rs):
        // kafka-protocol's v4 struct plus the v5 fields, generated here.
        Api {
            name: "ApiVersionsRequest",
            key: 18,
            versions: API_VERSIONS_VERSIONS,
            request_round_trip: |data, v| {
                request_round_trip(
                    gen_api_versions(&mut G::new(data), v),
                    v,
                    AnyRequest::ApiVersions,
                )
            },
            response_round_trip: |data, v| {
                response_round_trip::<ApiVersionsV5Request>(
                    gm::api_versions_response__ApiVersionsResponse(&mut G::new(data), v.min(4)),
                    v,
                )
            },
            request_frame: |data, v| request_frame(gen_api_versions(&mut G::new(data), v), v),
            response_body: |data, v| {
                response_body::<ApiVersionsV5Request>(
                    gm::api_versions_response__ApiVersionsResponse(&mut G::new(data), v.min(4)),
                    v,
                )
            },
            decode_response: |b, v| ApiVersionsV5Request::decode_response(b, v).map(|_| ()),
        },
        kafka_api!(
            MetadataRequest,
            gm::metadata_request__MetadataRequest,
            gm::metadata_response__MetadataResponse
        ),
        kafka_api!(
            CreateTopicsRequest,
            gm::create_topics_request__CreateTopicsRequest,
            gm::create_topics_response__CreateTopicsResponse
        ),
        kafka_api!(
            DeleteTopicsRequest,
            gm::delete_topics_request__DeleteTopicsRequest,
            gm::delete_topics_response__DeleteTopicsResponse
        ),
        kafka_api!(
            CreatePartitionsRequest,
            gm::create_partitions_request__CreatePartitionsRequest,
            gm::create_partitions_response__CreatePartitionsResponse
        ),
        kafka_api!(
            ListOffsetsRequest,
            gm::list_offsets_request__ListOffsetsRequest,
            gm::list_offsets_response__ListOffsetsResponse
        ),
        kafka_api!(
            ProduceRequest,
            gm::produce_request__ProduceRequest,
            gm::produce_response__ProduceResponse
        ),
        kafka_api!(
            FetchRequest,
            gm::fetch_request__FetchRequest,
            gm::fetch_response__FetchResponse
        ),
        kafka_api!(
            FindCoordinatorRequest,
            gm::find_coordinator_request__FindCoordinatorRequest,
            gm::find_coordinator_response__FindCoordinatorResponse
        ),
        kafka_api!(
            InitProducerIdRequest,
            gm::init_producer_id_request__InitProducerIdRequest,
            gm::init_producer_id_response__InitProducerIdResponse
        ),
        kafka_api!(
            AddPartitionsToTxnRequest,
            gm::add_partitions_to_txn_request__AddPartitionsToTxnRequest,
            gm::add_partitions_to_txn_response__AddPartitionsToTxnResponse
        ),
        kafka_api!(
            AddOffsetsToTxnRequest,
            gm::add_offsets_to_txn_request__AddOffsetsToTxnRequest,
            gm::add_offsets_to_txn_response__AddOffsetsToTxnResponse
        ),
        kafka_api!(
            EndTxnRequest,
            gm::end_txn_request__EndTxnRequest,
            gm::end_txn_response__EndTxnResponse
        ),
        kafka_api!(
            WriteTxnMarkersRequest,
            gm::write_txn_markers_request__WriteTxnMarkersRequest,
            gm::write_txn_markers_response__WriteTxnMarkersResponse
        ),
        kafka_api!(
            TxnOffsetCommitRequest,
            gm::txn_offset_commit_request__TxnOffsetCommitRequest,
            gm::txn_offset_commit_response__TxnOffsetCommitResponse
        ),
        kafka_api!(
            DescribeConfigsRequest,
            gm::describe_configs_request__DescribeConfigsRequest,
            gm::describe_configs_response__DescribeConfigsResponse
        ),
        kafka_api!(
            IncrementalAlterConfigsRequest,
            gm::incremental_alter_configs_request__IncrementalAlterConfigsRequest,
            gm::incremental_alter_configs_response__IncrementalAlterConfigsResponse
        ),
        kafka_api!(
            DescribeClusterRequest,
            gm::describe_cluster_request__DescribeClusterRequest,
            gm::describe_cluster_response__DescribeClusterResponse
        ),
        kafka_api!(
            UpdateFeaturesRequest,
            gm::update_features_request__UpdateFeaturesRequest,
            gm::update_features_response__UpdateFeaturesResponse
        ),
        kafka_api!(
            ShareGroupHeartbeatRequest,
            gm::share_group_heartbeat_request__ShareGroupHeartbeatRequest,
            gm::share_group_heartbeat_response__ShareGroupHeartbeatResponse
        ),
        kafka_api!(
            ShareGroupDescribeRequest,
            gm::share_group_describe_request__ShareGroupDescribeRequest,
            gm::share_group_describe_response__ShareGroupDescribeResponse
        ),
        // ShareFetch / ShareAcknowledge v1-2 through our wrappers
        // (src/protocol/share_v2.rs): kafka-protocol's v1 structs plus the
        // v2 fields, generated here.
        Api {
            name: "ShareFetchRequest",
            key: 78,
            versions: SHARE_VERSIONS,
            request_round_trip: |data, v| {
                request_round_trip(
                    gen_share_fetch(&mut G::new(data), v),
                    v,
                    AnyRequest::ShareFetch,
                )
            },
            response_round_trip: |data, v| {
                response_round_trip::<ShareFetchV2Request>(
                    gm::share_fetch_response__ShareFetchResponse(&mut G::new(data), 1),
                    v,
                )
            },
            request_frame: |data, v| request_frame(gen_share_fetch(&mut G::new(data), v), v),
            response_body: |data, v| {
                response_body::<ShareFetchV2Request>(
                    gm::share_fetch_response__ShareFetchResponse(&mut G::new(data), 1),
                    v,
                )
            },
            decode_response: |b, v| ShareFetchV2Request::decode_response(b, v).map(|_| ()),
        },
        Api {
            name: "ShareAcknowledgeRequest",
            key: 79,
            versions: SHARE_VERSIONS,
            request_round_trip: |data, v| {
                request_round_trip(
                    gen_share_ack(&mut G::new(data), v),
                    v,
                    AnyRequest::ShareAcknowledge,
                )
            },
            response_round_trip: |data, v| {
                response_round_trip::<ShareAcknowledgeV2Request>(
                    gen_share_ack_response(&mut G::new(data), v),
                    v,
                )
            },
            request_frame: |data, v| request_frame(gen_share_ack(&mut G::new(data), v), v),
            response_body: |data, v| {
                response_body::<ShareAcknowledgeV2Request>(
                    gen_share_ack_response(&mut G::new(data), v),
                    v,
                )
            },
            decode_response: |b, v| ShareAcknowledgeV2Request::decode_response(b, v).map(|_| ()),
        },
        kafka_api!(
            SaslHandshakeRequest,
            gm::sasl_handshake_request__SaslHandshakeRequest,
            gm::sasl_handshake_response__SaslHandshakeResponse
        ),
        kafka_api!(
            SaslAuthenticateRequest,
            gm::sasl_authenticate_request__SaslAuthenticateRequest,
            gm::sasl_authenticate_response__SaslAuthenticateResponse
        ),
        kafka_api!(
            CreateAclsRequest,
            gm::create_acls_request__CreateAclsRequest,
            gm::create_acls_response__CreateAclsResponse
        ),
        kafka_api!(
            DescribeAclsRequest,
            gm::describe_acls_request__DescribeAclsRequest,
            gm::describe_acls_response__DescribeAclsResponse
        ),
        kafka_api!(
            DeleteAclsRequest,
            gm::delete_acls_request__DeleteAclsRequest,
            gm::delete_acls_response__DeleteAclsResponse
        ),
        Api {
            name: "TxnShareAcknowledgeRequest",
            key: TXN_SHARE_ACKNOWLEDGE_API_KEY,
            versions: TxnShareAcknowledgeRequest::VERSIONS,
            request_round_trip: |data, v| {
                request_round_trip(
                    gen_txn_request(&mut G::new(data)),
                    v,
                    AnyRequest::TxnShareAcknowledge,
                )
            },
            response_round_trip: |data, v| {
                response_round_trip::<TxnShareAcknowledgeRequest>(
                    gen_txn_response(&mut G::new(data)),
                    v,
                )
            },
            request_frame: |data, v| request_frame(gen_txn_request(&mut G::new(data)), v),
            response_body: |data, v| {
                response_body::<TxnShareAcknowledgeRequest>(gen_txn_response(&mut G::new(data)), v)
            },
            decode_response: |b, v| TxnShareAcknowledgeRequest::decode_response(b, v).map(|_| ()),
        },
        Api {
            name: "StreamsGroupHeartbeatRequest",
            key: sg::STREAMS_GROUP_HEARTBEAT_API_KEY,
            versions: sg::StreamsGroupHeartbeatRequest::VERSIONS,
            request_round_trip: |data, v| {
                request_round_trip(
                    gen_streams::heartbeat_request(&mut G::new(data)),
                    v,
                    AnyRequest::StreamsGroupHeartbeat,
                )
            },
            response_round_trip: |data, v| {
                response_round_trip::<sg::StreamsGroupHeartbeatRequest>(
                    gen_streams::heartbeat_response(&mut G::new(data)),
                    v,
                )
            },
            request_frame: |data, v| {
                request_frame(gen_streams::heartbeat_request(&mut G::new(data)), v)
            },
            response_body: |data, v| {
                response_body::<sg::StreamsGroupHeartbeatRequest>(
                    gen_streams::heartbeat_response(&mut G::new(data)),
                    v,
                )
            },
            decode_response: |b, v| {
                sg::StreamsGroupHeartbeatRequest::decode_response(b, v).map(|_| ())
            },
        },
        Api {
            name: "StreamsGroupDescribeRequest",
            key: sg::STREAMS_GROUP_DESCRIBE_API_KEY,
            versions: sg::StreamsGroupDescribeRequest::VERSIONS,
            request_round_trip: |data, v| {
                request_round_trip(
                    gen_streams::describe_request(&mut G::new(data)),
                    v,
                    AnyRequest::StreamsGroupDescribe,
                )
            },
            response_round_trip: |data, v| {
                response_round_trip::<sg::StreamsGroupDescribeRequest>(
                    gen_streams::describe_response(&mut G::new(data)),
                    v,
                )
            },
            request_frame: |data, v| {
                request_frame(gen_streams::describe_request(&mut G::new(data)), v)
            },
            response_body: |data, v| {
                response_body::<sg::StreamsGroupDescribeRequest>(
                    gen_streams::describe_response(&mut G::new(data)),
                    v,
                )
            },
            decode_response: |b, v| {
                sg::StreamsGroupDescribeRequest::decode_response(b, v).map(|_| ())
            },
        },
    ]
}

fn versions(api: &Api) -> impl Iterator<Item = i16> {
    api.versions.min..=api.versions.max
}

/// Runs `round_trip` for every API and version; fails if any case fails or
/// if too few cases could be encoded at all.
fn round_trip_all(side: &str, pick: fn(&Api) -> RoundTrip) {
    let mut pairs = 0;
    for api in apis() {
        assert_eq!(codec_versions(api.key), Some(api.versions), "{}", api.name);
        for v in versions(&api) {
            let ran = Cell::new(0u32);
            let total = Cell::new(0u32);
            let f = pick(&api);
            TestRunner::new(config(ROUND_TRIP_CASES))
                .run(&entropy(), |data| {
                    total.set(total.get() + 1);
                    if f(data, v)? {
                        ran.set(ran.get() + 1);
                    }
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{} {side} v{v}: {e}", api.name));
            // Generation is version-aware, so every case must encode.
            assert_eq!(
                ran.get(),
                total.get(),
                "{} {side} v{v}: only {} of {} generated cases could be encoded",
                api.name,
                ran.get(),
                total.get()
            );
            pairs += 1;
        }
    }
    assert!(pairs >= 130, "only {pairs} (api, version) pairs");
}

#[test]
fn requests_round_trip_at_every_version() {
    round_trip_all("request", |a| a.request_round_trip);
}

#[test]
fn responses_round_trip_at_every_version() {
    round_trip_all("response", |a| a.response_round_trip);
}

/// Generated messages are not mostly empty: the generators reach nested arrays.
#[test]
fn generated_messages_are_populated() {
    let mut runner = TestRunner::new(config(64));
    let mut big = 0;
    for _ in 0..64 {
        let data = entropy().new_tree(&mut runner).unwrap().current();
        let req = gm::metadata_request__MetadataRequest(&mut G::new(data.clone()), 12);
        let resp = gm::fetch_response__FetchResponse(&mut G::new(data), 16);
        let topics = req.topics.map_or(0, |t| t.len());
        let partitions: usize = resp.responses.iter().map(|t| t.partitions.len()).sum();
        if topics > 0 && partitions > 0 {
            big += 1;
        }
    }
    assert!(big >= 8, "only {big} of 64 cases had nested content");
}

// ---------------------------------------------------------------------------
// Never panic.

/// One edit of a valid encoding.
#[derive(Debug, Clone)]
enum Mutation {
    FlipBit(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Overwrite(usize, u8),
    /// A hostile array count or length: i32::MAX / -2, or a varint of 2^32-1.
    HostileCount(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(p, b)| Mutation::FlipBit(p, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..6))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Overwrite(p, b)),
        (any::<usize>(), 0u8..3).prop_map(|(p, k)| Mutation::HostileCount(p, k)),
    ]
}

fn mutate(bytes: &[u8], muts: &[Mutation], keep_prefix: usize) -> Bytes {
    let mut b = bytes.to_vec();
    for m in muts {
        let room = b.len().saturating_sub(keep_prefix);
        let pos = |p: usize, extra: usize| keep_prefix + p % (room + extra).max(1);
        match m {
            Mutation::FlipBit(p, bit) if room > 0 => {
                let i = pos(*p, 0);
                b[i] ^= 1 << bit;
            }
            Mutation::Overwrite(p, v) if room > 0 => {
                let i = pos(*p, 0);
                b[i] = *v;
            }
            Mutation::Truncate(p) => b.truncate(pos(*p, 1).min(b.len())),
            Mutation::Insert(p, bytes) => {
                let i = pos(*p, 1).min(b.len());
                b.splice(i..i, bytes.iter().copied());
            }
            Mutation::HostileCount(p, kind) => {
                let i = pos(*p, 1).min(b.len());
                let count: &[u8] = match kind {
                    0 => &[0x7f, 0xff, 0xff, 0xff],
                    1 => &[0xff, 0xff, 0xff, 0xfe],
                    _ => &[0xff, 0xff, 0xff, 0xff, 0x0f],
                };
                let end = (i + count.len()).min(b.len());
                b.splice(i..end, count.iter().copied());
            }
            _ => {}
        }
    }
    Bytes::from(b)
}

/// The broker's path for one request frame: header, then body by key.
fn decode_request_frame(mut frame: Bytes) {
    if let Ok(h) = decode_request_header(&mut frame) {
        let _ = decode_request(h.api_key, h.api_version, &mut frame);
    }
}

#[test]
fn mutated_requests_never_panic() {
    let mut pairs = 0;
    for api in apis() {
        for v in versions(&api) {
            let f = api.request_frame;
            // Mutations before the header's first 8 bytes would mostly just
            // change the key; keep those intact half of the time.
            TestRunner::new(config(MUTATION_CASES))
                .run(
                    &(
                        entropy(),
                        proptest::collection::vec(mutation(), 1..4),
                        any::<bool>(),
                    ),
                    |(data, muts, keep_key)| {
                        let valid = f(data, v).expect("version-aware generation encodes");
                        let frame = mutate(&valid, &muts, if keep_key { 8 } else { 0 });
                        // Through the frame decoder too, as off a socket.
                        let mut wire = BytesMut::new();
                        encode_frame(&frame, &mut wire);
                        let frame = one_frame(&wire)?;
                        decode_request_frame(frame);
                        Ok(())
                    },
                )
                .unwrap_or_else(|e| panic!("{} request v{v}: {e}", api.name));
            pairs += 1;
        }
    }
    assert!(pairs >= 130, "only {pairs} (api, version) pairs");
}

#[test]
fn mutated_responses_never_panic() {
    for api in apis() {
        for v in versions(&api) {
            let (f, dec) = (api.response_body, api.decode_response);
            TestRunner::new(config(MUTATION_CASES))
                .run(
                    &(entropy(), proptest::collection::vec(mutation(), 1..4)),
                    |(data, muts)| {
                        let valid = f(data, v).expect("version-aware generation encodes");
                        let mut body = mutate(&valid, &muts, 0);
                        let _ = dec(&mut body, v);
                        // With a response header in front, as the client reads it.
                        let mut framed = BytesMut::new();
                        framed.put_i32(9);
                        framed.put_slice(&mutate(&valid, &muts, 0));
                        let mut framed = framed.freeze();
                        if decode_response_header(&mut framed, api.key, v).is_ok() {
                            let _ = dec(&mut framed, v);
                        }
                        Ok(())
                    },
                )
                .unwrap_or_else(|e| panic!("{} response v{v}: {e}", api.name));
        }
    }
}

/// A well-formed request header for `key` at `v`, so that arbitrary bytes
/// reach the body decoder of every API and version.
fn request_header(key: i16, v: i16) -> BytesMut {
    let mut h = BytesMut::new();
    h.put_i16(key);
    h.put_i16(v);
    h.put_i32(1);
    if request_header_version(key, v).unwrap() >= 1 {
        h.put_i16(-1); // null client id
    }
    if request_header_version(key, v).unwrap() >= 2 {
        h.put_u8(0); // no tagged fields
    }
    h
}

fn every_decodable_key() -> Vec<i16> {
    let mut keys: Vec<i16> = ApiKey::iter().map(|k| k as i16).collect();
    keys.push(TXN_SHARE_ACKNOWLEDGE_API_KEY);
    keys.push(sg::STREAMS_GROUP_HEARTBEAT_API_KEY);
    keys.push(sg::STREAMS_GROUP_DESCRIBE_API_KEY);
    keys
}

#[test]
fn arbitrary_bodies_never_panic_for_any_key_and_version() {
    let mut pairs = 0;
    for key in every_decodable_key() {
        let range = codec_versions(key).expect("known key");
        for v in range.min..=range.max {
            TestRunner::new(config(ARBITRARY_CASES))
                .run(&proptest::collection::vec(any::<u8>(), 0..256), |body| {
                    let mut frame = request_header(key, v);
                    frame.put_slice(&body);
                    decode_request_frame(frame.freeze());
                    // The body alone, straight to the decoder.
                    let _ = decode_request(key, v, &mut Bytes::from(body));
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("key {key} v{v}: {e}"));
            pairs += 1;
        }
    }
    assert!(pairs > 250, "only {pairs} (key, version) pairs");
}

#[test]
fn arbitrary_response_bodies_never_panic() {
    for api in apis() {
        for v in versions(&api) {
            TestRunner::new(config(ARBITRARY_CASES))
                .run(&proptest::collection::vec(any::<u8>(), 0..256), |body| {
                    let _ = (api.decode_response)(&mut Bytes::from(body), v);
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{} response v{v}: {e}", api.name));
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// Whole streams of arbitrary bytes, header included.
    #[test]
    fn arbitrary_streams_never_panic(wire in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut d = FrameDecoder::new(4096);
        d.extend_from_slice(&wire);
        while let Ok(Some(frame)) = d.next_frame() {
            decode_request_frame(frame);
        }
    }
}
