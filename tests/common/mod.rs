//! A thin raw-protocol client for broker integration tests: one TCP
//! connection, one request at a time, our protocol layer for the bytes;
//! and [`broker::TestBroker`], the one builder of a test's broker.
#![allow(dead_code)]

pub mod broker;
pub mod dlq;
pub mod kip;
pub mod records;
pub mod sasl;

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use sharestream::protocol::api::{ApiRequest, decode_response_header, encode_request_frame};
use sharestream::protocol::frame::FrameDecoder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct RawClient {
    pub stream: TcpStream,
    decoder: FrameDecoder,
    next_correlation_id: i32,
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).await.expect("connect to broker");
        stream.set_nodelay(true).unwrap();
        Self {
            stream,
            decoder: FrameDecoder::default(),
            next_correlation_id: 1,
        }
    }

    /// Sends `req` at `version` and returns the decoded response.
    pub async fn send<R: ApiRequest>(&mut self, req: &R, version: i16) -> R::Response {
        let cid = self.send_only(req, version).await;
        self.recv::<R>(version, cid).await
    }

    /// Sends without waiting; returns the correlation id.
    pub async fn send_only<R: ApiRequest>(&mut self, req: &R, version: i16) -> i32 {
        let cid = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut out = BytesMut::new();
        encode_request_frame(req, version, cid, Some("test-client"), &mut out).unwrap();
        self.stream.write_all(&out).await.unwrap();
        cid
    }

    /// Reads the next response, which must carry `cid`.
    pub async fn recv<R: ApiRequest>(&mut self, version: i16, cid: i32) -> R::Response {
        let mut frame = self
            .next_frame()
            .await
            .expect("connection closed by broker");
        let got = decode_response_header(&mut frame, R::API_KEY, version).unwrap();
        assert_eq!(got, cid, "correlation id");
        R::decode_response(&mut frame, version).unwrap()
    }

    /// Next raw frame, `None` at EOF.
    pub async fn next_frame(&mut self) -> Option<Bytes> {
        loop {
            if let Some(f) = self.decoder.next_frame().unwrap() {
                return Some(f);
            }
            let n = self.stream.read_buf(self.decoder.buffer_mut()).await.ok()?;
            if n == 0 {
                return None;
            }
        }
    }

    /// Writes raw bytes.
    pub async fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// True once the broker has closed the connection.
    pub async fn is_closed(&mut self) -> bool {
        self.next_frame().await.is_none()
    }
}
