//! TxnShareAcknowledge (KIP-1289), request and response v0.
//!
//! The API stages share-group acknowledgements in a producer's transaction.
//! Its key is [`TXN_SHARE_ACKNOWLEDGE_API_KEY`] = 95 for request *and*
//! response (the KIP's 93 collides with StreamsGroupTopologyDescriptionUpdate
//! upstream and its "response key 94" is a slip; see docs/DESIGN.md D1).
//!
//! All versions are flexible: compact strings and arrays, and a tagged-field
//! section after every struct. The response carries two tagged fields, as
//! ShareAcknowledge does: `CurrentLeader` (tag 0) in each partition and
//! `NodeEndpoints` (tag 0) at the top level.
//!
//! Wire layout (v0):
//! ```text
//! Request  => TransactionalId GroupId ProducerId ProducerEpoch MemberId MemberEpoch [Topics] _tagged
//!   TransactionalId, GroupId, MemberId => COMPACT_NULLABLE_STRING (null is answered INVALID_REQUEST)
//!   ProducerId => INT64   ProducerEpoch => INT16   MemberEpoch => INT32
//!   Topics => TopicId:UUID [Partitions] _tagged
//!     Partitions => PartitionIndex:INT32 [AcknowledgementBatches] _tagged
//!       AcknowledgementBatches => FirstOffset:INT64 LastOffset:INT64 [AcknowledgeTypes:INT8] _tagged
//! Response => ThrottleTimeMs:INT32 ErrorCode:INT16 [Responses] _tagged{0: [NodeEndpoints]}
//!   Responses => TopicId:UUID [Partitions] _tagged
//!     Partitions => PartitionIndex:INT32 ErrorCode:INT16 ErrorMessage:COMPACT_NULLABLE_STRING
//!                   _tagged{0: CurrentLeader}
//!       CurrentLeader => LeaderId:INT32 LeaderEpoch:INT32 _tagged
//!   NodeEndpoints => NodeId:INT32 Host:COMPACT_STRING Port:INT32 Rack:COMPACT_NULLABLE_STRING _tagged
//! ```

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::api::{ApiRequest, Versions};
use super::error::ProtocolError;
use super::wire::{
    Reader, put_compact_array_len, put_compact_nullable_string, put_compact_string,
    put_tagged_fields, put_uuid,
};

/// The API key of TxnShareAcknowledge, for request and response alike.
pub const TXN_SHARE_ACKNOWLEDGE_API_KEY: i16 = 95;

/// Acknowledge type: the offset held no record (control record, aborted
/// transaction, compacted away).
pub const ACK_GAP: i8 = 0;
/// Acknowledge type: processed.
pub const ACK_ACCEPT: i8 = 1;
/// Acknowledge type: give it back for another delivery.
pub const ACK_RELEASE: i8 = 2;
/// Acknowledge type: unprocessable, never deliver again.
pub const ACK_REJECT: i8 = 3;
/// Acknowledge type: extend the acquisition lock (ShareFetch/ShareAcknowledge v2).
pub const ACK_RENEW: i8 = 4;

/// One range of acknowledged offsets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnShareAcknowledgementBatch {
    /// First offset, inclusive.
    pub first_offset: i64,
    /// Last offset, inclusive.
    pub last_offset: i64,
    /// One type for the whole range (length 1) or one per offset.
    pub acknowledge_types: Vec<i8>,
}

/// Acknowledgements for one partition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnShareAcknowledgePartition {
    /// Partition index.
    pub partition_index: i32,
    /// Batches, sorted and non-overlapping.
    pub acknowledgement_batches: Vec<TxnShareAcknowledgementBatch>,
}

/// Acknowledgements for one topic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnShareAcknowledgeTopic {
    /// Topic id.
    pub topic_id: Uuid,
    /// Partitions.
    pub partitions: Vec<TxnShareAcknowledgePartition>,
}

