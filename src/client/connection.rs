//! One connection to one broker: pipelined requests matched to responses by
//! correlation id.
//!
//! # Design
//!
//! A [`Connection`] owns two tasks over a split transport:
//!
//! - the **writer** drains a channel of encoded frames and writes them in
//!   channel order. Callers never write to the socket themselves, so a caller
//!   whose future is dropped can never leave half a frame on the wire.
//! - the **reader** cuts frames out of the byte stream with
//!   [`FrameDecoder`] and hands each response to the request waiting for it.
//!   It is also the only timer: it watches the deadlines of the requests in
//!   flight.
//!
//! Kafka answers the requests of one connection in the order it received
//! them, so the in-flight table is an ordered queue. Allocating a
//! correlation id, pushing the entry onto the queue and queueing the frame
//! for the writer happen under one lock, so queue order, correlation-id order
//! and wire order are the same. A response must carry the correlation id of
//! the oldest entry; anything else means the stream is out of sync.
//!
//! # Two-phase sends and wire order
//!
//! [`Connection::enqueue`] does the first half of a send: it waits for an
//! in-flight slot, takes a correlation id and queues the frame for the
//! writer, then returns a [`PendingResponse`] to await the answer with.
//! Requests enqueued one after the other are therefore written in call
//! order, even when their responses are awaited concurrently. Plain
//! [`Connection::send`] is `enqueue` followed by awaiting the response; many
//! concurrent `send` futures (in a `join_all` or `FuturesUnordered`) reach
//! the wire in the order they happen to be polled and get slots, which is
//! not their creation order. Callers whose requests must stay in order on
//! the wire (the idempotent producer's Produce requests) await `enqueue`
//! sequentially.
//!
//! # Poisoning
//!
//! Any of the following poisons the connection: a framing error (negative or
//! oversized length prefix), a response header or body that cannot be
//! decoded, a correlation id other than the oldest outstanding one, EOF, an
//! I/O error, or a request timeout. Poisoning fails every pending request at
//! once, makes every later send fail fast with the same reason, and stops
//! both tasks, which drops the transport. [`Connection::is_poisoned`] tells a
//! pool to replace it (see [`super::broker_connection::BrokerConnection`]).
//!
//! # Timeouts
//!
//! Each request has a deadline (`request.timeout.ms` by default). When it
//! passes, the request fails with [`ClientError::Timeout`] and the whole
//! connection is poisoned, as Kafka's Java client closes the connection on a
//! request timeout: responses come back in order, so every later request on
//! the connection is stuck behind the late one, and a late response would
//! otherwise have to be told apart from the next one. The deadline starts
//! when the request is queued for writing, after it got an in-flight slot
//! (`max.in.flight.requests.per.connection`).
//!
//! # Cancellation
//!
//! Dropping the future of a [`Connection::send`] (or of `enqueue`, or a
//! [`PendingResponse`]) at any point is safe. Before the request is queued
//! nothing has happened. Once it is queued, a drop guard marks its entry
//! *abandoned*: the entry stays in the queue so that
//! ordering holds, its response is read and discarded when it arrives, and
//! its deadline is still enforced. No entry leaks and no response reaches
//! the wrong caller.
//!
//! # Version negotiation
//!
//! Opening a connection sends ApiVersions v3 (with ClientSoftwareName
//! `sharestream` and this crate's version) before anything else. A broker
//! that does not know v3 answers UNSUPPORTED_VERSION (35) in a v0 body
//! listing its own ApiVersions range; the request is then repeated at the
//! highest version the broker listed, as Kafka's clients do. The result is
//! kept as [`NegotiatedVersions`]; a request of an API the broker lacks fails
//! with [`ClientError::UnsupportedVersion`] before a single byte is written.
//!
//! v3 stays the first version although our broker and Kafka 4.4 serve up to
//! v5: every broker since Kafka 2.4 answers v3 in one round trip, while v4
//! and v5 would cost a refusal and a retry on older ones. v5 (KIP-1242) only
//! adds the expected cluster and node id, which pay off with a client that
//! rebootstraps on REBOOTSTRAP_REQUIRED, and Kafka's client sends them only
//! then; ours does not rebootstrap, and v4 only lets the broker report
//! feature minimum 0, which negotiation does not read.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::config::ConnectionConfig;
use super::error::ClientError;
use super::security::SaslCredentials;
use crate::protocol::api::{
    ApiRequest, api_name, decode_response_header, encode_request_frame, peek_correlation_id,
};
use crate::protocol::frame::FrameDecoder;
use crate::protocol::sasl::{SaslMechanism, ScramClient, plain_client_message};
use crate::protocol::versions::NegotiatedVersions;
use crate::protocol::{ErrorCode, ProtocolError};

/// The ApiVersions version sent first when a connection opens.
pub const API_VERSIONS_REQUEST_VERSION: i16 = 3;

/// ClientSoftwareName sent in ApiVersions v3+.
pub const CLIENT_SOFTWARE_NAME: &str = "sharestream";

/// ClientSoftwareVersion sent in ApiVersions v3+.
pub const CLIENT_SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Offset of the correlation id in an encoded request frame: after the
/// 4-byte length prefix, the 2-byte API key and the 2-byte API version. The
/// same in every request header version.
const CORRELATION_ID_OFFSET: usize = 8;

type Reply = oneshot::Sender<Result<Bytes, ClientError>>;

/// A request written and not yet answered.
struct InFlight {
    correlation_id: i32,
    api_key: i16,
    api_version: i16,
    deadline: Instant,
    /// `None` once the caller gave up (abandoned): the response is discarded.
    reply: Option<Reply>,
    /// The in-flight slot, released when the entry leaves the queue.
    _slot: OwnedSemaphorePermit,
}

/// A frame for the writer task.
struct WriteCmd {
    frame: Bytes,
    /// Told once the frame is written (requests without a response).
    written: Option<oneshot::Sender<()>>,
    _slot: Option<OwnedSemaphorePermit>,
}

/// Why a connection stopped.
#[derive(Debug, Clone)]
enum Poison {
    /// Closed by this client.
    Closed,
    /// Broken; the reason is reported to every pending and later request.
    Broken(String),
}

impl Poison {
    fn error(&self) -> ClientError {
        match self {
            Poison::Closed => ClientError::Closed,
            Poison::Broken(reason) => ClientError::Poisoned(reason.clone()),
        }
    }
}

struct State {
    next_correlation_id: i32,
    in_flight: VecDeque<InFlight>,
    poisoned: Option<Poison>,
    writer: Option<mpsc::UnboundedSender<WriteCmd>>,
    tasks: Vec<AbortHandle>,
}

impl State {
    fn allocate_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = if id == i32::MAX { 0 } else { id + 1 };
        id
    }
}

/// State shared by the handle and the two tasks.
struct Shared {
    state: Mutex<State>,
    slots: Arc<Semaphore>,
    /// Wakes the reader when a request with a deadline is queued.
    queued: Notify,
}

impl Shared {
    /// Poisons the connection (first cause wins).
    fn poison(&self, cause: Poison) {
        let mut st = self.state.lock();
        Self::poison_locked(&mut st, &self.slots, cause);
    }

    fn poison_locked(st: &mut State, slots: &Semaphore, cause: Poison) {
        if st.poisoned.is_some() {
            return;
        }
        match &cause {
            Poison::Closed => tracing::debug!("connection closed"),
            Poison::Broken(reason) => tracing::warn!(%reason, "connection poisoned"),
        }
        let err = cause.error();
        st.poisoned = Some(cause);
        st.writer = None;
        for entry in st.in_flight.drain(..) {
            if let Some(reply) = entry.reply {
                let _ = reply.send(Err(err.clone()));
            }
        }
        slots.close();
        for task in st.tasks.drain(..) {
            task.abort();
        }
    }

    fn poison_error(&self) -> Option<ClientError> {
        self.state.lock().poisoned.as_ref().map(Poison::error)
    }

