//! DescribeShareGroupOffsets (key 90) at versions 0 and 1.
//!
//! Version 1 (Kafka 4.3, KIP-1226) adds the share-partition lag to every
//! partition of the response: an int64 `Lag` (default -1: not known) right
//! after `LeaderEpoch`. The request of version 1 is byte for byte the
//! request of version 0. `kafka-protocol` 0.18 stops at version 0, so the
//! types here wrap its v0 structs: the request is coded as version 0, and
//! the response of version 1 is the version-0 encoding with one int64
//! spliced in after each partition's `LeaderEpoch`, found by walking the
//! message (compact strings and arrays, UUIDs, tagged fields). Everything
//! else, tagged fields included, is `kafka-protocol`'s own code. Byte
//! equality with Kafka 4.4's Java classes is checked by
//! `tests/suite/jvm_bytes.rs`.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::api::{ApiRequest, Versions, check_version, decode_err, encode_err};
use super::error::ProtocolError;
use super::wire::Reader;

/// DescribeShareGroupOffsets' API key.
pub const DESCRIBE_SHARE_GROUP_OFFSETS_API_KEY: i16 = 90;
/// The versions coded here.
pub const DESCRIBE_SHARE_GROUP_OFFSETS_VERSIONS: Versions = Versions { min: 0, max: 1 };
/// The lag of a partition whose lag is not known (the field's default).
pub const UNKNOWN_LAG: i64 = -1;

/// A DescribeShareGroupOffsets request at version 0 or 1 (the same bytes).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DescribeShareGroupOffsetsV1Request {
    /// Every field (versions 0 and 1 have the same).
    pub request: DescribeShareGroupOffsetsRequest,
}

/// A DescribeShareGroupOffsets response at version 0 or 1.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DescribeShareGroupOffsetsV1Response {
    /// Every field of version 0.
    pub response: DescribeShareGroupOffsetsResponse,
    /// `Lag` (v1) of every partition, in the order the response lists them
    /// (group by group, topic by topic); a partition beyond the end of this
    /// list has lag [`UNKNOWN_LAG`]. Not sent at version 0.
    pub lags: Vec<i64>,
}

impl DescribeShareGroupOffsetsV1Response {
    /// The lag of the `i`th partition of the response.
    pub fn lag(&self, i: usize) -> i64 {
        self.lags.get(i).copied().unwrap_or(UNKNOWN_LAG)
    }

    /// Every partition with its lag: (group, topic name, partition, lag).
    pub fn partition_lags(&self) -> Vec<(String, String, i32, i64)> {
        let mut out = Vec::new();
        for g in &self.response.groups {
            for t in &g.topics {
                for p in &t.partitions {
                    out.push((
                        g.group_id.to_string(),
                        t.topic_name.to_string(),
                        p.partition_index,
                        self.lag(out.len()),
                    ));
                }
            }
        }
        out
    }
}

/// Offsets in a version-0 response body just after each partition's
/// `LeaderEpoch`, where version 1 has its `Lag`.
fn lag_positions(body: &[u8], with_lag: bool) -> Result<Vec<usize>, ProtocolError> {
    const WHAT: &str = "DescribeShareGroupOffsetsResponse";
    let total = body.len();
    let mut r = Reader::new(Bytes::copy_from_slice(body));
    let at = |r: &Reader| total - r.remaining();
    let skip_tags = |r: &mut Reader| r.tagged_fields(WHAT, |_, _| Ok(false));
    let mut out = Vec::new();
    r.i32(WHAT)?; // ThrottleTimeMs
    for _ in 0..r.compact_array_len(4, WHAT)?.unwrap_or(0) {
        r.compact_string(WHAT)?; // GroupId
        for _ in 0..r.compact_array_len(18, WHAT)?.unwrap_or(0) {
            r.compact_string(WHAT)?; // TopicName
            r.uuid(WHAT)?; // TopicId
            for _ in 0..r.compact_array_len(20, WHAT)?.unwrap_or(0) {
                r.i32(WHAT)?; // PartitionIndex
                r.i64(WHAT)?; // StartOffset
                r.i32(WHAT)?; // LeaderEpoch
                out.push(at(&r));
                if with_lag {
                    r.i64(WHAT)?;
                }
                r.i16(WHAT)?; // ErrorCode
                r.compact_nullable_string(WHAT)?; // ErrorMessage
                skip_tags(&mut r)?;
            }
            skip_tags(&mut r)?;
        }
        r.i16(WHAT)?; // ErrorCode
        r.compact_nullable_string(WHAT)?; // ErrorMessage
        skip_tags(&mut r)?;
    }
    skip_tags(&mut r)?;
    Ok(out)
}

impl ApiRequest for DescribeShareGroupOffsetsV1Request {
    type Response = DescribeShareGroupOffsetsV1Response;
    const API_KEY: i16 = DESCRIBE_SHARE_GROUP_OFFSETS_API_KEY;

    fn versions() -> Versions {
        DESCRIBE_SHARE_GROUP_OFFSETS_VERSIONS
    }

    fn encode_request(&self, out: &mut BytesMut, version: i16) -> Result<(), ProtocolError> {
        check_version(Self::API_KEY, version)?;
        self.request
            .encode(out, 0)
            .map_err(|e| encode_err(Self::API_KEY, version, e))
    }