/// TxnShareAcknowledge request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnShareAcknowledgeRequest {
    /// The producer's `transactional.id`.
    pub transactional_id: Option<String>,
    /// The share group id.
    pub group_id: Option<String>,
    /// Producer id, for fencing.
    pub producer_id: i64,
    /// Producer epoch, for fencing.
    pub producer_epoch: i16,
    /// The share-group member id that holds the records.
    pub member_id: Option<String>,
    /// That member's epoch.
    pub member_epoch: i32,
    /// What to stage.
    pub topics: Vec<TxnShareAcknowledgeTopic>,
}

/// Leader of a partition, sent with NOT_LEADER_OR_FOLLOWER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderIdAndEpoch {
    /// Leader broker id, -1 if unknown.
    pub leader_id: i32,
    /// Leader epoch, -1 if unknown.
    pub leader_epoch: i32,
}

impl Default for LeaderIdAndEpoch {
    fn default() -> Self {
        Self {
            leader_id: -1,
            leader_epoch: -1,
        }
    }
}

/// Result for one partition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnShareAcknowledgePartitionResponse {
    /// Partition index.
    pub partition_index: i32,
    /// Error code, 0 if staged.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
    /// The current leader (tag 0), set with NOT_LEADER_OR_FOLLOWER.
    pub current_leader: LeaderIdAndEpoch,
}

/// Results for one topic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnShareAcknowledgeTopicResponse {
    /// Topic id.
    pub topic_id: Uuid,
    /// Partitions.
    pub partitions: Vec<TxnShareAcknowledgePartitionResponse>,
}

/// A broker address referenced by a `CurrentLeader`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeEndpoint {
    /// Broker id.
    pub node_id: i32,
    /// Host.
    pub host: String,
    /// Port.
    pub port: i32,
    /// Rack.
    pub rack: Option<String>,
}

/// TxnShareAcknowledge response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnShareAcknowledgeResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Top-level error.
    pub error_code: i16,
    /// Per-topic results.
    pub responses: Vec<TxnShareAcknowledgeTopicResponse>,
    /// Endpoints of leaders named in the results (tag 0).
    pub node_endpoints: Vec<NodeEndpoint>,
}

impl TxnShareAcknowledgeRequest {
    /// Versions this build encodes and decodes.
    pub const VERSIONS: Versions = Versions { min: 0, max: 0 };
}

fn skip_tags(r: &mut Reader, what: &'static str) -> Result<(), ProtocolError> {
    r.tagged_fields(what, |_, _| Ok(false))
}

fn empty_tags(out: &mut BytesMut) {
    put_tagged_fields(out, &[]);
}

fn encode_request(req: &TxnShareAcknowledgeRequest, out: &mut BytesMut) {
    put_compact_nullable_string(out, req.transactional_id.as_deref());
    put_compact_nullable_string(out, req.group_id.as_deref());
    out.put_i64(req.producer_id);
    out.put_i16(req.producer_epoch);
    put_compact_nullable_string(out, req.member_id.as_deref());
    out.put_i32(req.member_epoch);
    put_compact_array_len(out, Some(req.topics.len()));
    for t in &req.topics {
        put_uuid(out, &t.topic_id);
        put_compact_array_len(out, Some(t.partitions.len()));
        for p in &t.partitions {
            out.put_i32(p.partition_index);
            put_compact_array_len(out, Some(p.acknowledgement_batches.len()));
            for b in &p.acknowledgement_batches {
                out.put_i64(b.first_offset);
                out.put_i64(b.last_offset);
                put_compact_array_len(out, Some(b.acknowledge_types.len()));
                for &ty in &b.acknowledge_types {
                    out.put_i8(ty);
                }
                empty_tags(out);
            }
            empty_tags(out);
        }
        empty_tags(out);
    }
    empty_tags(out);
}

fn array(r: &mut Reader, min_size: usize, what: &'static str) -> Result<usize, ProtocolError> {
    r.compact_array_len(min_size, what)?
        .ok_or_else(|| ProtocolError::malformed(what, "null array"))
}