    /// Handles one response frame from the reader. Returns `false` once the
    /// connection is poisoned.
    fn on_response(&self, mut frame: Bytes) -> bool {
        let mut st = self.state.lock();
        if st.poisoned.is_some() {
            return false;
        }
        let Some(correlation_id) = peek_correlation_id(&frame) else {
            let reason = format!(
                "response frame of {} bytes is too short for a header",
                frame.len()
            );
            Self::poison_locked(&mut st, &self.slots, Poison::Broken(reason));
            return false;
        };
        let (expected_id, expected_key) = match st.in_flight.front() {
            None => {
                let reason = format!(
                    "unexpected response with correlation id {correlation_id}: no request in flight"
                );
                Self::poison_locked(&mut st, &self.slots, Poison::Broken(reason));
                return false;
            }
            Some(front) => (front.correlation_id, front.api_key),
        };
        if expected_id != correlation_id {
            let reason = format!(
                "response correlation id {correlation_id} does not match correlation id \
                 {expected_id} of the oldest request in flight ({})",
                api_name(expected_key)
            );
            Self::poison_locked(&mut st, &self.slots, Poison::Broken(reason));
            return false;
        }
        let entry = st.in_flight.pop_front().expect("front checked above");
        match decode_response_header(&mut frame, entry.api_key, entry.api_version) {
            Ok(_) => {
                if let Some(reply) = entry.reply {
                    let _ = reply.send(Ok(frame));
                }
                true
            }
            Err(e) => {
                let reason = format!(
                    "bad response header for {} (correlation id {correlation_id}): {e}",
                    api_name(entry.api_key)
                );
                if let Some(reply) = entry.reply {
                    let _ = reply.send(Err(ClientError::Protocol(e)));
                }
                Self::poison_locked(&mut st, &self.slots, Poison::Broken(reason));
                false
            }
        }
    }

    /// The earliest deadline of the requests in flight.
    fn earliest_deadline(&self) -> Option<Instant> {
        self.state.lock().in_flight.iter().map(|e| e.deadline).min()
    }

    /// Fails requests whose deadline passed at `now` with a timeout and
    /// poisons the connection. Returns `false` if it did.
    fn expire(&self, now: Instant) -> bool {
        let mut st = self.state.lock();
        let mut first = None;
        for entry in st.in_flight.iter_mut() {
            if entry.deadline <= now {
                let api = api_name(entry.api_key);
                first.get_or_insert((api, entry.correlation_id));
                if let Some(reply) = entry.reply.take() {
                    let _ = reply.send(Err(ClientError::Timeout {
                        api,
                        correlation_id: entry.correlation_id,
                    }));
                }
            }
        }
        match first {
            None => true,
            Some((api, correlation_id)) => {
                let reason = format!(
                    "{api} request with correlation id {correlation_id} timed out; \
                     the connection is closed"
                );
                Self::poison_locked(&mut st, &self.slots, Poison::Broken(reason));
                false
            }
        }
    }
}

/// Marks a queued request abandoned if the caller's future is dropped before
/// its response arrived.
struct AbandonGuard {
    shared: Arc<Shared>,
    correlation_id: i32,
    armed: bool,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut st = self.shared.state.lock();
        if let Some(entry) = st
            .in_flight
            .iter_mut()
            .find(|e| e.correlation_id == self.correlation_id)
        {
            entry.reply = None;
        }
    }
}

/// Decodes a response body at the version the request went out with.
type DecodeFn<T> = fn(&mut Bytes, i16) -> Result<T, ProtocolError>;

/// The second half of a two-phase send: a request already queued for the
/// writer (see [`Connection::enqueue`]), waiting for its response.
///
/// It resolves to the decoded response, or to the error the request failed
/// with: a timeout (the deadline started when the request was queued and is
/// enforced by the connection, whether or not this future is polled), a
/// poisoned or closed connection, or a response that cannot be decoded
/// (which poisons the connection). Dropping it abandons the request: its
/// response is read and discarded when it arrives, as when a
/// [`Connection::send`] future is dropped.
#[must_use = "dropping a PendingResponse abandons the request's response"]
pub struct PendingResponse<T> {
    shared: Arc<Shared>,
    rx: oneshot::Receiver<Result<Bytes, ClientError>>,
    guard: AbandonGuard,
    api_key: i16,
    api_version: i16,
    decode: DecodeFn<T>,
}

impl<T> std::fmt::Debug for PendingResponse<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingResponse")
            .field("api", &api_name(self.api_key))
            .field("api_version", &self.api_version)
            .field("correlation_id", &self.guard.correlation_id)
            .finish()
    }
}

impl<T> PendingResponse<T> {
    /// The correlation id the request was sent with.
    pub fn correlation_id(&self) -> i32 {
        self.guard.correlation_id
    }
}

impl<T> Future for PendingResponse<T> {
    type Output = Result<T, ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let res = ready!(Pin::new(&mut this.rx).poll(cx));
        this.guard.armed = false;
        let correlation_id = this.guard.correlation_id;
        Poll::Ready(match res {
            Ok(Ok(mut body)) => (this.decode)(&mut body, this.api_version).map_err(|e| {
                poison_on_decode_error(&this.shared, this.api_key, correlation_id, &e);
                ClientError::Protocol(e)
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(this.shared.poison_error().unwrap_or(ClientError::Closed)),
        })
    }
}

/// The second half of [`Connection::enqueue_no_response`]: resolves once the
/// frame is written, or fails (and poisons the connection) if writing takes
/// longer than the request timeout.
#[must_use = "a PendingWrite does nothing unless awaited"]
pub struct PendingWrite {
    shared: Arc<Shared>,
    rx: oneshot::Receiver<()>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    api_key: i16,
}

impl std::fmt::Debug for PendingWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingWrite")
            .field("api", &api_name(self.api_key))
            .finish()
    }
}

impl Future for PendingWrite {
    type Output = Result<(), ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(res) = Pin::new(&mut this.rx).poll(cx) {
            return Poll::Ready(match res {
                Ok(()) => Ok(()),
                Err(_) => Err(this.shared.poison_error().unwrap_or(ClientError::Closed)),
            });
        }
        ready!(this.deadline.as_mut().poll(cx));
        let reason = format!(
            "writing a {} request timed out; the connection is closed",
            api_name(this.api_key)
        );
        this.shared.poison(Poison::Broken(reason.clone()));
        Poll::Ready(Err(ClientError::Poisoned(reason)))
    }
}

fn poison_on_decode_error(shared: &Shared, api_key: i16, correlation_id: i32, e: &ProtocolError) {
    let reason = format!(
        "cannot decode the response to {} (correlation id {correlation_id}): {e}",
        api_name(api_key)
    );
    shared.poison(Poison::Broken(reason));
}

/// A negotiated, pipelined connection to one broker.
///
/// Share it behind an [`Arc`] to send from many tasks at once; every method
/// takes `&self`. Dropping the last handle closes the connection.
pub struct Connection {
    shared: Arc<Shared>,
    versions: NegotiatedVersions,
    client_id: String,
    request_timeout: Duration,
    /// The SASL session, on SASL_PLAINTEXT and SASL_SSL connections.
    sasl: Option<Arc<SaslSession>>,
}

