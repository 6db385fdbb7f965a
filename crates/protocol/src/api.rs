//! Requests and responses of every API, addressed by key and version.
//!
//! The message structs of all existing Kafka APIs come from the
//! `kafka-protocol` crate; [`TxnShareAcknowledgeRequest`] (KIP-1289) and the
//! KIP-1071 streams-group requests of [`crate::streams_group`] are our own.
//! [`ApiRequest`] puts both behind one trait so that the client can send
//! any request generically, and [`decode_request`] lets the broker decode a
//! request whose key it only learns from the header. Every failure comes back
//! as a [`ProtocolError`] that names the API and version.
//!
//! Untrusted bytes: decoding never panics on any input (checked by the
//! mutation tests in `tests/suite/protocol_roundtrip.rs`), but `kafka-protocol`
//! 0.18 sizes each array from the count on the wire before reading its
//! elements, so a tiny frame can ask for hundreds of GiB. That request is
//! made harmless by [`crate::alloc::GuardedAlloc`], which the final binary
//! must install as its global allocator (ours does); the decoders here log a
//! warning once when it is missing. Our own TxnShareAcknowledge codec checks
//! every count against the bytes left and needs no guard.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, OffsetCommitRequest, OffsetFetchRequest, RequestHeader,
    RequestKind, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes};

use super::api_versions_v5::{API_VERSIONS_API_KEY, API_VERSIONS_VERSIONS, ApiVersionsV5Request};
use super::error::ProtocolError;
use super::frame::{finish_frame, start_frame};
use super::share_offsets_v1::{
    DESCRIBE_SHARE_GROUP_OFFSETS_API_KEY, DESCRIBE_SHARE_GROUP_OFFSETS_VERSIONS,
    DescribeShareGroupOffsetsV1Request,
};
use super::share_v2::{
    SHARE_ACKNOWLEDGE_API_KEY, SHARE_FETCH_API_KEY, SHARE_VERSIONS, ShareAcknowledgeV2Request,
    ShareFetchV2Request,
};
use super::streams_group::{
    STREAMS_GROUP_DESCRIBE_API_KEY, STREAMS_GROUP_HEARTBEAT_API_KEY, StreamsGroupDescribeRequest,
    StreamsGroupHeartbeatRequest,
};
use super::txn_share_ack::{TXN_SHARE_ACKNOWLEDGE_API_KEY, TxnShareAcknowledgeRequest};

/// An inclusive range of versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Versions {
    /// Lowest version.
    pub min: i16,
    /// Highest version.
    pub max: i16,
}

impl Versions {
    /// `true` if `v` is within the range.
    pub fn contains(&self, v: i16) -> bool {
        self.min <= v && v <= self.max
    }
}

/// A readable name for an API key (`Produce`, `TxnShareAcknowledge`, ...).
pub fn api_name(api_key: i16) -> &'static str {
    if api_key == TXN_SHARE_ACKNOWLEDGE_API_KEY {
        return "TxnShareAcknowledge";
    }
    if api_key == STREAMS_GROUP_HEARTBEAT_API_KEY {
        return "StreamsGroupHeartbeat";
    }
    if api_key == STREAMS_GROUP_DESCRIBE_API_KEY {
        return "StreamsGroupDescribe";
    }
    match ApiKey::try_from(api_key) {
        Ok(k) => kafka_api_name(k),
        Err(()) => "Unknown",
    }
}

fn kafka_api_name(k: ApiKey) -> &'static str {
    // ApiKey's Debug output is its variant name; keep a static copy per key.
    use std::collections::HashMap;
    use std::sync::OnceLock;
    static NAMES: OnceLock<HashMap<i16, &'static str>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        ApiKey::iter()
            .map(|k| (k as i16, &*Box::leak(format!("{k:?}").into_boxed_str())))
            .collect()
    });
    names.get(&(k as i16)).copied().unwrap_or("Unknown")
}