fn decode_request(buf: &mut Bytes) -> Result<TxnShareAcknowledgeRequest, ProtocolError> {
    let mut r = Reader::new(std::mem::take(buf));
    let transactional_id = r.compact_nullable_string("TransactionalId")?;
    let group_id = r.compact_nullable_string("GroupId")?;
    let producer_id = r.i64("ProducerId")?;
    let producer_epoch = r.i16("ProducerEpoch")?;
    let member_id = r.compact_nullable_string("MemberId")?;
    let member_epoch = r.i32("MemberEpoch")?;
    // Minimum encoded sizes: topic 16+1+1, partition 4+1+1, batch 8+8+1+1.
    let n_topics = array(&mut r, 18, "Topics")?;
    let mut topics = Vec::with_capacity(n_topics);
    for _ in 0..n_topics {
        let topic_id = r.uuid("TopicId")?;
        let n_parts = array(&mut r, 6, "Partitions")?;
        let mut partitions = Vec::with_capacity(n_parts);
        for _ in 0..n_parts {
            let partition_index = r.i32("PartitionIndex")?;
            let n_batches = array(&mut r, 18, "AcknowledgementBatches")?;
            let mut acknowledgement_batches = Vec::with_capacity(n_batches);
            for _ in 0..n_batches {
                let first_offset = r.i64("FirstOffset")?;
                let last_offset = r.i64("LastOffset")?;
                let n_types = array(&mut r, 1, "AcknowledgeTypes")?;
                let types = r.bytes(n_types, "AcknowledgeTypes")?;
                let acknowledge_types = types.iter().map(|&b| b as i8).collect();
                skip_tags(&mut r, "AcknowledgementBatch tagged fields")?;
                acknowledgement_batches.push(TxnShareAcknowledgementBatch {
                    first_offset,
                    last_offset,
                    acknowledge_types,
                });
            }
            skip_tags(&mut r, "Partition tagged fields")?;
            partitions.push(TxnShareAcknowledgePartition {
                partition_index,
                acknowledgement_batches,
            });
        }
        skip_tags(&mut r, "Topic tagged fields")?;
        topics.push(TxnShareAcknowledgeTopic {
            topic_id,
            partitions,
        });
    }
    skip_tags(&mut r, "TxnShareAcknowledgeRequest tagged fields")?;
    *buf = r.into_rest();
    Ok(TxnShareAcknowledgeRequest {
        transactional_id,
        group_id,
        producer_id,
        producer_epoch,
        member_id,
        member_epoch,
        topics,
    })
}

fn encode_response(resp: &TxnShareAcknowledgeResponse, out: &mut BytesMut) {
    out.put_i32(resp.throttle_time_ms);
    out.put_i16(resp.error_code);
    put_compact_array_len(out, Some(resp.responses.len()));
    for t in &resp.responses {
        put_uuid(out, &t.topic_id);
        put_compact_array_len(out, Some(t.partitions.len()));
        for p in &t.partitions {
            out.put_i32(p.partition_index);
            out.put_i16(p.error_code);
            put_compact_nullable_string(out, p.error_message.as_deref());
            if p.current_leader != LeaderIdAndEpoch::default() {
                let mut v = BytesMut::new();
                v.put_i32(p.current_leader.leader_id);
                v.put_i32(p.current_leader.leader_epoch);
                empty_tags(&mut v);
                put_tagged_fields(out, &[(0, v)]);
            } else {
                empty_tags(out);
            }
        }
        empty_tags(out);
    }
    if resp.node_endpoints.is_empty() {
        empty_tags(out);
    } else {
        let mut v = BytesMut::new();
        put_compact_array_len(&mut v, Some(resp.node_endpoints.len()));
        for n in &resp.node_endpoints {
            v.put_i32(n.node_id);
            put_compact_string(&mut v, &n.host);
            v.put_i32(n.port);
            put_compact_nullable_string(&mut v, n.rack.as_deref());
            empty_tags(&mut v);
        }
        put_tagged_fields(out, &[(0, v)]);
    }
}