/// The transport `connect_tcp` opened.
enum Transport {
    Tcp(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// The SASL state of an authenticated connection (see the
/// [`super::security`] module for the re-authentication design).
struct SaslSession {
    credentials: SaslCredentials,
    /// Requests are queued under a shared guard; a re-authentication holds
    /// it exclusively, so nothing is written between its frames.
    gate: tokio::sync::RwLock<()>,
    /// When to re-authenticate (KIP-368); `None` = the session does not
    /// expire.
    reauth_at: Mutex<Option<Instant>>,
    /// Successful authentications on this connection, the first included.
    authentications: std::sync::atomic::AtomicU64,
}

impl SaslSession {
    fn due(&self, now: Instant) -> bool {
        self.reauth_at.lock().is_some_and(|at| now >= at)
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("client_id", &self.client_id)
            .field("in_flight", &self.in_flight())
            .field("poisoned", &self.shared.poison_error())
            .finish()
    }
}

impl Connection {
    /// Opens a TCP connection to `addr` (with `TCP_NODELAY`), wraps it in
    /// TLS when `security.protocol` is SSL or SASL_SSL (the host part of
    /// `addr` is the name the broker's certificate must carry), negotiates
    /// API versions and authenticates with SASL when the protocol asks for
    /// it. TCP connect and TLS handshake together are bounded by
    /// `socket.connection.setup.timeout.ms`.
    pub async fn connect_tcp<A>(
        addr: A,
        config: &ConnectionConfig,
    ) -> Result<Connection, ClientError>
    where
        A: ToSocketAddrs + std::fmt::Display,
    {
        let address = addr.to_string();
        let setup = async {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            if config.security.protocol.uses_tls() {
                let host = super::security::host_of(&address);
                let tls = super::security::tls_connect(stream, host, &config.security.tls).await?;
                Ok::<_, ClientError>(Transport::Tls(Box::new(tls)))
            } else {
                Ok(Transport::Tcp(stream))
            }
        };
        let transport = match tokio::time::timeout(config.connection_setup_timeout, setup).await {
            Ok(res) => res?,
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "connection setup to {address} timed out after {:?}",
                        config.connection_setup_timeout
                    ),
                )
                .into());
            }
        };
        match transport {
            Transport::Tcp(s) => Self::new(s, config).await,
            Transport::Tls(s) => Self::new(*s, config).await,
        }
    }

    /// Starts a connection over an established transport, negotiates API
    /// versions on it, and authenticates with SASL when
    /// `config.security.protocol` is SASL_PLAINTEXT or SASL_SSL (TLS, if
    /// any, is the transport's business: see [`Connection::connect_tcp`]).
    pub async fn new<T>(transport: T, config: &ConnectionConfig) -> Result<Connection, ClientError>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let credentials = config.security.sasl_credentials()?.cloned();
        let mut conn = Self::start(transport, config);
        conn.versions = conn.negotiate().await?;
        if let Some(credentials) = credentials {
            let session = Arc::new(SaslSession {
                credentials,
                gate: tokio::sync::RwLock::new(()),
                reauth_at: Mutex::new(None),
                authentications: std::sync::atomic::AtomicU64::new(0),
            });
            conn.sasl_exchange(&session).await?;
            conn.sasl = Some(session);
        }
        Ok(conn)
    }

    /// Spawns the reader and writer tasks; versions not negotiated yet.
    fn start<T>(transport: T, config: &ConnectionConfig) -> Connection
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (read_half, write_half) = tokio::io::split(transport);
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                next_correlation_id: 0,
                in_flight: VecDeque::new(),
                poisoned: None,
                writer: Some(tx),
                tasks: Vec::new(),
            }),
            slots: Arc::new(Semaphore::new(config.max_in_flight_requests.max(1))),
            queued: Notify::new(),
        });
        let decoder = FrameDecoder::new(config.max_frame_size);
        let reader = tokio::spawn(reader_task(read_half, decoder, shared.clone()));
        let writer = tokio::spawn(writer_task(write_half, rx, shared.clone()));
        shared.state.lock().tasks = vec![reader.abort_handle(), writer.abort_handle()];
        Connection {
            shared,
            versions: NegotiatedVersions::default(),
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            sasl: None,
        }
    }

    /// The versions negotiated with this broker, and its finalized features.
    pub fn versions(&self) -> &NegotiatedVersions {
        &self.versions
    }

    /// The `client.id` sent in every request header.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Whether the connection is unusable (broken or closed); a pool should
    /// replace it.
    pub fn is_poisoned(&self) -> bool {
        self.shared.state.lock().poisoned.is_some()
    }

    /// The error every send fails with, once poisoned.
    pub fn poison_error(&self) -> Option<ClientError> {
        self.shared.poison_error()
    }

    /// Requests queued and not yet answered, abandoned ones included.
    pub fn in_flight(&self) -> usize {
        self.shared.state.lock().in_flight.len()
    }

    /// Closes the connection: pending requests fail with
    /// [`ClientError::Closed`], and so do later sends.
    pub fn close(&self) {
        self.shared.poison(Poison::Closed);
    }

    /// Sends `req` at the highest version both sides support and waits for
    /// its response, up to the request timeout.
    ///
    /// Concurrent `send`s may reach the wire in any order; callers that need
    /// a wire order (Produce batches of one partition) use
    /// [`Connection::enqueue`] one request after the other.
    pub async fn send<R: ApiRequest>(&self, req: &R) -> Result<R::Response, ClientError> {
        self.enqueue(req).await?.await
    }

    /// First half of a two-phase send: waits for an in-flight slot
    /// (`max.in.flight.requests.per.connection`), then gives `req` its
    /// correlation id and queues its frame for the writer, and returns. The
    /// response is awaited through the returned [`PendingResponse`].
    ///
    /// Requests enqueued one after the other (each `enqueue` awaited before
    /// the next starts) are written in that order, whatever order their
    /// responses are awaited in, so a caller can pipeline requests whose
    /// order matters. The request timeout starts when `enqueue` returns.
    pub async fn enqueue<R: ApiRequest>(
        &self,
        req: &R,
    ) -> Result<PendingResponse<R::Response>, ClientError> {
        let version = self.versions.version_for_type::<R>()?;
        self.enqueue_at(req, version, self.request_timeout).await
    }

    /// [`Connection::enqueue`] if it need not wait: `Ok(None)` when every
    /// in-flight slot is taken, or a SASL re-authentication is due or under
    /// way, and nothing was queued. The caller then uses `enqueue`.
    ///
    /// A caller on a hot path (the producer's sender) queues its request
    /// here itself instead of handing it to a task that may wait; requests
    /// queued by `try_enqueue` and `enqueue` calls that follow one another
    /// reach the wire in that order.
    pub fn try_enqueue<R: ApiRequest>(
        &self,
        req: &R,
    ) -> Result<Option<PendingResponse<R::Response>>, ClientError> {
        let version = self.versions.version_for_type::<R>()?;
        let _gate = match &self.sasl {
            None => None,
            Some(session) => {
                if session.due(Instant::now()) {
                    return Ok(None);
                }
                match session.gate.try_read() {
                    Ok(guard) => Some(guard),
                    Err(_) => return Ok(None),
                }
            }
        };
        if let Some(e) = self.shared.poison_error() {
            return Err(e);
        }
        let slot = match self.shared.slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(tokio::sync::TryAcquireError::NoPermits) => return Ok(None),
            Err(tokio::sync::TryAcquireError::Closed) => {
                return Err(self.shared.poison_error().unwrap_or(ClientError::Closed));
            }
        };
        let frame = self.encode(req, version)?;
        let (guard, rx) =
            self.queue_in_slot(R::API_KEY, version, frame, self.request_timeout, slot)?;
        Ok(Some(self.pending::<R>(version, guard, rx)))
    }

    /// The [`PendingResponse`] of a request of type `R` just queued.
    fn pending<R: ApiRequest>(
        &self,
        version: i16,
        guard: AbandonGuard,
        rx: oneshot::Receiver<Result<Bytes, ClientError>>,
    ) -> PendingResponse<R::Response> {
        PendingResponse {
            shared: self.shared.clone(),
            rx,
            guard,
            api_key: R::API_KEY,
            api_version: version,
            decode: R::decode_response,
        }
    }

    /// Like [`Connection::send`] with its own timeout (e.g. a fetch's
    /// `max_wait_ms` added to the request timeout).
    pub async fn send_with_timeout<R: ApiRequest>(
        &self,
        req: &R,
        timeout: Duration,
    ) -> Result<R::Response, ClientError> {
        let version = self.versions.version_for_type::<R>()?;
        self.enqueue_at(req, version, timeout).await?.await
    }

    /// Sends `req` at an explicit `version`, which both this build and the
    /// broker must support.
    pub async fn send_with_version<R: ApiRequest>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        self.check_version::<R>(version)?;
        self.enqueue_at(req, version, self.request_timeout)
            .await?
            .await
    }

    /// Sends a request the broker does not answer (Produce with `acks=0`).
    /// Returns once the frame is written; nothing enters the in-flight queue.
    pub async fn send_no_response<R: ApiRequest>(&self, req: &R) -> Result<(), ClientError> {
        self.enqueue_no_response(req).await?.await
    }

    /// First half of [`Connection::send_no_response`]: waits for an
    /// in-flight slot and queues the frame for the writer, then returns a
    /// [`PendingWrite`] that resolves once the frame is written. As with
    /// [`Connection::enqueue`], frames enqueued one after the other are
    /// written in that order.
    pub async fn enqueue_no_response<R: ApiRequest>(
        &self,
        req: &R,
    ) -> Result<PendingWrite, ClientError> {
        let version = self.versions.version_for_type::<R>()?;
        let frame = self.encode(req, version)?;
        let _gate = self.gate().await?;
        let slot = self.acquire_slot().await?;
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.state.lock();
            if let Some(p) = &st.poisoned {
                return Err(p.error());
            }
            let correlation_id = st.allocate_correlation_id();
            let frame = with_correlation_id(frame, correlation_id);
            let cmd = WriteCmd {
                frame,
                written: Some(tx),
                _slot: Some(slot),
            };
            let sent = st.writer.as_ref().map(|w| w.send(cmd).is_ok());
            if sent != Some(true) {
                Shared::poison_locked(
                    &mut st,
                    &self.shared.slots,
                    Poison::Broken("writer task stopped".into()),
                );
                return Err(st
                    .poisoned
                    .as_ref()
                    .map_or(ClientError::Closed, Poison::error));
            }
        }
        Ok(PendingWrite {
            shared: self.shared.clone(),
            rx,
            deadline: Box::pin(tokio::time::sleep(self.request_timeout)),
            api_key: R::API_KEY,
        })
    }

    fn check_version<R: ApiRequest>(&self, version: i16) -> Result<(), ClientError> {
        let unsupported = |detail: String| ClientError::UnsupportedVersion {
            api_key: R::API_KEY,
            api_name: api_name(R::API_KEY),
            detail,
        };
        let ours = R::versions();
        if !ours.contains(version) {
            return Err(unsupported(format!(
                "version {version} requested, this build supports {}..={}",
                ours.min, ours.max
            )));
        }
        match self.versions.peer_range(R::API_KEY) {
            None => Err(unsupported("the broker does not offer this API".into())),
            Some(theirs) if !theirs.contains(version) => Err(unsupported(format!(
                "version {version} requested, the broker supports {}..={}",
                theirs.min, theirs.max
            ))),
            Some(_) => Ok(()),
        }
    }

    fn encode<R: ApiRequest>(&self, req: &R, version: i16) -> Result<BytesMut, ClientError> {
        let mut out = BytesMut::new();
        encode_request_frame(req, version, 0, Some(&self.client_id), &mut out)?;
        Ok(out)
    }

    async fn acquire_slot(&self) -> Result<OwnedSemaphorePermit, ClientError> {
        if let Some(e) = self.shared.poison_error() {
            return Err(e);
        }
        self.shared
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| self.shared.poison_error().unwrap_or(ClientError::Closed))
    }

    async fn enqueue_at<R: ApiRequest>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<PendingResponse<R::Response>, ClientError> {
        let _gate = self.gate().await?;
        self.enqueue_ungated(req, version, timeout).await
    }

    /// Queues a request without passing the re-authentication gate (the
    /// SASL exchange itself, which holds the gate).
    async fn enqueue_ungated<R: ApiRequest>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<PendingResponse<R::Response>, ClientError> {
        let frame = self.encode(req, version)?;
        let (guard, rx) = self.queue(R::API_KEY, version, frame, timeout).await?;
        Ok(self.pending::<R>(version, guard, rx))
    }

    /// Waits for an in-flight slot and queues an encoded request frame.
    /// Returns the armed abandon guard (holding the correlation id used) and
    /// the receiver of the response body after the header.
    async fn queue(
        &self,
        api_key: i16,
        api_version: i16,
        frame: BytesMut,
        timeout: Duration,
    ) -> Result<(AbandonGuard, oneshot::Receiver<Result<Bytes, ClientError>>), ClientError> {
        let slot = self.acquire_slot().await?;
        self.queue_in_slot(api_key, api_version, frame, timeout, slot)
    }

    /// [`Connection::queue`] once the in-flight slot is held: never waits.
    fn queue_in_slot(
        &self,
        api_key: i16,
        api_version: i16,
        frame: BytesMut,
        timeout: Duration,
        slot: OwnedSemaphorePermit,
    ) -> Result<(AbandonGuard, oneshot::Receiver<Result<Bytes, ClientError>>), ClientError> {
        let (tx, rx) = oneshot::channel();
        // Id allocation, queue entry and writer hand-off under one lock:
        // queue order == correlation-id order == wire order.
        let correlation_id = {
            let mut st = self.shared.state.lock();
            if let Some(p) = &st.poisoned {
                return Err(p.error());
            }
            let correlation_id = st.allocate_correlation_id();
            let cmd = WriteCmd {
                frame: with_correlation_id(frame, correlation_id),
                written: None,
                _slot: None,
            };
            let sent = st.writer.as_ref().map(|w| w.send(cmd).is_ok());
            if sent != Some(true) {
                Shared::poison_locked(
                    &mut st,
                    &self.shared.slots,
                    Poison::Broken("writer task stopped".into()),
                );
                return Err(st
                    .poisoned
                    .as_ref()
                    .map_or(ClientError::Closed, Poison::error));
            }
            st.in_flight.push_back(InFlight {
                correlation_id,
                api_key,
                api_version,
                deadline: Instant::now() + timeout,
                reply: Some(tx),
                _slot: slot,
            });
            correlation_id
        };
        self.shared.queued.notify_one();
        let guard = AbandonGuard {
            shared: self.shared.clone(),
            correlation_id,
            armed: true,
        };
        Ok((guard, rx))
    }

    /// How many times this connection authenticated with SASL (the first
    /// authentication included; 0 on a connection without SASL).
    pub fn sasl_authentications(&self) -> u64 {
        self.sasl.as_ref().map_or(0, |s| {
            s.authentications.load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// Passes the re-authentication gate: re-authenticates first if the
    /// SASL session is due (KIP-368), then returns the shared guard under
    /// which a request is queued.
    async fn gate(&self) -> Result<Option<tokio::sync::RwLockReadGuard<'_, ()>>, ClientError> {
        let Some(session) = &self.sasl else {
            return Ok(None);
        };
        loop {
            if !session.due(Instant::now()) {
                let guard = session.gate.read().await;
                if !session.due(Instant::now()) {
                    return Ok(Some(guard));
                }
                continue;
            }
            let _exclusive = session.gate.write().await;
            if session.due(Instant::now()) {
                tracing::debug!(
                    user = %session.credentials.username,
                    "SASL session near expiry: re-authenticating"
                );
                if let Err(e) = self.sasl_exchange(session).await {
                    self.shared
                        .poison(Poison::Broken(format!("re-authentication failed: {e}")));
                    return Err(e);
                }
            }
        }
    }

    /// One SASL exchange: SaslHandshake v1 naming the mechanism, then the
    /// mechanism's SaslAuthenticate round trips. Records when the session
    /// must be renewed.
    async fn sasl_exchange(&self, session: &SaslSession) -> Result<(), ClientError> {
        let creds = &session.credentials;
        let mechanism = creds.mechanism.name();
        let fail = |message: String| ClientError::Authentication {
            mechanism,
            username: creds.username.clone(),
            message,
        };
        if !self
            .versions
            .peer_range(SaslHandshakeRequest::API_KEY)
            .is_some_and(|r| r.contains(1))
        {
            return Err(fail(
                "the broker does not offer SaslHandshake v1 (is this a SASL listener?)".into(),
            ));
        }
        let auth_version = self
            .versions
            .version_for(SaslAuthenticateRequest::API_KEY)?;
        let handshake =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        let resp = self
            .enqueue_ungated(&handshake, 1, self.request_timeout)
            .await?
            .await?;
        if resp.error_code != 0 {
            let offered: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(fail(format!(
                "SaslHandshake failed with {} (the broker offers {offered:?})",
                ErrorCode(resp.error_code)
            )));
        }
        let authenticate = |token: Vec<u8>| async move {
            let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
            let resp = self
                .enqueue_ungated(&req, auth_version, self.request_timeout)
                .await?
                .await?;
            if resp.error_code != 0 {
                let detail = resp
                    .error_message
                    .as_ref()
                    .map(|m| format!(": {}", m.as_str()))
                    .unwrap_or_default();
                return Err(fail(format!("{}{detail}", ErrorCode(resp.error_code))));
            }
            Ok(resp)
        };
        let started = Instant::now();
        let last = match creds.mechanism {
            SaslMechanism::Plain => {
                authenticate(plain_client_message(
                    &creds.username,
                    creds.password.expose(),
                ))
                .await?
            }
            m => {
                let (mut scram, first) =
                    ScramClient::start(m, &creds.username, creds.password.expose());
                let server_first = authenticate(first).await?;
                let client_final = scram
                    .client_final(&server_first.auth_bytes)
                    .map_err(|e| fail(e.to_string()))?;
                let server_final = authenticate(client_final).await?;
                scram
                    .verify_server_final(&server_final.auth_bytes)
                    .map_err(|e| fail(e.to_string()))?;
                server_final
            }
        };
        let lifetime = u64::try_from(last.session_lifetime_ms).unwrap_or(0);
        *session.reauth_at.lock() = (lifetime > 0)
            .then(|| super::security::reauth_deadline(started, Duration::from_millis(lifetime)));
        session
            .authentications
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!(user = %creds.username, mechanism, session_lifetime_ms = lifetime,
            "SASL authenticated");
        Ok(())
    }

    /// ApiVersions v3, falling back to the broker's highest version on
    /// UNSUPPORTED_VERSION.
    async fn negotiate(&self) -> Result<NegotiatedVersions, ClientError> {
        let resp = self.api_versions(API_VERSIONS_REQUEST_VERSION).await?;
        let resp = if resp.error_code == ErrorCode::UNSUPPORTED_VERSION.0 {
            let theirs = resp
                .api_keys
                .iter()
                .find(|k| k.api_key == ApiVersionsRequest::API_KEY)
                .map_or(0, |k| k.max_version);
            // Below the refused version, so a confused broker cannot make us
            // loop; a broker that lists no ApiVersions range gets v0.
            let retry = theirs.clamp(0, API_VERSIONS_REQUEST_VERSION - 1);
            tracing::debug!(
                retry,
                "broker refused ApiVersions v{API_VERSIONS_REQUEST_VERSION}, retrying"
            );
            self.api_versions(retry).await?
        } else {
            resp
        };
        ClientError::check("ApiVersions", resp.error_code, None)?;
        Ok(NegotiatedVersions::from_response(&resp))
    }

    async fn api_versions(&self, version: i16) -> Result<ApiVersionsResponse, ClientError> {
        let mut req = ApiVersionsRequest::default();
        if version >= 3 {
            req = req
                .with_client_software_name(StrBytes::from_static_str(CLIENT_SOFTWARE_NAME))
                .with_client_software_version(StrBytes::from_static_str(CLIENT_SOFTWARE_VERSION));
        }
        let key = ApiVersionsRequest::API_KEY;
        let frame = self.encode(&req, version)?;
        let (mut guard, rx) = self
            .queue(key, version, frame, self.request_timeout)
            .await?;
        let correlation_id = guard.correlation_id;
        let res = rx.await;
        guard.armed = false;
        let mut body = match res {
            Ok(Ok(body)) => body,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(self.shared.poison_error().unwrap_or(ClientError::Closed)),
        };
        // A broker that does not know our version answers UNSUPPORTED_VERSION
        // in a v0 body; the error code leads the body in every version.
        let decode_version = if body.len() >= 2
            && i16::from_be_bytes([body[0], body[1]]) == ErrorCode::UNSUPPORTED_VERSION.0
        {
            0
        } else {
            version
        };
        ApiVersionsRequest::decode_response(&mut body, decode_version).map_err(|e| {
            poison_on_decode_error(&self.shared, key, correlation_id, &e);
            ClientError::Protocol(e)
        })
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.poison(Poison::Closed);
    }
}

/// Writes `id` into the request header of an encoded frame.
fn with_correlation_id(mut frame: BytesMut, id: i32) -> Bytes {
    frame[CORRELATION_ID_OFFSET..CORRELATION_ID_OFFSET + 4].copy_from_slice(&id.to_be_bytes());
    frame.freeze()
}

/// Writes queued frames in order; batches what is queued into one flush.
async fn writer_task<W>(
    mut write: W,
    mut rx: mpsc::UnboundedReceiver<WriteCmd>,
    shared: Arc<Shared>,
) where
    W: AsyncWrite + Unpin,
{
    const MAX_BATCH: usize = 64;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        for cmd in &batch {
            if let Err(e) = write.write_all(&cmd.frame).await {
                shared.poison(Poison::Broken(format!("write failed: {e}")));
                return;
            }
        }
        if let Err(e) = write.flush().await {
            shared.poison(Poison::Broken(format!("flush failed: {e}")));
            return;
        }
        for cmd in batch.drain(..) {
            if let Some(written) = cmd.written {
                let _ = written.send(());
            }
        }
    }
    let _ = write.shutdown().await;
}