/// The versions this build can encode and decode for `api_key`, `None` for a
/// key it does not know.
pub fn codec_versions(api_key: i16) -> Option<Versions> {
    if api_key == TXN_SHARE_ACKNOWLEDGE_API_KEY {
        let v = TxnShareAcknowledgeRequest::VERSIONS;
        return Some(v);
    }
    if api_key == STREAMS_GROUP_HEARTBEAT_API_KEY {
        // KIP-1071, ours (streams_group.rs); kafka-protocol 0.18 lacks it.
        return Some(StreamsGroupHeartbeatRequest::VERSIONS);
    }
    if api_key == STREAMS_GROUP_DESCRIBE_API_KEY {
        return Some(StreamsGroupDescribeRequest::VERSIONS);
    }
    if api_key == SHARE_FETCH_API_KEY || api_key == SHARE_ACKNOWLEDGE_API_KEY {
        // Version 2 is ours (src/protocol/share_v2.rs); kafka-protocol stops at 1.
        return Some(SHARE_VERSIONS);
    }
    if api_key == API_VERSIONS_API_KEY {
        // Version 5 is ours (api_versions_v5.rs); kafka-protocol stops at 4.
        return Some(API_VERSIONS_VERSIONS);
    }
    if api_key == DESCRIBE_SHARE_GROUP_OFFSETS_API_KEY {
        // Version 1 (KIP-1226 lag) is ours (share_offsets_v1.rs).
        return Some(DESCRIBE_SHARE_GROUP_OFFSETS_VERSIONS);
    }
    let k = ApiKey::try_from(api_key).ok()?;
    let r = k.valid_versions();
    // `ApiKey::valid_versions` is the range of the *response* struct; for a
    // few APIs the request struct stops one version earlier, and a version
    // we cannot decode must not be offered (tested for every key below).
    let req = match k {
        ApiKey::OffsetCommit => OffsetCommitRequest::VERSIONS,
        ApiKey::OffsetFetch => OffsetFetchRequest::VERSIONS,
        ApiKey::InitProducerId => InitProducerIdRequest::VERSIONS,
        _ => r,
    };
    Some(Versions {
        min: r.min.max(req.min),
        max: r.max.min(req.max),
    })
}

/// Request header version for `api_key` at `version`, `None` for an unknown key.
pub fn request_header_version(api_key: i16, version: i16) -> Option<i16> {
    if api_key == TXN_SHARE_ACKNOWLEDGE_API_KEY
        || api_key == STREAMS_GROUP_HEARTBEAT_API_KEY
        || api_key == STREAMS_GROUP_DESCRIBE_API_KEY
    {
        return Some(2);
    }
    ApiKey::try_from(api_key)
        .ok()
        .map(|k| k.request_header_version(version))
}

/// Response header version for `api_key` at `version` (0 for ApiVersions,
/// whatever the version: the exception clients rely on).
pub fn response_header_version(api_key: i16, version: i16) -> Option<i16> {
    if api_key == TXN_SHARE_ACKNOWLEDGE_API_KEY
        || api_key == STREAMS_GROUP_HEARTBEAT_API_KEY
        || api_key == STREAMS_GROUP_DESCRIBE_API_KEY
    {
        return Some(1);
    }
    ApiKey::try_from(api_key)
        .ok()
        .map(|k| k.response_header_version(version))
}

fn unsupported(api_key: i16, version: i16) -> ProtocolError {
    ProtocolError::UnsupportedVersion {
        api_key,
        api_name: api_name(api_key),
        version,
    }
}

pub(super) fn check_version(api_key: i16, version: i16) -> Result<(), ProtocolError> {
    match codec_versions(api_key) {
        None => Err(ProtocolError::UnknownApiKey { api_key }),
        Some(v) if v.contains(version) => Ok(()),
        Some(_) => Err(unsupported(api_key, version)),
    }
}

pub(super) fn decode_err(api_key: i16, version: i16, e: impl std::fmt::Display) -> ProtocolError {
    ProtocolError::Decode {
        api_key,
        api_name: api_name(api_key),
        version,
        message: format!("{e:#}"),
    }
}