fn decode_response(buf: &mut Bytes) -> Result<TxnShareAcknowledgeResponse, ProtocolError> {
    let mut r = Reader::new(std::mem::take(buf));
    let throttle_time_ms = r.i32("ThrottleTimeMs")?;
    let error_code = r.i16("ErrorCode")?;
    let n_topics = array(&mut r, 18, "Responses")?;
    let mut responses = Vec::with_capacity(n_topics);
    for _ in 0..n_topics {
        let topic_id = r.uuid("TopicId")?;
        let n_parts = array(&mut r, 8, "Partitions")?;
        let mut partitions = Vec::with_capacity(n_parts);
        for _ in 0..n_parts {
            let partition_index = r.i32("PartitionIndex")?;
            let error_code = r.i16("ErrorCode")?;
            let error_message = r.compact_nullable_string("ErrorMessage")?;
            let mut current_leader = LeaderIdAndEpoch::default();
            r.tagged_fields("Partition tagged fields", |tag, f| {
                if tag != 0 {
                    return Ok(false);
                }
                current_leader.leader_id = f.i32("CurrentLeader.LeaderId")?;
                current_leader.leader_epoch = f.i32("CurrentLeader.LeaderEpoch")?;
                skip_tags(f, "CurrentLeader tagged fields")?;
                Ok(true)
            })?;
            partitions.push(TxnShareAcknowledgePartitionResponse {
                partition_index,
                error_code,
                error_message,
                current_leader,
            });
        }
        skip_tags(&mut r, "Topic tagged fields")?;
        responses.push(TxnShareAcknowledgeTopicResponse {
            topic_id,
            partitions,
        });
    }
    let mut node_endpoints = Vec::new();
    r.tagged_fields("TxnShareAcknowledgeResponse tagged fields", |tag, f| {
        if tag != 0 {
            return Ok(false);
        }
        let n = array(f, 11, "NodeEndpoints")?;
        node_endpoints.reserve(n);
        for _ in 0..n {
            let node_id = f.i32("NodeEndpoint.NodeId")?;
            let host = f.compact_string("NodeEndpoint.Host")?;
            let port = f.i32("NodeEndpoint.Port")?;
            let rack = f.compact_nullable_string("NodeEndpoint.Rack")?;
            skip_tags(f, "NodeEndpoint tagged fields")?;
            node_endpoints.push(NodeEndpoint {
                node_id,
                host,
                port,
                rack,
            });
        }
        Ok(true)
    })?;
    *buf = r.into_rest();
    Ok(TxnShareAcknowledgeResponse {
        throttle_time_ms,
        error_code,
        responses,
        node_endpoints,
    })
}

fn version_error(version: i16) -> ProtocolError {
    ProtocolError::UnsupportedVersion {
        api_key: TXN_SHARE_ACKNOWLEDGE_API_KEY,
        api_name: "TxnShareAcknowledge",
        version,
    }
}

fn with_context<T>(r: Result<T, ProtocolError>, version: i16) -> Result<T, ProtocolError> {
    r.map_err(|e| ProtocolError::Decode {
        api_key: TXN_SHARE_ACKNOWLEDGE_API_KEY,
        api_name: "TxnShareAcknowledge",
        version,
        message: e.to_string(),
    })
}

impl ApiRequest for TxnShareAcknowledgeRequest {
    type Response = TxnShareAcknowledgeResponse;
    const API_KEY: i16 = TXN_SHARE_ACKNOWLEDGE_API_KEY;

    fn versions() -> Versions {
        Self::VERSIONS
    }

    fn encode_request(&self, out: &mut BytesMut, version: i16) -> Result<(), ProtocolError> {
        if !Self::VERSIONS.contains(version) {
            return Err(version_error(version));
        }
        encode_request(self, out);
        Ok(())
    }

    fn decode_request(buf: &mut Bytes, version: i16) -> Result<Self, ProtocolError> {
        if !Self::VERSIONS.contains(version) {
            return Err(version_error(version));
        }
        with_context(decode_request(buf), version)
    }