/// Reads response frames and delivers them; enforces request deadlines.
async fn reader_task<Rd>(mut read: Rd, mut decoder: FrameDecoder, shared: Arc<Shared>)
where
    Rd: AsyncRead + Unpin,
{
    loop {
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    if !shared.on_response(frame) {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    shared.poison(Poison::Broken(format!("framing lost: {e}")));
                    return;
                }
            }
        }
        // Room for the whole rest of the frame at once, so that a frame is
        // one allocation of its own size. (Reserving 64 KiB per read made a
        // 512 KiB ShareFetch response grow by doubling and copying, and
        // the records handed out pinned the oversized buffers: the share
        // consumer's peak RSS at 1 KiB was 37-65 MiB instead of 22-30,
        // docs/BENCHMARKS.md.) The size is the broker's length prefix,
        // which `next_frame` above already refused beyond
        // `max_frame_size`; untouched pages of a large reservation cost no
        // memory.
        let reserve = decoder.bytes_needed().max(1);
        decoder.buffer_mut().reserve(reserve);
        let deadline = shared.earliest_deadline();
        tokio::select! {
            res = read.read_buf(decoder.buffer_mut()) => match res {
                Ok(0) => {
                    let pending = shared.state.lock().in_flight.len();
                    shared.poison(Poison::Broken(format!(
                        "connection closed by the broker (EOF) with {pending} request(s) in flight"
                    )));
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    shared.poison(Poison::Broken(format!("read failed: {e}")));
                    return;
                }
            },
            _ = sleep_until_opt(deadline) => {
                if !shared.expire(Instant::now()) {
                    return;
                }
            }
            _ = shared.queued.notified() => {}
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::test_peer::{
        ScriptedPeer, all_apis_except, answered_topic, api_versions_response, metadata_for,
    };
    use crate::protocol::txn_share_ack::TxnShareAcknowledgeRequest;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{MetadataRequest, ProduceRequest};
    use tokio::io::DuplexStream;

    const METADATA: i16 = 3;

    fn config() -> ConnectionConfig {
        ConnectionConfig::default()
            .with_client_id("test-client")
            .with_request_timeout(Duration::from_secs(5))
            .with_max_in_flight_requests(64)
    }

    /// A negotiated connection to a scripted peer that lists every API.
    async fn connected(config: &ConnectionConfig) -> (Connection, ScriptedPeer<DuplexStream>) {
        connected_with(config, &all_apis_except(&[])).await
    }

    async fn connected_with(
        config: &ConnectionConfig,
        keys: &[(i16, i16, i16)],
    ) -> (Connection, ScriptedPeer<DuplexStream>) {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let mut peer = ScriptedPeer::new(server);
        let (conn, _) = tokio::join!(Connection::new(client, config), peer.handshake(keys));
        (conn.expect("handshake"), peer)
    }

    /// Sends a Metadata request for `topic`.
    async fn meta(
        conn: &Connection,
        topic: &str,
    ) -> Result<kafka_protocol::messages::MetadataResponse, ClientError> {
        conn.send(&metadata_for(topic)).await
    }

    /// Sends one Metadata request per topic, concurrently.
    async fn send_all(
        conn: &Connection,
        topics: &[&str],
    ) -> Vec<Result<kafka_protocol::messages::MetadataResponse, ClientError>> {
        futures::future::join_all(topics.iter().map(|t| meta(conn, t))).await
    }

    fn poisoned_reason(e: &ClientError) -> &str {
        match e {
            ClientError::Poisoned(reason) => reason,
            other => panic!("expected Poisoned, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn pipelined_requests_are_answered_in_order() {
        let (conn, mut peer) = connected(&config()).await;
        const N: usize = 40;
        let sends = futures::future::join_all((0..N).map(|i| {
            let conn = &conn;
            async move { conn.send(&metadata_for(&format!("t{i}"))).await }
        }));
        let script = async {
            // Every request is on the wire before the first answer: pipelining.
            let mut received = Vec::new();
            for _ in 0..N {
                received.push(peer.recv().await);
            }
            let ids: Vec<i32> = received.iter().map(|r| r.header.correlation_id).collect();
            assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
            for r in &received {
                assert_eq!(r.header.client_id.as_deref(), Some("test-client"));
                assert_eq!(r.header.api_key, METADATA);
                let topic = r.metadata_topic();
                peer.answer_metadata(r, &topic).await;
            }
        };
        let (results, ()) = tokio::join!(sends, script);
        for (i, res) in results.into_iter().enumerate() {
            assert_eq!(answered_topic(&res.unwrap()), format!("t{i}"));
        }
        assert_eq!(conn.in_flight(), 0);
        assert!(!conn.is_poisoned());
    }

    #[tokio::test(start_paused = true)]
    async fn out_of_order_correlation_id_poisons_and_fails_all_pending() {
        let (conn, mut peer) = connected(&config()).await;
        let sends = send_all(&conn, &["a", "b", "c"]);
        let script = async {
            let a = peer.recv().await;
            let b = peer.recv().await;
            let _c = peer.recv().await;
            // Answer b before a: Kafka never does this on one connection.
            peer.answer_metadata(&b, "b").await;
            (a.header.correlation_id, b.header.correlation_id)
        };
        let (results, (a_id, b_id)) = tokio::join!(sends, script);
        for res in &results {
            let reason = poisoned_reason(res.as_ref().unwrap_err()).to_string();
            assert!(
                reason.contains(&format!("response correlation id {b_id}")),
                "{reason}"
            );
            assert!(
                reason.contains(&format!("correlation id {a_id}")),
                "{reason}"
            );
        }
        assert!(conn.is_poisoned());
        assert_eq!(conn.in_flight(), 0);
        // Later sends fail fast with the same reason, and nothing is written.
        let err = meta(&conn, "d").await.unwrap_err();
        assert!(poisoned_reason(&err).contains(&b_id.to_string()));
        // Both tasks stopped and dropped the transport.
        assert!(peer.recv_or_eof().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn unsolicited_response_poisons() {
        let (conn, mut peer) = connected(&config()).await;
        peer.respond::<MetadataRequest>(&Default::default(), 12, 42)
            .await;
        assert!(peer.recv_or_eof().await.is_none());
        assert!(conn.is_poisoned());
        let err = meta(&conn, "x").await.unwrap_err();
        assert!(poisoned_reason(&err).contains("42"));
    }

    #[tokio::test(start_paused = true)]
    async fn request_timeout_fails_the_request_and_closes_the_connection() {
        let cfg = config().with_request_timeout(Duration::from_secs(2));
        let (conn, mut peer) = connected(&cfg).await;
        let start = Instant::now();
        let first = meta(&conn, "slow");
        let second = async {
            // Queued a second later, so its own deadline is later.
            tokio::time::sleep(Duration::from_secs(1)).await;
            meta(&conn, "behind").await
        };
        let script = async {
            let r = peer.recv().await;
            let _ = peer.recv().await;
            r.header.correlation_id
        };
        let (first, second, slow_id) = tokio::join!(first, second, script);
        match first {
            Err(ClientError::Timeout {
                api: "Metadata",
                correlation_id,
            }) => assert_eq!(correlation_id, slow_id),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        // The request behind it is failed by the closed connection.
        assert!(poisoned_reason(&second.unwrap_err()).contains("timed out"));
        assert!(conn.is_poisoned());
        assert!(peer.recv_or_eof().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_send_future_leaves_the_queue_consistent() {
        let (conn, mut peer) = connected(&config()).await;
        // Start a send, wait until it is on the wire, then drop it.
        let abandoned = {
            let fut = meta(&conn, "abandoned");
            tokio::pin!(fut);
            tokio::select! {
                _ = &mut fut => panic!("no answer was sent"),
                r = peer.recv() => r,
            }
        };
        assert_eq!(conn.in_flight(), 1, "the abandoned entry keeps its place");
        let next = meta(&conn, "next");
        let script = async {
            let r = peer.recv().await;
            assert_eq!(r.metadata_topic(), "next");
            // Answer in order: first the abandoned request, then ours.
            peer.answer_metadata(&abandoned, "abandoned").await;
            peer.answer_metadata(&r, "next").await;
        };
        let (next, ()) = tokio::join!(next, script);
        assert_eq!(answered_topic(&next.unwrap()), "next");
        assert_eq!(conn.in_flight(), 0);
        assert!(!conn.is_poisoned());
        // And the connection keeps working.
        let again = meta(&conn, "again");
        let script = async {
            let r = peer.recv().await;
            peer.answer_metadata(&r, "again").await;
        };
        let (again, ()) = tokio::join!(again, script);
        assert_eq!(answered_topic(&again.unwrap()), "again");
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_send_future_still_has_its_deadline_enforced() {
        let cfg = config().with_request_timeout(Duration::from_secs(1));
        let (conn, mut peer) = connected(&cfg).await;
        {
            let fut = meta(&conn, "abandoned");
            tokio::pin!(fut);
            tokio::select! {
                _ = &mut fut => panic!("no answer was sent"),
                _ = peer.recv() => {}
            }
        }
        // Nobody waits for it, yet its slot is not held forever.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(conn.in_flight(), 0);
        assert!(conn.is_poisoned());
    }

    #[tokio::test(start_paused = true)]
    async fn garbage_length_prefix_poisons() {
        let (conn, mut peer) = connected(&config()).await;
        let send = meta(&conn, "x");
        let script = async {
            let _ = peer.recv().await;
            peer.write_raw(&[0xFF, 0xFF, 0xFF, 0xF0, 1, 2, 3]).await;
        };
        let (res, ()) = tokio::join!(send, script);
        let err = res.unwrap_err();
        assert!(poisoned_reason(&err).contains("framing lost"), "{err}");
        assert!(conn.is_poisoned());
        assert!(matches!(
            meta(&conn, "y").await,
            Err(ClientError::Poisoned(_))
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn oversized_frame_poisons_before_it_is_read() {
        let cfg = config().with_max_frame_size(1024);
        let (conn, mut peer) = connected(&cfg).await;
        let send = meta(&conn, "x");
        let script = async {
            let _ = peer.recv().await;
            peer.write_raw(&(1_000_000i32).to_be_bytes()).await;
        };
        let (res, ()) = tokio::join!(send, script);
        let err = res.unwrap_err();
        assert!(
            poisoned_reason(&err).contains("exceeds the maximum"),
            "{err}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn undecodable_response_body_poisons() {
        let (conn, mut peer) = connected(&config()).await;
        let send = meta(&conn, "x");
        let script = async {
            let r = peer.recv().await;
            // A valid v1 response header (correlation id, no tagged fields)
            // followed by a body cut short.
            let mut frame = Vec::new();
            frame.extend_from_slice(&7i32.to_be_bytes());
            frame.extend_from_slice(&r.header.correlation_id.to_be_bytes());
            frame.extend_from_slice(&[0, 0, 0]);
            peer.write_raw(&frame).await;
        };
        let (res, ()) = tokio::join!(send, script);
        match res {
            Err(ClientError::Protocol(ProtocolError::Decode { api_name, .. })) => {
                assert_eq!(api_name, "Metadata")
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
        assert!(conn.is_poisoned());
        let err = meta(&conn, "y").await.unwrap_err();
        assert!(poisoned_reason(&err).contains("cannot decode"));
    }

    #[tokio::test(start_paused = true)]
    async fn eof_fails_every_pending_request() {
        let (conn, mut peer) = connected(&config()).await;
        let sends = send_all(&conn, &["a", "b"]);
        let script = async move {
            let _ = peer.recv().await;
            let _ = peer.recv().await;
            drop(peer);
        };
        let (results, ()) = tokio::join!(sends, script);
        for res in results {
            let err = res.unwrap_err();
            assert!(poisoned_reason(&err).contains("EOF"), "{err}");
            assert!(err.is_retriable());
        }
        assert!(conn.is_poisoned());
    }

    #[tokio::test(start_paused = true)]
    async fn negotiation_sends_v3_and_keeps_versions_and_features() {
        let cfg = config();
        let (client, server) = tokio::io::duplex(64 * 1024);
        let mut peer = ScriptedPeer::new(server);
        let script = async {
            let req = peer.recv().await;
            assert_eq!(req.header.api_version, 3);
            assert_eq!(req.header.correlation_id, 0);
            assert_eq!(req.header.client_id.as_deref(), Some("test-client"));
            let body = req.api_versions();
            assert_eq!(&*body.client_software_name, "sharestream");
            assert_eq!(&*body.client_software_version, env!("CARGO_PKG_VERSION"));
            let resp = api_versions_response(&[(18, 0, 4), (METADATA, 0, 9)])
                .with_finalized_features_epoch(7)
                .with_finalized_features(vec![ScriptedPeer::<DuplexStream>::finalized(
                    "share.version",
                    1,
                )]);
            peer.respond::<ApiVersionsRequest>(&resp, 3, 0).await;
        };
        let (conn, ()) = tokio::join!(Connection::new(client, &cfg), script);
        let conn = conn.unwrap();
        let v = conn.versions();
        assert_eq!(v.version_for(METADATA).unwrap(), 9);
        assert_eq!(v.finalized_feature("share.version"), Some(1));
        assert_eq!(v.finalized_features_epoch(), 7);
        // Metadata goes out at the negotiated version.
        let send = meta(&conn, "x");
        let script = async {
            let r = peer.recv().await;
            assert_eq!(r.header.api_version, 9);
            peer.answer_metadata(&r, "x").await;
        };
        let (res, ()) = tokio::join!(send, script);
        res.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn negotiation_falls_back_to_the_brokers_api_versions_version() {
        let cfg = config();
        let (client, server) = tokio::io::duplex(64 * 1024);
        let mut peer = ScriptedPeer::new(server);
        let script = async {
            let first = peer.recv().await;
            assert_eq!(first.header.api_version, 3);
            // An old broker: UNSUPPORTED_VERSION in a v0 body listing its range.
            let refusal = ApiVersionsResponse::default()
                .with_error_code(35)
                .with_api_keys(vec![
                    ApiVersion::default()
                        .with_api_key(18)
                        .with_min_version(0)
                        .with_max_version(2),
                ]);
            peer.respond::<ApiVersionsRequest>(&refusal, 0, first.header.correlation_id)
                .await;
            let retry = peer.recv().await;
            assert_eq!(retry.header.api_key, 18);
            assert_eq!(retry.header.api_version, 2);
            assert_eq!(retry.header.client_id.as_deref(), Some("test-client"));
            assert_eq!(&*retry.api_versions().client_software_name, "");
            peer.respond::<ApiVersionsRequest>(
                &api_versions_response(&[(18, 0, 2), (METADATA, 0, 7)]),
                2,
                retry.header.correlation_id,
            )
            .await;
        };
        let (conn, ()) = tokio::join!(Connection::new(client, &cfg), script);
        let conn = conn.unwrap();
        assert_eq!(conn.versions().version_for(METADATA).unwrap(), 7);
        assert!(conn.versions().version_for(0).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn negotiation_error_fails_the_connect() {
        let cfg = config();
        let (client, server) = tokio::io::duplex(64 * 1024);
        let mut peer = ScriptedPeer::new(server);
        let script = async {
            let r = peer.recv().await;
            let resp = api_versions_response(&[]).with_error_code(31);
            peer.respond::<ApiVersionsRequest>(&resp, 3, r.header.correlation_id)
                .await;
        };
        let (conn, ()) = tokio::join!(Connection::new(client, &cfg), script);
        match conn {
            Err(ClientError::Broker {
                api: "ApiVersions",
                code,
                ..
            }) => {
                assert_eq!(code, ErrorCode::CLUSTER_AUTHORIZATION_FAILED)
            }
            other => panic!("{other:?}"),
        }
        // The failed connection is closed.
        assert!(peer.recv_or_eof().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn api_missing_on_the_broker_fails_before_any_byte_is_written() {
        let keys = all_apis_except(&[95]);
        let (conn, mut peer) = connected_with(&config(), &keys).await;
        let err = conn
            .send(&TxnShareAcknowledgeRequest::default())
            .await
            .unwrap_err();
        match &err {
            ClientError::UnsupportedVersion {
                api_key: 95,
                api_name: "TxnShareAcknowledge",
                ..
            } => {}
            other => panic!("{other:?}"),
        }
        assert!(!err.is_retriable());
        assert!(peer.stays_silent(Duration::from_secs(1)).await);
        assert!(!conn.is_poisoned());
        assert_eq!(conn.in_flight(), 0);
        // The next frame on the wire is the next request, whole.
        let send = meta(&conn, "after");
        let script = async {
            let r = peer.recv().await;
            assert_eq!(r.metadata_topic(), "after");
            peer.answer_metadata(&r, "after").await;
        };
        let (res, ()) = tokio::join!(send, script);
        res.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn explicit_version_outside_the_brokers_range_is_refused_locally() {
        let keys = [(18, 0, 4), (METADATA, 0, 9)];
        let (conn, mut peer) = connected_with(&config(), &keys).await;
        let err = conn
            .send_with_version(&metadata_for("x"), 12)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ClientError::UnsupportedVersion { api_name: "Metadata", detail, .. }
                if detail.contains("0..=9")),
            "{err:?}"
        );
        assert!(peer.stays_silent(Duration::from_secs(1)).await);
        let req = metadata_for("x");
        let send = conn.send_with_version(&req, 4);
        let script = async {
            let r = peer.recv().await;
            assert_eq!(r.header.api_version, 4);
            peer.answer_metadata(&r, "x").await;
        };
        let (res, ()) = tokio::join!(send, script);
        assert_eq!(answered_topic(&res.unwrap()), "x");
    }

    #[tokio::test(start_paused = true)]
    async fn send_no_response_takes_no_in_flight_entry() {
        let (conn, mut peer) = connected(&config()).await;
        let produce = ProduceRequest::default().with_acks(0);
        conn.send_no_response(&produce).await.unwrap();
        assert_eq!(conn.in_flight(), 0);
        let r = peer.recv().await;
        assert_eq!(r.header.api_key, 0);
        assert_eq!(r.header.client_id.as_deref(), Some("test-client"));
        // A request after it gets its own response.
        let send = meta(&conn, "m");
        let script = async {
            let m = peer.recv().await;
            assert_eq!(m.header.correlation_id, r.header.correlation_id + 1);
            peer.answer_metadata(&m, "m").await;
        };
        let (res, ()) = tokio::join!(send, script);
        assert_eq!(answered_topic(&res.unwrap()), "m");
    }

    #[tokio::test(start_paused = true)]
    async fn in_flight_limit_holds_back_further_requests() {
        let cfg = config().with_max_in_flight_requests(2);
        let (conn, mut peer) = connected(&cfg).await;
        let sends = send_all(&conn, &["a", "b", "c"]);
        let script = async {
            let a = peer.recv().await;
            let b = peer.recv().await;
            // The third request waits for a slot.
            assert!(peer.stays_silent(Duration::from_millis(100)).await);
            peer.answer_metadata(&a, "a").await;
            let c = peer.recv().await;
            assert_eq!(c.metadata_topic(), "c");
            peer.answer_metadata(&b, "b").await;
            peer.answer_metadata(&c, "c").await;
        };
        let (results, ()) = tokio::join!(sends, script);
        let topics: Vec<String> = results
            .into_iter()
            .map(|r| answered_topic(&r.unwrap()))
            .collect();
        assert_eq!(topics, ["a", "b", "c"]);
    }

    /// `try_enqueue` queues at once while a slot is free, queues nothing
    /// and says so while none is, and keeps the wire order with `enqueue`
    /// calls before it.
    #[tokio::test(start_paused = true)]
    async fn try_enqueue_takes_a_free_slot_or_leaves_the_request_to_the_caller() {
        let cfg = config().with_max_in_flight_requests(2);
        let (conn, mut peer) = connected(&cfg).await;
        let a = conn.enqueue(&metadata_for("a")).await.expect("enqueue");
        let b = conn
            .try_enqueue(&metadata_for("b"))
            .expect("no error")
            .expect("a slot was free");
        assert!(
            conn.try_enqueue(&metadata_for("c"))
                .expect("no error")
                .is_none(),
            "both slots are taken"
        );
        let ra = peer.recv().await;
        let rb = peer.recv().await;
        assert_eq!(
            (ra.metadata_topic(), rb.metadata_topic()),
            ("a".into(), "b".into())
        );
        assert!(rb.header.correlation_id > ra.header.correlation_id);
        // The refused request was not queued.
        assert!(peer.stays_silent(Duration::from_millis(100)).await);
        peer.answer_metadata(&ra, "a").await;
        assert_eq!(answered_topic(&a.await.unwrap()), "a");
        let c = conn
            .try_enqueue(&metadata_for("c"))
            .expect("no error")
            .expect("a slot came free");
        let rc = peer.recv().await;
        assert_eq!(rc.metadata_topic(), "c");
        peer.answer_metadata(&rb, "b").await;
        peer.answer_metadata(&rc, "c").await;
        assert_eq!(answered_topic(&b.await.unwrap()), "b");
        assert_eq!(answered_topic(&c.await.unwrap()), "c");
        conn.close();
        assert!(matches!(
            conn.try_enqueue(&metadata_for("d")),
            Err(ClientError::Closed)
        ));
    }

    /// A dispatcher awaiting `enqueue` one request after the other, with
    /// the in-flight slots exhausted and freed two at a time while other
    /// callers compete for them: its requests reach the wire in call order,
    /// and each response reaches its own `PendingResponse`.
    #[tokio::test(start_paused = true)]
    async fn enqueued_requests_hit_the_wire_in_call_order_when_slots_run_out() {
        use futures::StreamExt;
        let cfg = config().with_max_in_flight_requests(2);
        let (conn, mut peer) = connected(&cfg).await;
        const OURS: usize = 8;
        const OTHERS: usize = 6;
        let dispatcher = async {
            let mut pending = futures::stream::FuturesOrdered::new();
            for i in 0..OURS {
                let req = metadata_for(&format!("p{i}"));
                pending.push_back(conn.enqueue(&req).await.expect("enqueue"));
                // Let the competitors get polled between our enqueues.
                tokio::task::yield_now().await;
            }
            pending.collect::<Vec<_>>().await
        };
        let others: Vec<String> = (0..OTHERS).map(|i| format!("x{i}")).collect();
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        let competitors = send_all(&conn, &others);
        let script = async {
            let mut wire = Vec::new();
            while wire.len() < OURS + OTHERS {
                // Both slots taken: nothing else is written until answers.
                let a = peer.recv().await;
                let b = peer.recv().await;
                assert!(peer.stays_silent(Duration::from_millis(10)).await);
                for r in [a, b] {
                    let topic = r.metadata_topic();
                    peer.answer_metadata(&r, &topic).await;
                    wire.push((r.header.correlation_id, topic));
                }
            }
            wire
        };
        let (ours, theirs, wire) = tokio::join!(dispatcher, competitors, script);
        assert!(
            wire.windows(2).all(|w| w[1].0 > w[0].0),
            "correlation ids out of order on the wire: {wire:?}"
        );
        let our_wire: Vec<&str> = wire
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| t.starts_with('p'))
            .collect();
        let expected: Vec<String> = (0..OURS).map(|i| format!("p{i}")).collect();
        assert_eq!(our_wire, expected, "wire order: {wire:?}");
        for (i, res) in ours.into_iter().enumerate() {
            assert_eq!(answered_topic(&res.unwrap()), format!("p{i}"));
        }
        for (i, res) in theirs.into_iter().enumerate() {
            assert_eq!(answered_topic(&res.unwrap()), format!("x{i}"));
        }
        assert_eq!(conn.in_flight(), 0);
        assert!(!conn.is_poisoned());
    }

    /// The request timeout of an enqueued request runs whether or not its
    /// `PendingResponse` is polled, and poisons the connection as `send` does.
    #[tokio::test(start_paused = true)]
    async fn pending_response_times_out_even_when_not_polled() {
        let cfg = config().with_request_timeout(Duration::from_secs(2));
        let (conn, mut peer) = connected(&cfg).await;
        let pending = conn.enqueue(&metadata_for("slow")).await.unwrap();
        let r = peer.recv().await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(conn.is_poisoned());
        match pending.await {
            Err(ClientError::Timeout {
                api: "Metadata",
                correlation_id,
            }) => assert_eq!(correlation_id, r.header.correlation_id),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(matches!(
            conn.enqueue(&metadata_for("y")).await,
            Err(ClientError::Poisoned(_))
        ));
    }

    /// Dropping a `PendingResponse` abandons its request only: its response
    /// is read and discarded, the next one reaches its caller.
    #[tokio::test(start_paused = true)]
    async fn dropping_a_pending_response_abandons_only_its_request() {
        let (conn, mut peer) = connected(&config()).await;
        let first = conn.enqueue(&metadata_for("dropped")).await.unwrap();
        let second = conn.enqueue(&metadata_for("kept")).await.unwrap();
        assert_eq!(second.correlation_id(), first.correlation_id() + 1);
        drop(first);
        let a = peer.recv().await;
        let b = peer.recv().await;
        peer.answer_metadata(&a, "dropped").await;
        peer.answer_metadata(&b, "kept").await;
        assert_eq!(answered_topic(&second.await.unwrap()), "kept");
        assert_eq!(conn.in_flight(), 0);
        assert!(!conn.is_poisoned());
    }

    /// A request without a response keeps its place in the call order too.
    #[tokio::test(start_paused = true)]
    async fn enqueue_no_response_keeps_call_order_with_other_requests() {
        let (conn, mut peer) = connected(&config().with_max_in_flight_requests(1)).await;
        let produce = ProduceRequest::default().with_acks(0);
        let written = conn.enqueue_no_response(&produce).await.unwrap();
        let script = async {
            let p = peer.recv().await;
            assert_eq!(p.header.api_key, 0);
            let m = peer.recv().await;
            assert_eq!(m.header.correlation_id, p.header.correlation_id + 1);
            peer.answer_metadata(&m, "after").await;
        };
        let after = async {
            // Waits for the slot the Produce holds until it is written.
            let pending = conn.enqueue(&metadata_for("after")).await.unwrap();
            pending.await
        };
        let (w, res, ()) = tokio::join!(written, after, script);
        w.unwrap();
        assert_eq!(answered_topic(&res.unwrap()), "after");
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_connection_closes_the_transport() {
        let (conn, mut peer) = connected(&config()).await;
        drop(conn);
        assert!(peer.recv_or_eof().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn close_fails_pending_with_closed() {
        let (conn, mut peer) = connected(&config()).await;
        let send = meta(&conn, "x");
        let script = async {
            let _ = peer.recv().await;
            conn.close();
        };
        let (res, ()) = tokio::join!(send, script);
        assert!(matches!(res, Err(ClientError::Closed)));
        assert!(matches!(meta(&conn, "y").await, Err(ClientError::Closed)));
    }

    /// Many tasks on several threads, half of them dropping their send
    /// mid-flight: every completed send gets its own response, and nothing is
    /// left in the queue.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_sends_with_cancellations_across_threads() {
        let (conn, mut peer) = connected(&config().with_max_in_flight_requests(8)).await;
        let conn = Arc::new(conn);
        let server = tokio::spawn(async move {
            while let Some(r) = peer.recv_or_eof().await {
                let topic = r.metadata_topic();
                peer.answer_metadata(&r, &topic).await;
            }
        });
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let conn = conn.clone();
                tokio::spawn(async move {
                    let topic = format!("t{i}");
                    let req = metadata_for(&topic);
                    if i % 2 == 0 {
                        // Dropped after its first poll or two.
                        tokio::select! {
                            biased;
                            r = conn.send(&req) => Some((topic, r)),
                            _ = tokio::task::yield_now() => None,
                        }
                    } else {
                        Some((topic, conn.send(&req).await))
                    }
                })
            })
            .collect();
        for t in tasks {
            if let Some((topic, res)) = t.await.unwrap() {
                assert_eq!(answered_topic(&res.unwrap()), topic);
            }
        }
        // Answered in order: once this returns, everything before it has been.
        let last = meta(&conn, "last").await.unwrap();
        assert_eq!(answered_topic(&last), "last");
        assert_eq!(conn.in_flight(), 0);
        assert!(!conn.is_poisoned());
        drop(conn);
        server.await.unwrap();
    }

    #[tokio::test]
    async fn real_tcp_connection_to_a_scripted_server() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut peer = ScriptedPeer::new(stream);
            let hello = peer.handshake(&all_apis_except(&[])).await;
            assert_eq!(hello.header.client_id.as_deref(), Some("tcp-client"));
            for _ in 0..3 {
                let r = peer.recv().await;
                let topic = r.metadata_topic();
                peer.answer_metadata(&r, &topic).await;
            }
            assert!(peer.recv_or_eof().await.is_none());
        });
        let cfg = ConnectionConfig::default().with_client_id("tcp-client");
        let conn = Connection::connect_tcp(addr, &cfg).await.unwrap();
        let results = send_all(&conn, &["x", "y", "z"]).await;
        let topics: Vec<String> = results
            .into_iter()
            .map(|r| answered_topic(&r.unwrap()))
            .collect();
        assert_eq!(topics, ["x", "y", "z"]);
        drop(conn);
        server.await.unwrap();
    }
}