pub(super) fn encode_err(api_key: i16, version: i16, e: impl std::fmt::Display) -> ProtocolError {
    ProtocolError::Encode {
        api_key,
        api_name: api_name(api_key),
        version,
        message: format!("{e:#}"),
    }
}

/// A request type: its key, the versions we can code it at, and how to code
/// it and its response.
///
/// Implemented for every request struct of `kafka-protocol` and for
/// [`TxnShareAcknowledgeRequest`].
pub trait ApiRequest: Sized + Send + Sync + 'static {
    /// The response type.
    type Response: Sized + Send + Sync + 'static;
    /// The API key, shared by request and response.
    const API_KEY: i16;
    /// The versions this build can encode and decode.
    fn versions() -> Versions;
    /// Encodes the request body (no header) at `version`.
    fn encode_request(&self, out: &mut BytesMut, version: i16) -> Result<(), ProtocolError>;
    /// The body's encoded size at `version` where it is cheap to know, else
    /// 0. The frame encoder reserves it at once, so that a large request
    /// (a Produce of many batches) is not copied again each time its
    /// buffer doubles.
    fn encoded_size_hint(&self, _version: i16) -> usize {
        0
    }
    /// Decodes a request body at `version`.
    fn decode_request(buf: &mut Bytes, version: i16) -> Result<Self, ProtocolError>;
    /// Encodes a response body at `version`.
    fn encode_response(
        resp: &Self::Response,
        out: &mut BytesMut,
        version: i16,
    ) -> Result<(), ProtocolError>;
    /// Decodes a response body at `version`.
    fn decode_response(buf: &mut Bytes, version: i16) -> Result<Self::Response, ProtocolError>;
}

impl<T> ApiRequest for T
where
    T: kafka_protocol::protocol::Request + Send + Sync + 'static,
    T::Response: Send + Sync + 'static,
{
    type Response = T::Response;
    const API_KEY: i16 = T::KEY;

    fn versions() -> Versions {
        Versions {
            min: T::VERSIONS.min,
            max: T::VERSIONS.max,
        }
    }

    fn encode_request(&self, out: &mut BytesMut, version: i16) -> Result<(), ProtocolError> {
        check_version(T::KEY, version)?;
        self.encode(out, version)
            .map_err(|e| encode_err(T::KEY, version, e))
    }

    fn encoded_size_hint(&self, version: i16) -> usize {
        // An error here is reported by `encode_request` itself.
        self.compute_size(version).unwrap_or(0)
    }

    fn decode_request(buf: &mut Bytes, version: i16) -> Result<Self, ProtocolError> {
        check_version(T::KEY, version)?;
        crate::alloc::warn_if_unguarded();
        T::decode(buf, version).map_err(|e| decode_err(T::KEY, version, e))
    }

    fn encode_response(
        resp: &Self::Response,
        out: &mut BytesMut,
        version: i16,
    ) -> Result<(), ProtocolError> {
        check_version(T::KEY, version)?;
        resp.encode(out, version)
            .map_err(|e| encode_err(T::KEY, version, e))
    }

    fn decode_response(buf: &mut Bytes, version: i16) -> Result<Self::Response, ProtocolError> {
        check_version(T::KEY, version)?;
        crate::alloc::warn_if_unguarded();
        <T::Response as Decodable>::decode(buf, version).map_err(|e| decode_err(T::KEY, version, e))
    }
}

/// Any decoded request. Exhaustive on purpose: the broker matches every
/// variant, so a new one cannot go unhandled.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyRequest {
    /// A request of an existing Kafka API.
    Kafka(Box<RequestKind>),
    /// KIP-1289 TxnShareAcknowledge.
    TxnShareAcknowledge(TxnShareAcknowledgeRequest),
    /// KIP-1071 StreamsGroupHeartbeat.
    StreamsGroupHeartbeat(StreamsGroupHeartbeatRequest),
    /// KIP-1071 StreamsGroupDescribe.
    StreamsGroupDescribe(StreamsGroupDescribeRequest),
    /// ShareFetch, version 1 or 2.
    ShareFetch(ShareFetchV2Request),
    /// ShareAcknowledge, version 1 or 2.
    ShareAcknowledge(ShareAcknowledgeV2Request),
    /// ApiVersions, any version from 0 to 5.
    ApiVersions(ApiVersionsV5Request),
}