    fn encode_response(
        resp: &Self::Response,
        out: &mut BytesMut,
        version: i16,
    ) -> Result<(), ProtocolError> {
        if !Self::VERSIONS.contains(version) {
            return Err(version_error(version));
        }
        encode_response(resp, out);
        Ok(())
    }

    fn decode_response(buf: &mut Bytes, version: i16) -> Result<Self::Response, ProtocolError> {
        if !Self::VERSIONS.contains(version) {
            return Err(version_error(version));
        }
        with_context(decode_response(buf), version)
    }
}

#[cfg(test)]
mod tests {
    //! Golden bytes written by hand from the layout in the module docs.
    use super::*;

    fn uuid(b: u8) -> Uuid {
        Uuid::from_bytes([b; 16])
    }

    fn golden_request() -> TxnShareAcknowledgeRequest {
        TxnShareAcknowledgeRequest {
            transactional_id: Some("tx".into()),
            group_id: Some("g".into()),
            producer_id: 5,
            producer_epoch: 1,
            member_id: Some("m".into()),
            member_epoch: 3,
            topics: vec![
                TxnShareAcknowledgeTopic {
                    topic_id: uuid(0x01),
                    partitions: vec![TxnShareAcknowledgePartition {
                        partition_index: 0,
                        acknowledgement_batches: vec![TxnShareAcknowledgementBatch {
                            first_offset: 10,
                            last_offset: 12,
                            acknowledge_types: vec![ACK_ACCEPT],
                        }],
                    }],
                },
                TxnShareAcknowledgeTopic {
                    topic_id: uuid(0x02),
                    partitions: vec![TxnShareAcknowledgePartition {
                        partition_index: 1,
                        acknowledgement_batches: vec![TxnShareAcknowledgementBatch {
                            first_offset: 20,
                            last_offset: 22,
                            acknowledge_types: vec![ACK_ACCEPT, ACK_RELEASE, ACK_GAP],
                        }],
                    }],
                },
            ],
        }
    }

    /// The request above, byte by byte. `tags` is spliced in where each
    /// tagged-field section goes (batch, partition, topic, request).
    fn golden_request_bytes(tags: &[u8]) -> Vec<u8> {
        let mut b = vec![];
        b.extend([0x03, b't', b'x']); // TransactionalId
        b.extend([0x02, b'g']); // GroupId
        b.extend([0, 0, 0, 0, 0, 0, 0, 5]); // ProducerId
        b.extend([0, 1]); // ProducerEpoch
        b.extend([0x02, b'm']); // MemberId
        b.extend([0, 0, 0, 3]); // MemberEpoch
        b.push(0x03); // Topics: 2
        b.extend([0x01; 16]);
        b.push(0x02); //   Partitions: 1
        b.extend([0, 0, 0, 0]); //     PartitionIndex 0
        b.push(0x02); //     AcknowledgementBatches: 1
        b.extend([0, 0, 0, 0, 0, 0, 0, 10]);
        b.extend([0, 0, 0, 0, 0, 0, 0, 12]);
        b.extend([0x02, 0x01]); //       AcknowledgeTypes [Accept]
        b.extend(tags); //       batch tags
        b.extend(tags); //     partition tags
        b.extend(tags); //   topic tags
        b.extend([0x02; 16]);
        b.push(0x02);
        b.extend([0, 0, 0, 1]);
        b.push(0x02);
        b.extend([0, 0, 0, 0, 0, 0, 0, 20]);
        b.extend([0, 0, 0, 0, 0, 0, 0, 22]);
        b.extend([0x04, 0x01, 0x02, 0x00]); // [Accept, Release, Gap]
        b.extend(tags);
        b.extend(tags);
        b.extend(tags);
        b.extend(tags); // request tags
        b
    }

