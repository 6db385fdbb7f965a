//! ApiVersions at versions 0 to 5.
//!
//! Version 5 (Kafka 4.4, KIP-1242 "Detection and handling of misrouted
//! connections") is not in `kafka-protocol` 0.18, whose structs stop at
//! version 4. The request gains two non-tagged fields, both ignorable and
//! placed after `ClientSoftwareVersion`, before the tagged-field section:
//!
//! | field       | type                    | default | meaning                            |
//! |-------------|-------------------------|---------|------------------------------------|
//! | `ClusterId` | compact nullable string | null    | the cluster the client meant to reach |
//! | `NodeId`    | int32                   | -1      | the broker the client meant to reach  |
//!
//! The client sets both or neither (a bootstrap connection knows no node
//! id); a broker answers a request that names one without the other
//! INVALID_REQUEST, and one that names another cluster or node
//! REBOOTSTRAP_REQUIRED (129). The response is unchanged: version 5 has the
//! bytes of version 4.
//!
//! [`ApiVersionsV5Request`] wraps `kafka-protocol`'s request struct with the
//! two fields, and codes version 5 as version 4 with their bytes spliced in
//! (or out) after the two leading strings, as [`super::share_v2`] does for
//! ShareFetch v2. Both fields are ignorable in Kafka's schema, so below
//! version 5 they are left out silently, as Kafka's generated code does.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::api::{ApiRequest, Versions, check_version, decode_err, encode_err};
use super::error::ProtocolError;
use super::wire::{Reader, put_compact_nullable_string};

/// ApiVersions' API key.
pub const API_VERSIONS_API_KEY: i16 = 18;
/// The versions of ApiVersions coded here.
pub const API_VERSIONS_VERSIONS: Versions = Versions { min: 0, max: 5 };
/// The first version that carries `ClusterId` and `NodeId` (KIP-1242).
pub const TARGET_CHECK_VERSION: i16 = 5;
/// The highest version `kafka-protocol` codes; v5 is coded as this one.
const INNER_MAX: i16 = 4;

/// An ApiVersions request at any version from 0 to 5.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiVersionsV5Request {
    /// Every field of version 4.
    pub request: ApiVersionsRequest,
    /// `ClusterId` (v5): the cluster the client expects, `None` if unknown.
    pub cluster_id: Option<String>,
    /// `NodeId` (v5): the node the client expects, -1 if unknown.
    pub node_id: i32,
}

impl Default for ApiVersionsV5Request {
    fn default() -> Self {
        Self {
            request: ApiVersionsRequest::default(),
            cluster_id: None,
            node_id: -1,
        }
    }
}

impl From<ApiVersionsRequest> for ApiVersionsV5Request {
    fn from(request: ApiVersionsRequest) -> Self {
        Self {
            request,
            ..Self::default()
        }
    }
}

/// What a v5 request says about the broker it meant to reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// Neither field set (or a version before 5): nothing to check.
    Unnamed,
    /// Both set: the cluster and node the client expects.
    Named {
        /// `ClusterId`.
        cluster_id: &'a str,
        /// `NodeId`.
        node_id: i32,
    },
    /// One set without the other, which Kafka refuses with INVALID_REQUEST.
    HalfNamed,
}

impl ApiVersionsV5Request {
    /// The request's expected cluster and node, by Kafka's pairing rule:
    /// `ClusterId` is null exactly when `NodeId` is -1.
    pub fn target(&self) -> Target<'_> {
        match (self.cluster_id.as_deref(), self.node_id) {
            (None, -1) => Target::Unnamed,
            (Some(cluster_id), node_id) if node_id != -1 => Target::Named {
                cluster_id,
                node_id,
            },
            _ => Target::HalfNamed,
        }
    }
}

/// The offset just past `ClientSoftwareName` and `ClientSoftwareVersion`
/// (compact strings) at the start of a v3+ body.
fn after_software_fields(body: &Bytes) -> Result<usize, ProtocolError> {
    let mut r = Reader::new(body.clone());
    r.compact_nullable_string("ClientSoftwareName")?;
    r.compact_nullable_string("ClientSoftwareVersion")?;
    Ok(body.len() - r.remaining())
}

impl ApiRequest for ApiVersionsV5Request {
    type Response = ApiVersionsResponse;
    const API_KEY: i16 = API_VERSIONS_API_KEY;

    fn versions() -> Versions {
        API_VERSIONS_VERSIONS
    }