/// Decodes a request body whose key and version came from its header.
pub fn decode_request(
    api_key: i16,
    version: i16,
    body: &mut Bytes,
) -> Result<AnyRequest, ProtocolError> {
    check_version(api_key, version)?;
    if api_key == STREAMS_GROUP_HEARTBEAT_API_KEY {
        return StreamsGroupHeartbeatRequest::decode_request(body, version)
            .map(AnyRequest::StreamsGroupHeartbeat);
    }
    if api_key == STREAMS_GROUP_DESCRIBE_API_KEY {
        return StreamsGroupDescribeRequest::decode_request(body, version)
            .map(AnyRequest::StreamsGroupDescribe);
    }
    if api_key == TXN_SHARE_ACKNOWLEDGE_API_KEY {
        return TxnShareAcknowledgeRequest::decode_request(body, version)
            .map(AnyRequest::TxnShareAcknowledge);
    }
    if api_key == SHARE_FETCH_API_KEY {
        return ShareFetchV2Request::decode_request(body, version).map(AnyRequest::ShareFetch);
    }
    if api_key == SHARE_ACKNOWLEDGE_API_KEY {
        return ShareAcknowledgeV2Request::decode_request(body, version)
            .map(AnyRequest::ShareAcknowledge);
    }
    if api_key == API_VERSIONS_API_KEY {
        return ApiVersionsV5Request::decode_request(body, version).map(AnyRequest::ApiVersions);
    }
    if api_key == DESCRIBE_SHARE_GROUP_OFFSETS_API_KEY {
        // Version 1's request is version 0's; the broker answers through
        // `DescribeShareGroupOffsetsV1Request` at the request's version.
        return DescribeShareGroupOffsetsV1Request::decode_request(body, version).map(|r| {
            AnyRequest::Kafka(Box::new(RequestKind::DescribeShareGroupOffsets(r.request)))
        });
    }
    let key = ApiKey::try_from(api_key).map_err(|()| ProtocolError::UnknownApiKey { api_key })?;
    crate::alloc::warn_if_unguarded();
    RequestKind::decode(key, body, version)
        .map(|r| AnyRequest::Kafka(Box::new(r)))
        .map_err(|e| decode_err(api_key, version, e))
}

/// A request header as read off the wire, or as far as it could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderInfo {
    /// API key.
    pub api_key: i16,
    /// API version.
    pub api_version: i16,
    /// Correlation id, echoed in the response.
    pub correlation_id: i32,
    /// `client.id` of the sender.
    pub client_id: Option<String>,
}

/// A header that could not be read completely; carries what was read so the
/// broker can still answer (e.g. UNSUPPORTED_VERSION) when that makes sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad request header (api key {api_key}, version {api_version}, correlation id {correlation_id}): {error}"
)]
pub struct HeaderError {
    /// API key (as read).
    pub api_key: i16,
    /// API version (as read).
    pub api_version: i16,
    /// Correlation id (as read).
    pub correlation_id: i32,
    /// Why the header is unusable.
    pub error: ProtocolError,
}