    fn golden_response() -> TxnShareAcknowledgeResponse {
        TxnShareAcknowledgeResponse {
            throttle_time_ms: 0,
            error_code: 0,
            responses: vec![TxnShareAcknowledgeTopicResponse {
                topic_id: uuid(0x03),
                partitions: vec![TxnShareAcknowledgePartitionResponse {
                    partition_index: 0,
                    error_code: 6, // NOT_LEADER_OR_FOLLOWER
                    error_message: Some("x".into()),
                    current_leader: LeaderIdAndEpoch {
                        leader_id: 2,
                        leader_epoch: 7,
                    },
                }],
            }],
            node_endpoints: vec![NodeEndpoint {
                node_id: 2,
                host: "h".into(),
                port: 9092,
                rack: None,
            }],
        }
    }

    const GOLDEN_RESPONSE: &[u8] = &[
        0, 0, 0, 0, // ThrottleTimeMs
        0, 0,    // ErrorCode
        0x02, // Responses: 1
        3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,    // TopicId
        0x02, // Partitions: 1
        0, 0, 0, 0, // PartitionIndex
        0, 6, // ErrorCode
        0x02, b'x', // ErrorMessage
        0x01, 0x00, 0x09, // 1 tagged field: tag 0 (CurrentLeader), 9 bytes
        0, 0, 0, 2, 0, 0, 0, 7, 0x00, //   LeaderId 2, LeaderEpoch 7, no tags
        0x00, // topic tags
        0x01, 0x00, 0x0d, // 1 tagged field: tag 0 (NodeEndpoints), 13 bytes
        0x02, // 1 endpoint
        0, 0, 0, 2, // NodeId
        0x02, b'h', // Host
        0, 0, 0x23, 0x84, // Port 9092
        0x00, // Rack: null
        0x00, // endpoint tags
    ];

    fn encode_req(r: &TxnShareAcknowledgeRequest) -> Vec<u8> {
        let mut out = BytesMut::new();
        r.encode_request(&mut out, 0).unwrap();
        out.to_vec()
    }

    fn decode_req(b: &[u8]) -> Result<TxnShareAcknowledgeRequest, ProtocolError> {
        let mut buf = Bytes::copy_from_slice(b);
        let r = TxnShareAcknowledgeRequest::decode_request(&mut buf, 0)?;
        assert!(buf.is_empty(), "{} bytes left", buf.len());
        Ok(r)
    }

    fn decode_resp(b: &[u8]) -> Result<TxnShareAcknowledgeResponse, ProtocolError> {
        let mut buf = Bytes::copy_from_slice(b);
        let r = TxnShareAcknowledgeRequest::decode_response(&mut buf, 0)?;
        assert!(buf.is_empty(), "{} bytes left", buf.len());
        Ok(r)
    }

    #[test]
    fn request_golden_bytes() {
        let bytes = golden_request_bytes(&[0x00]);
        assert_eq!(encode_req(&golden_request()), bytes);
        assert_eq!(decode_req(&bytes).unwrap(), golden_request());
    }

    #[test]
    fn request_with_null_strings_golden_bytes() {
        let req = TxnShareAcknowledgeRequest {
            producer_id: -1,
            producer_epoch: -1,
            member_epoch: 0,
            ..Default::default()
        };
        let bytes = [
            0x00, // TransactionalId: null
            0x00, // GroupId: null
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // ProducerId -1
            0xff, 0xff, // ProducerEpoch -1
            0x00, // MemberId: null
            0, 0, 0, 0,    // MemberEpoch
            0x01, // Topics: empty
            0x00, // tags
        ];
        assert_eq!(encode_req(&req), bytes);
        assert_eq!(decode_req(&bytes).unwrap(), req);
    }

    #[test]
    fn response_golden_bytes() {
        let mut out = BytesMut::new();
        TxnShareAcknowledgeRequest::encode_response(&golden_response(), &mut out, 0).unwrap();
        assert_eq!(&out[..], GOLDEN_RESPONSE);
        assert_eq!(decode_resp(GOLDEN_RESPONSE).unwrap(), golden_response());
    }

