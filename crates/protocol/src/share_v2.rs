//! ShareFetch and ShareAcknowledge at versions 1 and 2.
//!
//! Version 2 of both APIs (Kafka 4.2: KIP-1206 acquire modes, KIP-1222
//! renew acknowledgements) is not in `kafka-protocol` 0.18, whose structs stop
//! at version 1. The two versions differ only by a few fixed-size fields
//! placed after the leading fields of the message:
//!
//! | message                  | v2 adds, after                                   |
//! |--------------------------|--------------------------------------------------|
//! | ShareFetchRequest        | `ShareAcquireMode` int8, `IsRenewAck` bool, after `BatchSize` |
//! | ShareFetchResponse       | nothing (same bytes as v1)                       |
//! | ShareAcknowledgeRequest  | `IsRenewAck` bool, after `ShareSessionEpoch`     |
//! | ShareAcknowledgeResponse | `AcquisitionLockTimeoutMs` int32, after `ErrorMessage` |
//!
//! so the types here wrap `kafka-protocol`'s v1 structs with the added
//! fields, and code version 2 as version 1 with those bytes spliced in (or
//! out) at the position found by walking the leading fields. Everything
//! after the splice point, tagged fields included, is `kafka-protocol`'s
//! own code. Byte equality with Kafka's Java classes is checked by
//! `tests/suite/jvm_bytes.rs`.
//!
//! The broker decodes both versions into these types
//! ([`super::api::AnyRequest::ShareFetch`] and
//! [`super::api::AnyRequest::ShareAcknowledge`]); the share consumer sends
//! them, at version 2 where the broker has it.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::api::{ApiRequest, Versions, check_version, decode_err, encode_err};
use super::error::ProtocolError;
use super::share::AcquireMode;

/// ShareFetch's API key.
pub const SHARE_FETCH_API_KEY: i16 = 78;
/// ShareAcknowledge's API key.
pub const SHARE_ACKNOWLEDGE_API_KEY: i16 = 79;
/// The versions of ShareFetch and ShareAcknowledge coded here.
pub const SHARE_VERSIONS: Versions = Versions { min: 1, max: 2 };

/// A ShareFetch request at version 1 or 2.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShareFetchV2Request {
    /// Every field of version 1.
    pub request: ShareFetchRequest,
    /// `ShareAcquireMode` (v2), kept as sent so that the broker can refuse
    /// an unknown value with INVALID_REQUEST; see [`AcquireMode`].
    pub share_acquire_mode: i8,
    /// `IsRenewAck` (v2): the acknowledgements include Renew (4); the broker
    /// then only acknowledges and fetches nothing.
    pub is_renew_ack: bool,
}

impl ShareFetchV2Request {
    /// The acquire mode, `None` for a value no version defines.
    pub fn acquire_mode(&self) -> Option<AcquireMode> {
        AcquireMode::from_i8(self.share_acquire_mode)
    }
}

/// A ShareAcknowledge request at version 1 or 2.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShareAcknowledgeV2Request {
    /// Every field of version 1.
    pub request: ShareAcknowledgeRequest,
    /// `IsRenewAck` (v2).
    pub is_renew_ack: bool,
}

/// A ShareAcknowledge response at version 1 or 2.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShareAcknowledgeV2Response {
    /// Every field of version 1.
    pub response: ShareAcknowledgeResponse,
    /// `AcquisitionLockTimeoutMs` (v2): the lock duration of the group's
    /// records, so that renewals can be timed.
    pub acquisition_lock_timeout_ms: i32,
}

/// Where the fixed fields of v2 go: the offset just past the leading fields
/// described by `steps` (`Str` a compact nullable string, `Fixed(n)` n
/// bytes).
enum Step {
    Str,
    Fixed(usize),
}

fn splice_point(body: &[u8], steps: &[Step], what: &'static str) -> Result<usize, ProtocolError> {
    let mut pos = 0usize;
    for s in steps {
        let n = match s {
            Step::Str => {
                // Unsigned varint length + 1 (0 = null), then the bytes.
                let mut len: u64 = 0;
                let mut shift = 0;
                loop {
                    let b = *body.get(pos).ok_or(ProtocolError::Truncated { what })?;
                    pos += 1;
                    len |= u64::from(b & 0x7f) << shift;
                    if b & 0x80 == 0 {
                        break;
                    }
                    shift += 7;
                    if shift > 28 {
                        return Err(ProtocolError::malformed(
                            what,
                            "string length varint too long",
                        ));
                    }
                }
                len.saturating_sub(1) as usize
            }
            Step::Fixed(n) => *n,
        };
        pos = pos
            .checked_add(n)
            .filter(|p| *p <= body.len())
            .ok_or(ProtocolError::Truncated { what })?;
    }
    Ok(pos)
}