    fn decode_request(buf: &mut Bytes, version: i16) -> Result<Self, ProtocolError> {
        check_version(Self::API_KEY, version)?;
        crate::alloc::warn_if_unguarded();
        DescribeShareGroupOffsetsRequest::decode(buf, 0)
            .map(|request| Self { request })
            .map_err(|e| decode_err(Self::API_KEY, version, e))
    }

    fn encode_response(
        resp: &Self::Response,
        out: &mut BytesMut,
        version: i16,
    ) -> Result<(), ProtocolError> {
        check_version(Self::API_KEY, version)?;
        let mut v0 = BytesMut::new();
        resp.response
            .encode(&mut v0, 0)
            .map_err(|e| encode_err(Self::API_KEY, version, e))?;
        if version == 0 {
            out.extend_from_slice(&v0);
            return Ok(());
        }
        let positions = lag_positions(&v0, false)?;
        let mut from = 0;
        for (i, at) in positions.into_iter().enumerate() {
            out.extend_from_slice(&v0[from..at]);
            out.extend_from_slice(&resp.lag(i).to_be_bytes());
            from = at;
        }
        out.extend_from_slice(&v0[from..]);
        Ok(())
    }

    fn decode_response(buf: &mut Bytes, version: i16) -> Result<Self::Response, ProtocolError> {
        check_version(Self::API_KEY, version)?;
        crate::alloc::warn_if_unguarded();
        let mut lags = Vec::new();
        let body = if version == 0 {
            std::mem::take(buf)
        } else {
            let positions = lag_positions(buf, true)?;
            let mut v0 = BytesMut::with_capacity(buf.len());
            let mut from = 0;
            for at in positions {
                v0.extend_from_slice(&buf[from..at]);
                let lag: [u8; 8] = buf[at..at + 8].try_into().expect("walked over 8 bytes");
                lags.push(i64::from_be_bytes(lag));
                from = at + 8;
            }
            v0.extend_from_slice(&buf[from..]);
            *buf = Bytes::new();
            v0.freeze()
        };
        let mut body = body;
        let response = DescribeShareGroupOffsetsResponse::decode(&mut body, 0)
            .map_err(|e| decode_err(Self::API_KEY, version, e))?;
        Ok(DescribeShareGroupOffsetsV1Response { response, lags })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::GroupId;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::messages::describe_share_group_offsets_response::{
        DescribeShareGroupOffsetsResponseGroup as G,
        DescribeShareGroupOffsetsResponsePartition as P,
        DescribeShareGroupOffsetsResponseTopic as T,
    };
    use kafka_protocol::protocol::StrBytes;
    use uuid::Uuid;

    fn response() -> DescribeShareGroupOffsetsV1Response {
        let part = |i: i32, so: i64| {
            P::default()
                .with_partition_index(i)
                .with_start_offset(so)
                .with_leader_epoch(0)
        };
        DescribeShareGroupOffsetsV1Response {
            response: DescribeShareGroupOffsetsResponse::default().with_groups(vec![
                G::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("g")))
                    .with_topics(vec![
                        T::default()
                            .with_topic_name(TopicName(StrBytes::from_static_str("t")))
                            .with_topic_id(Uuid::from_u128(9))
                            .with_partitions(vec![part(0, 5), part(1, 7)]),
                    ]),
            ]),
            lags: vec![3, 0],
        }
    }

    #[test]
    fn version_1_is_version_0_with_the_lag_after_the_leader_epoch() {
        let r = response();
        let mut v0 = BytesMut::new();
        DescribeShareGroupOffsetsV1Request::encode_response(&r, &mut v0, 0).unwrap();
        let mut v1 = BytesMut::new();
        DescribeShareGroupOffsetsV1Request::encode_response(&r, &mut v1, 1).unwrap();
        assert_eq!(v1.len(), v0.len() + 16, "one int64 per partition");
        // Throttle (4), 1 group (1), "g" (2), 1 topic (1), "t" (2), id (16),
        // 2 partitions (1), then index, start offset, leader epoch (16).
        let at = 4 + 1 + 2 + 1 + 2 + 16 + 1 + 16;
        assert_eq!(&v1[..at], &v0[..at]);
        assert_eq!(&v1[at..at + 8], &3i64.to_be_bytes());
        let back =
            DescribeShareGroupOffsetsV1Request::decode_response(&mut v1.freeze(), 1).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.partition_lags()[1], ("g".into(), "t".into(), 1, 0));
        let back0 =
            DescribeShareGroupOffsetsV1Request::decode_response(&mut v0.freeze(), 0).unwrap();
        assert_eq!(back0.response, r.response);
        assert_eq!(back0.lag(0), UNKNOWN_LAG, "v0 carries no lag");
    }

    #[test]
    fn a_truncated_version_1_response_is_an_error() {
        let mut v1 = BytesMut::new();
        DescribeShareGroupOffsetsV1Request::encode_response(&response(), &mut v1, 1).unwrap();
        for n in 0..v1.len() {
            let mut b = Bytes::copy_from_slice(&v1[..n]);
            assert!(DescribeShareGroupOffsetsV1Request::decode_response(&mut b, 1).is_err());
        }
    }
}
