//! A scripted broker for connection tests: reads request frames, decodes them
//! with the protocol layer, and answers exactly what the test tells it to.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::protocol::api::{
    AnyRequest, ApiRequest, RequestHeaderInfo, codec_versions, decode_request,
    decode_request_header, encode_response_frame,
};
use crate::protocol::frame::FrameDecoder;
use crate::protocol::txn_share_ack::TXN_SHARE_ACKNOWLEDGE_API_KEY;

/// One request as the peer saw it.
#[derive(Debug)]
pub(crate) struct Received {
    pub header: RequestHeaderInfo,
    pub request: AnyRequest,
}

impl Received {
    /// The ApiVersions request inside, or panic.
    pub fn api_versions(&self) -> &ApiVersionsRequest {
        match &self.request {
            AnyRequest::ApiVersions(r) => &r.request,
            other => panic!("expected ApiVersions, got {other:?}"),
        }
    }

    /// The single topic name of a Metadata request built by [`metadata_for`].
    pub fn metadata_topic(&self) -> String {
        match &self.request {
            AnyRequest::Kafka(k) => match &**k {
                kafka_protocol::messages::RequestKind::Metadata(r) => {
                    let topics = r.topics.as_ref().expect("topics");
                    topics[0].name.as_ref().expect("name").0.to_string()
                }
                other => panic!("expected Metadata, got {other:?}"),
            },
            other => panic!("expected Metadata, got {other:?}"),
        }
    }
}

/// A Metadata request for one topic, used to tell requests apart.
pub(crate) fn metadata_for(topic: &str) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
            TopicName(StrBytes::from_string(topic.to_string())),
        ))]))
}

/// A Metadata response naming one topic.
pub(crate) fn metadata_answer(topic: &str) -> MetadataResponse {
    MetadataResponse::default()
        .with_topics(vec![MetadataResponseTopic::default().with_name(Some(
            TopicName(StrBytes::from_string(topic.to_string())),
        ))])
}

/// The topic named by a response built by [`metadata_answer`].
pub(crate) fn answered_topic(resp: &MetadataResponse) -> String {
    resp.topics[0].name.as_ref().expect("name").0.to_string()
}

/// Every API this build knows, with its full range, except `excluded`.
pub(crate) fn all_apis_except(excluded: &[i16]) -> Vec<(i16, i16, i16)> {
    ApiKey::iter()
        .map(|k| k as i16)
        .chain(std::iter::once(TXN_SHARE_ACKNOWLEDGE_API_KEY))
        .filter(|k| !excluded.contains(k))
        .filter_map(|k| codec_versions(k).map(|v| (k, v.min, v.max)))
        .collect()
}

/// An ApiVersions response listing `keys`.
pub(crate) fn api_versions_response(keys: &[(i16, i16, i16)]) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        keys.iter()
            .map(|&(k, min, max)| {
                ApiVersion::default()
                    .with_api_key(k)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect(),
    )
}

/// The broker side of a transport, driven by the test.
pub(crate) struct ScriptedPeer<S> {
    io: S,
    decoder: FrameDecoder,
}

impl<S: AsyncRead + AsyncWrite + Unpin> ScriptedPeer<S> {
    pub fn new(io: S) -> Self {
        Self {
            io,
            decoder: FrameDecoder::default(),
        }
    }

    /// The next request frame's bytes, `None` at EOF.
    pub async fn recv_frame(&mut self) -> Option<Bytes> {
        loop {
            if let Some(frame) = self.decoder.next_frame().expect("client framing") {
                return Some(frame);
            }
            let n = self
                .io
                .read_buf(self.decoder.buffer_mut())
                .await
                .unwrap_or(0);
            if n == 0 {
                assert_eq!(self.decoder.buffered(), 0, "EOF inside a frame");
                return None;
            }
        }
    }

    /// The next request, decoded; `None` at EOF.
    pub async fn recv_or_eof(&mut self) -> Option<Received> {
        let mut frame = self.recv_frame().await?;
        let header = decode_request_header(&mut frame).expect("request header");
        let request =
            decode_request(header.api_key, header.api_version, &mut frame).expect("request body");
        assert!(frame.is_empty(), "trailing bytes after the request body");
        Some(Received { header, request })
    }

    /// The next request, decoded; panics at EOF.
    pub async fn recv(&mut self) -> Received {
        self.recv_or_eof().await.expect("unexpected EOF")
    }

    /// Answers a request of type `R`.
    pub async fn respond<R: ApiRequest>(
        &mut self,
        resp: &R::Response,
        version: i16,
        correlation_id: i32,
    ) {
        let mut out = BytesMut::new();
        encode_response_frame::<R>(resp, version, correlation_id, &mut out).expect("encode");
        self.write_raw(&out).await;
    }

    /// Answers a Metadata request (as received) naming `topic`.
    pub async fn answer_metadata(&mut self, req: &Received, topic: &str) {
        self.respond::<MetadataRequest>(
            &metadata_answer(topic),
            req.header.api_version,
            req.header.correlation_id,
        )
        .await;
    }

    /// Writes arbitrary bytes.
    pub async fn write_raw(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.expect("peer write");
        self.io.flush().await.expect("peer flush");
    }

    /// Answers the opening ApiVersions v3 request with `keys` and returns it.
    pub async fn handshake(&mut self, keys: &[(i16, i16, i16)]) -> Received {
        let req = self.recv().await;
        assert_eq!(req.header.api_key, 18, "first request must be ApiVersions");
        self.respond::<ApiVersionsRequest>(
            &api_versions_response(keys),
            req.header.api_version,
            req.header.correlation_id,
        )
        .await;
        req
    }

    /// `true` if no byte arrives within `within` (use with paused time).
    pub async fn stays_silent(&mut self, within: Duration) -> bool {
        if self.decoder.buffered() > 0 {
            return false;
        }
        let mut byte = [0u8; 1];
        match tokio::time::timeout(within, self.io.read(&mut byte)).await {
            Err(_) => true,
            Ok(Ok(0)) => true,
            Ok(Ok(_)) => {
                self.decoder.extend_from_slice(&byte);
                false
            }
            Ok(Err(_)) => true,
        }
    }

    /// Answers with a finalized feature set, for negotiation tests.
    pub fn finalized(name: &str, level: i16) -> FinalizedFeatureKey {
        FinalizedFeatureKey::default()
            .with_name(StrBytes::from_string(name.to_string()))
            .with_min_version_level(level)
            .with_max_version_level(level)
    }
}