fn insert_at(out: &mut BytesMut, at: usize, bytes: &[u8]) {
    let tail = out.split_off(at);
    out.put_slice(bytes);
    out.extend_from_slice(&tail);
}

/// Decodes a v2 body as v1 after taking `n` bytes out at the splice point;
/// returns the taken bytes and the value, and advances `buf` past what was
/// read.
fn decode_spliced<T: Decodable>(
    buf: &mut Bytes,
    steps: &[Step],
    n: usize,
    api_key: i16,
    what: &'static str,
) -> Result<(Vec<u8>, T), ProtocolError> {
    let at = splice_point(buf, steps, what).map_err(|e| decode_err(api_key, 2, e))?;
    if buf.len() < at + n {
        return Err(decode_err(api_key, 2, ProtocolError::Truncated { what }));
    }
    let taken = buf[at..at + n].to_vec();
    let mut joined = BytesMut::with_capacity(buf.len() - n);
    joined.extend_from_slice(&buf[..at]);
    joined.extend_from_slice(&buf[at + n..]);
    let mut joined = joined.freeze();
    let total = joined.len();
    crate::alloc::warn_if_unguarded();
    let value = T::decode(&mut joined, 1).map_err(|e| decode_err(api_key, 2, e))?;
    let consumed = total - joined.len();
    let _ = buf.split_to((consumed + n).min(buf.len()));
    Ok((taken, value))
}

/// Encodes `value` as version 1, then, at version 2, inserts `extra` at
/// the splice point found by `steps`.
fn encode_v1_2<T: Encodable>(
    value: &T,
    out: &mut BytesMut,
    api_key: i16,
    version: i16,
    steps: &[Step],
    what: &'static str,
    extra: &[u8],
) -> Result<(), ProtocolError> {
    let start = out.len();
    value
        .encode(out, 1)
        .map_err(|e| encode_err(api_key, version, e))?;
    if version >= 2 {
        let at = splice_point(&out[start..], steps, what)
            .map_err(|e| encode_err(api_key, version, e))?;
        insert_at(out, start + at, extra);
    }
    Ok(())
}

/// Decodes a body at version 1 (no extra bytes: `None`) or 2 (the `n`
/// bytes taken out at the splice point).
fn decode_v1_2<T: Decodable>(
    buf: &mut Bytes,
    api_key: i16,
    version: i16,
    steps: &[Step],
    n: usize,
    what: &'static str,
) -> Result<(Option<Vec<u8>>, T), ProtocolError> {
    if version < 2 {
        crate::alloc::warn_if_unguarded();
        let value = T::decode(buf, 1).map_err(|e| decode_err(api_key, version, e))?;
        return Ok((None, value));
    }
    decode_spliced(buf, steps, n, api_key, what).map(|(taken, value)| (Some(taken), value))
}

const FETCH_REQUEST_PREFIX: &[Step] = &[Step::Str, Step::Str, Step::Fixed(24)];
const ACK_REQUEST_PREFIX: &[Step] = &[Step::Str, Step::Str, Step::Fixed(4)];
const ACK_RESPONSE_PREFIX: &[Step] = &[Step::Fixed(6), Step::Str];

impl ApiRequest for ShareFetchV2Request {
    type Response = ShareFetchResponse;
    const API_KEY: i16 = SHARE_FETCH_API_KEY;

    fn versions() -> Versions {
        SHARE_VERSIONS
    }

    fn encode_request(&self, out: &mut BytesMut, version: i16) -> Result<(), ProtocolError> {
        check_version(Self::API_KEY, version)?;
        if version < 2 && (self.share_acquire_mode != 0 || self.is_renew_ack) {
            return Err(encode_err(
                Self::API_KEY,
                version,
                "ShareAcquireMode other than batch_optimized and IsRenewAck need version 2",
            ));
        }
        encode_v1_2(
            &self.request,
            out,
            Self::API_KEY,
            version,
            FETCH_REQUEST_PREFIX,
            "ShareFetchRequest",
            &[self.share_acquire_mode as u8, self.is_renew_ack as u8],
        )
    }

    fn decode_request(buf: &mut Bytes, version: i16) -> Result<Self, ProtocolError> {
        check_version(Self::API_KEY, version)?;
        let (taken, request) = decode_v1_2::<ShareFetchRequest>(
            buf,
            Self::API_KEY,
            version,
            FETCH_REQUEST_PREFIX,
            2,
            "ShareFetchRequest",
        )?;
        let taken = taken.unwrap_or_else(|| vec![0, 0]);
        Ok(Self {
            request,
            share_acquire_mode: taken[0] as i8,
            is_renew_ack: taken[1] != 0,
        })
    }