/// Reads a request header from the front of a frame, leaving the body in
/// `frame`. Never panics on short or hostile input.
pub fn decode_request_header(frame: &mut Bytes) -> Result<RequestHeaderInfo, HeaderError> {
    if frame.len() < 8 {
        return Err(HeaderError {
            api_key: -1,
            api_version: -1,
            correlation_id: -1,
            error: ProtocolError::Truncated {
                what: "request header",
            },
        });
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let fail = |error| HeaderError {
        api_key,
        api_version,
        correlation_id,
        error,
    };
    let header_version = request_header_version(api_key, api_version)
        .ok_or_else(|| fail(ProtocolError::UnknownApiKey { api_key }))?;
    let header = RequestHeader::decode(frame, header_version)
        .map_err(|e| fail(ProtocolError::malformed("request header", format!("{e:#}"))))?;
    Ok(RequestHeaderInfo {
        api_key,
        api_version,
        correlation_id,
        client_id: header.client_id.map(|s| s.to_string()),
    })
}

/// Encodes a complete request frame: length prefix, header, body.
pub fn encode_request_frame<R: ApiRequest>(
    req: &R,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
    out: &mut BytesMut,
) -> Result<(), ProtocolError> {
    let header_version =
        request_header_version(R::API_KEY, version).ok_or(ProtocolError::UnknownApiKey {
            api_key: R::API_KEY,
        })?;
    // The header: api key, version, correlation id, client id and tags.
    out.reserve(4 + 16 + client_id.map_or(0, str::len) + req.encoded_size_hint(version));
    let pos = start_frame(out);
    let header = RequestHeader::default()
        .with_request_api_key(R::API_KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(client_id.map(|s| StrBytes::from_string(s.to_string())));
    let res = header
        .encode(out, header_version)
        .map_err(|e| encode_err(R::API_KEY, version, e))
        .and_then(|()| req.encode_request(out, version));
    match res {
        Ok(()) => {
            finish_frame(out, pos);
            Ok(())
        }
        Err(e) => {
            out.truncate(pos);
            Err(e)
        }
    }
}

/// Encodes a complete response frame for a request of type `R`.
pub fn encode_response_frame<R: ApiRequest>(
    resp: &R::Response,
    version: i16,
    correlation_id: i32,
    out: &mut BytesMut,
) -> Result<(), ProtocolError> {
    encode_response_frame_with(R::API_KEY, version, correlation_id, out, |out| {
        R::encode_response(resp, out, version)
    })
}

/// Encodes a response frame whose body is written by `body`.
pub fn encode_response_frame_with(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    out: &mut BytesMut,
    body: impl FnOnce(&mut BytesMut) -> Result<(), ProtocolError>,
) -> Result<(), ProtocolError> {
    let header_version = response_header_version(api_key, version)
        .ok_or(ProtocolError::UnknownApiKey { api_key })?;
    let pos = start_frame(out);
    let res = ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(out, header_version)
        .map_err(|e| encode_err(api_key, version, e))
        .and_then(|()| body(out));
    match res {
        Ok(()) => {
            finish_frame(out, pos);
            Ok(())
        }
        Err(e) => {
            out.truncate(pos);
            Err(e)
        }
    }
}

/// Reads a response header for a request of `api_key` at `version`, leaving
/// the body in `frame`; returns the correlation id.
pub fn decode_response_header(
    frame: &mut Bytes,
    api_key: i16,
    version: i16,
) -> Result<i32, ProtocolError> {
    let header_version = response_header_version(api_key, version)
        .ok_or(ProtocolError::UnknownApiKey { api_key })?;
    if frame.len() < 4 {
        return Err(ProtocolError::Truncated {
            what: "response header",
        });
    }
    ResponseHeader::decode(frame, header_version)
        .map(|h| h.correlation_id)
        .map_err(|e| ProtocolError::malformed("response header", format!("{e:#}")))
}

/// Peeks the correlation id of a response frame without consuming it.
pub fn peek_correlation_id(frame: &[u8]) -> Option<i32> {
    frame
        .get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

// Keep `Message` and `HeaderVersion` in use for the trait bounds above.
#[allow(dead_code)]
fn _assert_traits<T: Message + HeaderVersion>() {}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, MetadataRequest};

    #[test]
    fn api_names() {
        assert_eq!(api_name(0), "Produce");
        assert_eq!(api_name(78), "ShareFetch");
        assert_eq!(api_name(95), "TxnShareAcknowledge");
        assert_eq!(api_name(9999), "Unknown");
    }

    #[test]
    fn request_frame_round_trip() {
        let req = MetadataRequest::default();
        let mut out = BytesMut::new();
        encode_request_frame(&req, 12, 77, Some("me"), &mut out).unwrap();
        let mut frame = out.freeze().slice(4..);
        let h = decode_request_header(&mut frame).unwrap();
        assert_eq!(h.api_key, 3);
        assert_eq!(h.api_version, 12);
        assert_eq!(h.correlation_id, 77);
        assert_eq!(h.client_id.as_deref(), Some("me"));
        match decode_request(h.api_key, h.api_version, &mut frame).unwrap() {
            AnyRequest::Kafka(k) => assert_eq!(*k, RequestKind::Metadata(req)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn api_versions_response_header_has_no_tagged_fields() {
        // Request v3 uses header v2, but the response header is always v0:
        // exactly 4 bytes of correlation id before the body.
        let resp = ApiVersionsResponse::default();
        let mut out = BytesMut::new();
        encode_response_frame::<ApiVersionsRequest>(&resp, 3, 9, &mut out).unwrap();
        let mut body = BytesMut::new();
        resp.encode(&mut body, 3).unwrap();
        assert_eq!(out.len(), 4 + 4 + body.len());
        assert_eq!(&out[4..8], &9i32.to_be_bytes());
        let mut frame = out.freeze().slice(4..);
        assert_eq!(decode_response_header(&mut frame, 18, 3).unwrap(), 9);
        assert_eq!(
            ApiVersionsRequest::decode_response(&mut frame, 3).unwrap(),
            resp
        );
    }

    /// Every version `codec_versions` offers can really be decoded, request
    /// and response, and the next one cannot: probed through the crate's own
    /// version check, which runs before it reads a byte.
    #[test]
    fn codec_versions_match_the_message_structs() {
        use kafka_protocol::messages::ResponseKind;
        let refuses = |e: &String| e.contains("version not supported");
        // Keys whose highest versions are coded by our own wrappers.
        let ours = [
            (SHARE_FETCH_API_KEY, 1),
            (SHARE_ACKNOWLEDGE_API_KEY, 1),
            (API_VERSIONS_API_KEY, 4),
            (DESCRIBE_SHARE_GROUP_OFFSETS_API_KEY, 0),
        ];
        for k in ApiKey::iter() {
            let mut v = codec_versions(k as i16).unwrap();
            if let Some((_, inner_max)) = ours.iter().find(|(key, _)| *key == k as i16) {
                v.max = *inner_max;
            }
            for version in v.min..=v.max {
                let req = RequestKind::decode(k, &mut Bytes::new(), version);
                let resp = ResponseKind::decode(k, &mut Bytes::new(), version);
                // `{:#}` shows the cause under the crate's context line.
                for r in [
                    req.err().map(|e| format!("{e:#}")),
                    resp.err().map(|e| format!("{e:#}")),
                ] {
                    assert!(!r.as_ref().is_some_and(refuses), "{k:?} v{version}: {r:?}");
                }
            }
            let req = RequestKind::decode(k, &mut Bytes::new(), v.max + 1);
            assert!(req.is_err(), "{k:?} v{} decodes", v.max + 1);
        }
    }

    #[test]
    fn unknown_key_and_version_are_typed_errors() {
        let mut b = Bytes::new();
        assert_eq!(
            decode_request(4242, 0, &mut b),
            Err(ProtocolError::UnknownApiKey { api_key: 4242 })
        );
        assert!(matches!(
            decode_request(3, 999, &mut b),
            Err(ProtocolError::UnsupportedVersion {
                api_key: 3,
                version: 999,
                ..
            })
        ));
    }

    #[test]
    fn short_header_is_an_error_not_a_panic() {
        for n in 0..8 {
            let mut b = Bytes::from(vec![0u8; n]);
            assert!(decode_request_header(&mut b).is_err());
        }
        // Unknown key: the correlation id is still reported.
        let mut b = Bytes::from_static(&[0x10, 0x00, 0, 0, 0, 0, 0, 5]);
        let e = decode_request_header(&mut b).unwrap_err();
        assert_eq!(e.correlation_id, 5);
        assert_eq!(e.error, ProtocolError::UnknownApiKey { api_key: 0x1000 });
    }
}