    #[test]
    fn response_without_tagged_fields_golden_bytes() {
        let resp = TxnShareAcknowledgeResponse {
            throttle_time_ms: 100,
            error_code: 0,
            responses: vec![TxnShareAcknowledgeTopicResponse {
                topic_id: uuid(0x04),
                partitions: vec![TxnShareAcknowledgePartitionResponse {
                    partition_index: 3,
                    ..Default::default()
                }],
            }],
            node_endpoints: vec![],
        };
        let mut bytes = vec![0, 0, 0, 100, 0, 0, 0x02];
        bytes.extend([0x04; 16]);
        bytes.extend([0x02, 0, 0, 0, 3, 0, 0, 0x00, 0x00, 0x00, 0x00]);
        let mut out = BytesMut::new();
        TxnShareAcknowledgeRequest::encode_response(&resp, &mut out, 0).unwrap();
        assert_eq!(&out[..], &bytes[..]);
        assert_eq!(decode_resp(&bytes).unwrap(), resp);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        // Tag 7 with 3 bytes in every tagged section of the request.
        let bytes = golden_request_bytes(&[0x01, 0x07, 0x03, 0xaa, 0xbb, 0xcc]);
        assert_eq!(decode_req(&bytes).unwrap(), golden_request());

        // Unknown tags around the known tag 0 of the response.
        let mut resp = GOLDEN_RESPONSE.to_vec();
        // Partition tags: tag 0 then tag 5 (2 bytes).
        let part_tags = 16 + 7 + 1 + 4 + 2 + 2;
        assert_eq!(&resp[part_tags..part_tags + 3], &[0x01, 0x00, 0x09]);
        resp[part_tags] = 0x02;
        let after_leader = part_tags + 3 + 9;
        resp.splice(after_leader..after_leader, [0x05, 0x02, 0x11, 0x22]);
        // Top-level tags: tag 0 then tag 1 (empty).
        let top = resp.len() - 16;
        assert_eq!(&resp[top..top + 3], &[0x01, 0x00, 0x0d]);
        resp[top] = 0x02;
        resp.extend([0x01, 0x00]);
        assert_eq!(decode_resp(&resp).unwrap(), golden_response());
    }

    #[test]
    fn tagged_fields_out_of_order_are_refused() {
        let mut resp = GOLDEN_RESPONSE.to_vec();
        let top = resp.len() - 16;
        // Tag 0 twice at the top level.
        resp[top] = 0x02;
        resp.extend([0x00, 0x01, 0x01]);
        assert!(decode_resp(&resp).is_err());
    }

    #[test]
    fn hostile_compact_array_counts_are_refused() {
        let prefix = [0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0, 0, 0, 0];
        // Topics: 2^32 - 2 elements in 1 byte.
        let mut b = prefix.to_vec();
        b.extend([0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
        assert!(matches!(
            decode_req(&b),
            Err(ProtocolError::Decode { api_key: 95, .. })
        ));
        // AcknowledgeTypes: 1000 types announced, 3 present.
        let mut b = golden_request_bytes(&[0x00]);
        let at = b.iter().position(|&x| x == 0x04).unwrap();
        b.splice(at..at + 1, [0xe9, 0x07]);
        assert!(decode_req(&b).is_err());
        // Response: NodeEndpoints count inside its tagged field.
        let mut r = GOLDEN_RESPONSE.to_vec();
        let n = r.len() - 13;
        r[n] = 0x7f;
        assert!(decode_resp(&r).is_err());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let req = golden_request_bytes(&[0x00]);
        for n in 0..req.len() {
            assert!(decode_req(&req[..n]).is_err(), "request cut at {n}");
        }
        for n in 0..GOLDEN_RESPONSE.len() {
            let mut buf = Bytes::copy_from_slice(&GOLDEN_RESPONSE[..n]);
            assert!(
                TxnShareAcknowledgeRequest::decode_response(&mut buf, 0).is_err(),
                "response cut at {n}"
            );
        }
    }
}