    fn encode_request(&self, out: &mut BytesMut, version: i16) -> Result<(), ProtocolError> {
        check_version(Self::API_KEY, version)?;
        let start = out.len();
        self.request
            .encode(out, version.min(INNER_MAX))
            .map_err(|e| encode_err(Self::API_KEY, version, e))?;
        if version >= TARGET_CHECK_VERSION {
            let body = Bytes::copy_from_slice(&out[start..]);
            let at = start
                + after_software_fields(&body)
                    .map_err(|e| encode_err(Self::API_KEY, version, e))?;
            let tail = out.split_off(at);
            put_compact_nullable_string(out, self.cluster_id.as_deref());
            out.put_i32(self.node_id);
            out.extend_from_slice(&tail);
        }
        Ok(())
    }

    fn decode_request(buf: &mut Bytes, version: i16) -> Result<Self, ProtocolError> {
        check_version(Self::API_KEY, version)?;
        let err = |e: ProtocolError| decode_err(Self::API_KEY, version, e);
        if version < TARGET_CHECK_VERSION {
            crate::alloc::warn_if_unguarded();
            let request = ApiVersionsRequest::decode(buf, version)
                .map_err(|e| decode_err(Self::API_KEY, version, e))?;
            return Ok(request.into());
        }
        // Take ClusterId and NodeId out, decode the rest as v4.
        let at = after_software_fields(buf).map_err(err)?;
        let mut r = Reader::new(buf.slice(at..));
        let cluster_id = r.compact_nullable_string("ClusterId").map_err(err)?;
        let node_id = r.i32("NodeId").map_err(err)?;
        let taken = buf.len() - at - r.remaining();
        let mut joined = BytesMut::with_capacity(buf.len() - taken);
        joined.extend_from_slice(&buf[..at]);
        joined.extend_from_slice(r.rest());
        let mut joined = joined.freeze();
        let total = joined.len();
        crate::alloc::warn_if_unguarded();
        let request = ApiVersionsRequest::decode(&mut joined, INNER_MAX)
            .map_err(|e| decode_err(Self::API_KEY, version, e))?;
        let consumed = total - joined.len();
        let _ = buf.split_to((consumed + taken).min(buf.len()));
        Ok(Self {
            request,
            cluster_id,
            node_id,
        })
    }

    fn encode_response(
        resp: &Self::Response,
        out: &mut BytesMut,
        version: i16,
    ) -> Result<(), ProtocolError> {
        check_version(Self::API_KEY, version)?;
        resp.encode(out, version.min(INNER_MAX))
            .map_err(|e| encode_err(Self::API_KEY, version, e))
    }