    fn encode_response(
        resp: &Self::Response,
        out: &mut BytesMut,
        version: i16,
    ) -> Result<(), ProtocolError> {
        check_version(Self::API_KEY, version)?;
        resp.encode(out, 1)
            .map_err(|e| encode_err(Self::API_KEY, version, e))
    }

    fn decode_response(buf: &mut Bytes, version: i16) -> Result<Self::Response, ProtocolError> {
        check_version(Self::API_KEY, version)?;
        crate::alloc::warn_if_unguarded();
        ShareFetchResponse::decode(buf, 1).map_err(|e| decode_err(Self::API_KEY, version, e))
    }
}

impl ApiRequest for ShareAcknowledgeV2Request {
    type Response = ShareAcknowledgeV2Response;
    const API_KEY: i16 = SHARE_ACKNOWLEDGE_API_KEY;

    fn versions() -> Versions {
        SHARE_VERSIONS
    }

    fn encode_request(&self, out: &mut BytesMut, version: i16) -> Result<(), ProtocolError> {
        check_version(Self::API_KEY, version)?;
        if version < 2 && self.is_renew_ack {
            return Err(encode_err(
                Self::API_KEY,
                version,
                "IsRenewAck needs version 2",
            ));
        }
        encode_v1_2(
            &self.request,
            out,
            Self::API_KEY,
            version,
            ACK_REQUEST_PREFIX,
            "ShareAcknowledgeRequest",
            &[self.is_renew_ack as u8],
        )
    }

    fn decode_request(buf: &mut Bytes, version: i16) -> Result<Self, ProtocolError> {
        check_version(Self::API_KEY, version)?;
        let (taken, request) = decode_v1_2::<ShareAcknowledgeRequest>(
            buf,
            Self::API_KEY,
            version,
            ACK_REQUEST_PREFIX,
            1,
            "ShareAcknowledgeRequest",
        )?;
        Ok(Self {
            request,
            is_renew_ack: taken.is_some_and(|t| t[0] != 0),
        })
    }

    fn encode_response(
        resp: &Self::Response,
        out: &mut BytesMut,
        version: i16,
    ) -> Result<(), ProtocolError> {
        check_version(Self::API_KEY, version)?;
        encode_v1_2(
            &resp.response,
            out,
            Self::API_KEY,
            version,
            ACK_RESPONSE_PREFIX,
            "ShareAcknowledgeResponse",
            &resp.acquisition_lock_timeout_ms.to_be_bytes(),
        )
    }