    fn decode_response(buf: &mut Bytes, version: i16) -> Result<Self::Response, ProtocolError> {
        check_version(Self::API_KEY, version)?;
        crate::alloc::warn_if_unguarded();
        ApiVersionsResponse::decode(buf, version.min(INNER_MAX))
            .map_err(|e| decode_err(Self::API_KEY, version, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::protocol::StrBytes;

    fn req(cluster_id: Option<&str>, node_id: i32) -> ApiVersionsV5Request {
        ApiVersionsV5Request {
            request: ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("apache-kafka-java"))
                .with_client_software_version(StrBytes::from_static_str("4.4.0")),
            cluster_id: cluster_id.map(str::to_string),
            node_id,
        }
    }

    fn encode(r: &ApiVersionsV5Request, v: i16) -> Vec<u8> {
        let mut out = BytesMut::new();
        r.encode_request(&mut out, v).unwrap();
        out.to_vec()
    }

    /// The v5 body, byte by byte as Kafka's schema lays it out.
    #[test]
    fn v5_request_bytes_by_hand() {
        let mut want = vec![18];
        want.extend_from_slice(b"apache-kafka-java");
        want.push(6);
        want.extend_from_slice(b"4.4.0");
        want.push(4); // ClusterId "abc": length + 1
        want.extend_from_slice(b"abc");
        want.extend_from_slice(&7i32.to_be_bytes());
        want.push(0); // no tagged fields
        let r = req(Some("abc"), 7);
        assert_eq!(encode(&r, 5), want);
        let mut b = Bytes::from(want);
        assert_eq!(ApiVersionsV5Request::decode_request(&mut b, 5).unwrap(), r);
        assert!(b.is_empty());
        assert_eq!(
            r.target(),
            Target::Named {
                cluster_id: "abc",
                node_id: 7
            }
        );
    }

    #[test]
    fn v5_without_a_target_is_a_null_and_minus_one() {
        let r = req(None, -1);
        let v5 = encode(&r, 5);
        let v4 = encode(&r, 4);
        // name (18 bytes) and version (6 bytes), then null, -1, no tags.
        let at = 18 + 6;
        assert_eq!(&v5[..at], &v4[..at]);
        assert_eq!(&v5[at..], &[0, 0xff, 0xff, 0xff, 0xff, 0]);
        assert_eq!(&v4[at..], &[0]);
        let mut b = Bytes::from(v5);
        let back = ApiVersionsV5Request::decode_request(&mut b, 5).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.target(), Target::Unnamed);
    }

    #[test]
    fn tagged_fields_after_the_new_fields_survive() {
        // A v5 body with one unknown tagged field (tag 9, 2 bytes).
        let mut body = vec![2, b'a', 2, b'1', 0, 0, 0, 0, 3, 1, 9, 2, 0xab, 0xcd];
        let mut b = Bytes::from(body.clone());
        let back = ApiVersionsV5Request::decode_request(&mut b, 5).unwrap();
        assert!(b.is_empty());
        assert_eq!(back.cluster_id, None);
        assert_eq!(back.node_id, 3);
        assert_eq!(back.request.unknown_tagged_fields.len(), 1);
        assert_eq!(encode(&back, 5), body);
        // Trailing bytes of the next frame are left alone.
        body.push(0x77);
        let mut b = Bytes::from(body);
        ApiVersionsV5Request::decode_request(&mut b, 5).unwrap();
        assert_eq!(&b[..], &[0x77]);
    }

    #[test]
    fn below_v5_the_ignorable_fields_are_dropped() {
        let r = req(Some("abc"), 1);
        for v in 0..=4 {
            let bytes = encode(&r, v);
            let mut plain = BytesMut::new();
            r.request.encode(&mut plain, v).unwrap();
            assert_eq!(bytes, plain.to_vec(), "v{v}");
            let mut b = Bytes::from(bytes);
            let back = ApiVersionsV5Request::decode_request(&mut b, v).unwrap();
            let plain = ApiVersionsRequest::decode(&mut plain.freeze(), v).unwrap();
            assert_eq!(back, ApiVersionsV5Request::from(plain));
            assert_eq!(back.target(), Target::Unnamed);
        }
    }

    #[test]
    fn half_named_targets() {
        assert_eq!(req(Some("abc"), -1).target(), Target::HalfNamed);
        assert_eq!(req(None, 0).target(), Target::HalfNamed);
        assert_eq!(
            req(Some(""), -2).target(),
            Target::Named {
                cluster_id: "",
                node_id: -2
            }
        );
    }

    #[test]
    fn v5_response_is_v4_bytes() {
        let resp = ApiVersionsResponse::default()
            .with_error_code(129)
            .with_api_keys(vec![
                ApiVersion::default()
                    .with_api_key(18)
                    .with_min_version(0)
                    .with_max_version(5),
            ])
            .with_finalized_features_epoch(3);
        let mut v5 = BytesMut::new();
        ApiVersionsV5Request::encode_response(&resp, &mut v5, 5).unwrap();
        let mut v4 = BytesMut::new();
        resp.encode(&mut v4, 4).unwrap();
        assert_eq!(v5, v4);
        let mut b = v5.freeze();
        assert_eq!(
            ApiVersionsV5Request::decode_response(&mut b, 5).unwrap(),
            resp
        );
        assert!(b.is_empty());
    }

    #[test]
    fn truncated_or_garbage_v5_bodies_are_errors_not_panics() {
        let full = encode(&req(Some("cluster"), 0), 5);
        for n in 0..full.len() {
            let mut b = Bytes::copy_from_slice(&full[..n]);
            assert!(
                ApiVersionsV5Request::decode_request(&mut b, 5).is_err(),
                "{n}"
            );
        }
        // A ClusterId length far past the end, an overlong varint, bad UTF-8.
        for bad in [
            &[2, b'a', 2, b'1', 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0][..],
            &[2, b'a', 2, b'1', 0x80, 0x80, 0x80, 0x80, 0x80, 0x80][..],
            &[2, b'a', 2, b'1', 2, 0xff, 0, 0, 0, 0, 0][..],
        ] {
            let mut b = Bytes::copy_from_slice(bad);
            assert!(ApiVersionsV5Request::decode_request(&mut b, 5).is_err());
        }
        let mut b = Bytes::new();
        assert!(ApiVersionsV5Request::decode_request(&mut b, 6).is_err());
    }
}