    fn decode_response(buf: &mut Bytes, version: i16) -> Result<Self::Response, ProtocolError> {
        check_version(Self::API_KEY, version)?;
        let (taken, response) = decode_v1_2::<ShareAcknowledgeResponse>(
            buf,
            Self::API_KEY,
            version,
            ACK_RESPONSE_PREFIX,
            4,
            "ShareAcknowledgeResponse",
        )?;
        Ok(ShareAcknowledgeV2Response {
            response,
            acquisition_lock_timeout_ms: taken
                .map_or(0, |t| i32::from_be_bytes([t[0], t[1], t[2], t[3]])),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::share_acknowledge_request::{
        AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
    };
    use kafka_protocol::messages::share_fetch_request::{
        AcknowledgementBatch, FetchPartition, FetchTopic,
    };
    use kafka_protocol::messages::{GroupId, share_acknowledge_response as ack_resp};
    use kafka_protocol::protocol::StrBytes;
    use uuid::Uuid;

    fn fetch() -> ShareFetchV2Request {
        ShareFetchV2Request {
            request: ShareFetchRequest::default()
                .with_group_id(Some(GroupId(StrBytes::from_static_str("g"))))
                .with_member_id(Some(StrBytes::from_static_str("m")))
                .with_share_session_epoch(3)
                .with_max_wait_ms(500)
                .with_min_bytes(1)
                .with_max_bytes(1024)
                .with_max_records(10)
                .with_batch_size(10)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic_id(Uuid::from_u128(7))
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition_index(2)
                                .with_acknowledgement_batches(vec![
                                    AcknowledgementBatch::default()
                                        .with_first_offset(5)
                                        .with_last_offset(6)
                                        .with_acknowledge_types(vec![4]),
                                ]),
                        ]),
                ]),
            share_acquire_mode: 1,
            is_renew_ack: true,
        }
    }

    fn encode<R: ApiRequest>(r: &R, v: i16) -> Result<Vec<u8>, ProtocolError> {
        let mut out = BytesMut::new();
        r.encode_request(&mut out, v)?;
        Ok(out.to_vec())
    }

    #[test]
    fn share_fetch_v2_is_v1_with_two_bytes_after_batch_size() {
        let req = fetch();
        let v2 = encode(&req, 2).unwrap();
        let v1 = encode(
            &ShareFetchV2Request {
                share_acquire_mode: 0,
                is_renew_ack: false,
                ..req.clone()
            },
            1,
        )
        .unwrap();
        // group "g" (0x02 'g'), member "m" (0x02 'm'), six int32s.
        let at = 2 + 2 + 24;
        assert_eq!(&v2[..at], &v1[..at]);
        assert_eq!(&v2[at..at + 2], &[1, 1]);
        assert_eq!(&v2[at + 2..], &v1[at..]);
        assert_eq!(&v2[at - 8..at], &[0, 0, 0, 10, 0, 0, 0, 10]);
        let mut b = Bytes::from(v2);
        let back = ShareFetchV2Request::decode_request(&mut b, 2).unwrap();
        assert_eq!(back, req);
        assert!(b.is_empty());
        assert_eq!(back.acquire_mode(), Some(AcquireMode::RecordLimit));
    }

    #[test]
    fn v1_cannot_carry_the_v2_fields() {
        let e = encode(&fetch(), 1).unwrap_err();
        assert!(e.to_string().contains("version 2"), "{e}");
        let ack = ShareAcknowledgeV2Request {
            is_renew_ack: true,
            ..Default::default()
        };
        assert!(encode(&ack, 1).is_err());
    }

    #[test]
    fn unknown_acquire_mode_decodes_for_the_broker_to_refuse() {
        let mut req = fetch();
        req.share_acquire_mode = 7;
        let mut b = Bytes::from(encode(&req, 2).unwrap());
        let back = ShareFetchV2Request::decode_request(&mut b, 2).unwrap();
        assert_eq!(back.share_acquire_mode, 7);
        assert_eq!(back.acquire_mode(), None);
    }

    #[test]
    fn share_acknowledge_v2_round_trip() {
        let req = ShareAcknowledgeV2Request {
            request: ShareAcknowledgeRequest::default()
                .with_group_id(Some(GroupId(StrBytes::from_static_str("group"))))
                .with_member_id(None)
                .with_share_session_epoch(-1)
                .with_topics(vec![
                    AcknowledgeTopic::default()
                        .with_topic_id(Uuid::from_u128(9))
                        .with_partitions(vec![
                            AcknowledgePartition::default()
                                .with_partition_index(0)
                                .with_acknowledgement_batches(vec![
                                    AckBatch::default()
                                        .with_first_offset(0)
                                        .with_last_offset(9)
                                        .with_acknowledge_types(vec![4]),
                                ]),
                        ]),
                ]),
            is_renew_ack: true,
        };
        let bytes = encode(&req, 2).unwrap();
        // "group" (0x06 + 5 bytes), null member (0x00), epoch, then the bool.
        assert_eq!(bytes[6 + 1 + 4], 1);
        let mut b = Bytes::from(bytes);
        assert_eq!(
            ShareAcknowledgeV2Request::decode_request(&mut b, 2).unwrap(),
            req
        );
        assert!(b.is_empty());

        let resp = ShareAcknowledgeV2Response {
            response: ShareAcknowledgeResponse::default()
                .with_error_message(Some(StrBytes::from_static_str("x")))
                .with_responses(vec![
                    ack_resp::ShareAcknowledgeTopicResponse::default()
                        .with_topic_id(Uuid::from_u128(9))
                        .with_partitions(vec![ack_resp::PartitionData::default()]),
                ]),
            acquisition_lock_timeout_ms: 30_000,
        };
        for v in 1..=2 {
            let mut out = BytesMut::new();
            ShareAcknowledgeV2Request::encode_response(&resp, &mut out, v).unwrap();
            if v == 2 {
                // throttle, error code, "x", then the lock timeout.
                assert_eq!(&out[8..12], &30_000i32.to_be_bytes());
            }
            let mut b = out.freeze();
            let back = ShareAcknowledgeV2Request::decode_response(&mut b, v).unwrap();
            assert!(b.is_empty());
            let want = if v == 2 { 30_000 } else { 0 };
            assert_eq!(back.acquisition_lock_timeout_ms, want);
            assert_eq!(back.response, resp.response);
        }
    }

    #[test]
    fn truncated_or_garbage_v2_bodies_are_errors_not_panics() {
        let full = encode(&fetch(), 2).unwrap();
        for n in 0..full.len() {
            let mut b = Bytes::copy_from_slice(&full[..n]);
            assert!(
                ShareFetchV2Request::decode_request(&mut b, 2).is_err(),
                "{n}"
            );
        }
        // A string length pointing far past the end.
        let mut b = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0]);
        assert!(ShareFetchV2Request::decode_request(&mut b, 2).is_err());
        let mut b = Bytes::from_static(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80]);
        assert!(ShareAcknowledgeV2Request::decode_request(&mut b, 2).is_err());
        let mut b = Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0x05, b'a']);
        assert!(ShareAcknowledgeV2Request::decode_response(&mut b, 2).is_err());
    }
}
