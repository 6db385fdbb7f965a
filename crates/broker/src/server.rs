//! The network side of the broker: listener, connections, request dispatch.
//!
//! Each connection is served by one task. Requests may be pipelined by the
//! client; the task processes them one at a time and answers in order, as
//! Kafka requires. Responses of pipelined requests are written together,
//! except that pending responses are always flushed before a request that
//! may wait (a long-polling fetch).
//!
//! Limits: a semaphore caps connections (accepting pauses at the cap), a
//! second one caps the request bytes held by the broker across connections
//! (`max_queued_request_bytes`), and the frame decoder refuses frames above
//! `max_frame_size` before allocating anything.
//!
//! Bad input: an undecodable frame, an unknown API key, or a version we do
//! not advertise closes that connection with a log line (as Kafka does); an
//! ApiVersions request at an unknown version gets the v0 UNSUPPORTED_VERSION
//! answer clients expect. Other connections are unaffected.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info, info_span, warn};

use super::config::BrokerConfig;
use super::core::BrokerCore;
use super::handlers;
use super::security::{SASL_AUTHENTICATE_KEY, SASL_HANDSHAKE_KEY, Session};
use sharestream_protocol::api::{RequestHeaderInfo, api_name, decode_request_header};
use sharestream_protocol::frame::FrameDecoder;

/// The embedded broker.
pub struct Broker;

/// A running broker. Dropping the handle does not stop it; call
/// [`BrokerHandle::shutdown`].
pub struct BrokerHandle {
    local_addr: SocketAddr,
    core: Arc<BrokerCore>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    timers: Vec<tokio::task::JoinHandle<()>>,
    metrics_addr: Option<SocketAddr>,
}

impl Broker {
    /// Binds the listener, recovers state from the data directory, and
    /// starts serving.
    pub async fn start(config: BrokerConfig) -> std::io::Result<BrokerHandle> {
        // A misconfigured share-group setting names itself.
        config
            .share_groups
            .validate()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let tls = match (&config.security.tls, config.security.protocol.is_tls()) {
            (Some(tls), true) => Some(tls.acceptor()?),
            (None, true) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "an SSL or SASL_SSL listener needs a TLS certificate and key",
                ));
            }
            (_, false) => None,
        };
        let listener = TcpListener::bind(config.listen).await?;
        let local_addr = listener.local_addr()?;
        let core = Arc::new(BrokerCore::open(config, local_addr)?);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut timers = Vec::new();
        if let crate::config::FsyncPolicy::Interval(every) = core.config().fsync {
            timers.push(tokio::spawn(flush_loop(
                core.clone(),
                every,
                shutdown_rx.clone(),
            )));
        }
        timers.push(tokio::spawn(share_tick_loop(
            core.clone(),
            shutdown_rx.clone(),
        )));
        timers.push(tokio::spawn(retention_loop(
            core.clone(),
            shutdown_rx.clone(),
        )));
        if core.config().log_cleaner_backoff_ms > 0 {
            timers.push(tokio::spawn(cleaner_loop(
                core.clone(),
                shutdown_rx.clone(),
            )));
        }
        timers.push(tokio::spawn(txn_timer_loop(
            core.clone(),
            shutdown_rx.clone(),
        )));
        timers.push(tokio::spawn(super::consumer_groups::group_tick_loop(
            core.clone(),
            shutdown_rx.clone(),
        )));
        timers.push(tokio::spawn(super::dead_letter_writer::run(
            core.clone(),
            shutdown_rx.clone(),
        )));
        let mut metrics_addr = None;
        if let Some(addr) = core.config().metrics_listen {
            let l = super::metrics_http::bind(addr).await?;
            let bound = l.local_addr()?;
            metrics_addr = Some(bound);
            info!(addr = %bound, "metrics at http://{bound}/metrics");
            timers.push(tokio::spawn(super::metrics_http::serve(
                l,
                core.clone(),
                shutdown_rx.clone(),
            )));
        }
        let task = tokio::spawn(accept_loop(listener, core.clone(), tls, shutdown_rx));
        info!(%local_addr, "broker listening");
        Ok(BrokerHandle {
            local_addr,
            core,
            shutdown,
            task,
            timers,
            metrics_addr,
        })
    }
}

impl BrokerHandle {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where `GET /metrics` is served, if enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// `host:port` for `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        let (host, port) = self.core.advertised();
        format!("{host}:{port}")
    }

    /// The broker's shared state (for tests and tools in this crate).
    pub fn core(&self) -> &Arc<BrokerCore> {
        &self.core
    }

    /// Simulates a crash for tests: every task is aborted and nothing is
    /// flushed or closed cleanly (what was written stays, what was only
    /// buffered is as the OS has it). Data written with
    /// `FsyncPolicy::EveryBatch` must survive this.
    pub async fn kill(self) {
        for t in &self.timers {
            t.abort();
        }
        self.task.abort();
        let _ = self.task.await;
        for t in self.timers {
            let _ = t.await;
        }
        drop(self.core);
    }

    /// Stops accepting, closes connections, waits for their tasks and
    /// flushes storage.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
        for t in self.timers {
            let _ = t.await;
        }
        self.core.flush_all();
        info!(addr = %self.local_addr, "broker stopped");
    }
}

/// Drives FsyncPolicy::Interval: flushes logs whose interval has elapsed.
async fn flush_loop(
    core: Arc<BrokerCore>,
    every: std::time::Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(every.max(std::time::Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let core = core.clone();
                let _ = tokio::task::spawn_blocking(move || core.flush_due(std::time::Instant::now())).await;
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// Drives the share groups' timers: member session expiry and acquisition
/// lock expiry (which wakes parked ShareFetches).
async fn share_tick_loop(core: Arc<BrokerCore>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                core.shares().tick(core.now_ms());
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// Applies topic retention every `log.retention.check.interval.ms`.
async fn retention_loop(core: Arc<BrokerCore>, shutdown: watch::Receiver<bool>) {
    let every = core.config().retention_check_interval_ms;
    every_on_blocking_pool(core, every, shutdown, |c, now| {
        c.enforce_retention(now);
    })
    .await
}

/// Compacts the `cleanup.policy=compact` partitions every
/// `log.cleaner.backoff.ms`, on the blocking pool (off the request path).
async fn cleaner_loop(core: Arc<BrokerCore>, shutdown: watch::Receiver<bool>) {
    let every = core.config().log_cleaner_backoff_ms;
    every_on_blocking_pool(core, every, shutdown, |c, now| {
        c.clean_logs(now);
    })
    .await
}

/// Runs `f` at the broker's time every `every_ms` (the first run one
/// interval after start) on the blocking pool, until shutdown.
async fn every_on_blocking_pool(
    core: Arc<BrokerCore>,
    every_ms: u64,
    mut shutdown: watch::Receiver<bool>,
    f: fn(&BrokerCore, i64),
) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(every_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let core = core.clone();
                let _ = tokio::task::spawn_blocking(move || f(&core, core.now_ms())).await;
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// Drives the transaction coordinator's clock: transaction timeouts and
/// marker retries.
async fn txn_timer_loop(core: Arc<BrokerCore>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                super::handlers::blocking_pub(&core, |c| c.txn_tick()).await;
            }
            _ = shutdown.changed() => return,
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    core: Arc<BrokerCore>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    let connections = Arc::new(Semaphore::new(core.config().max_connections));
    let mut tasks = JoinSet::new();
    loop {
        let permit = tokio::select! {
            p = connections.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        // Reap finished connection tasks so the set does not grow.
        while tasks.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        core.metrics().add("connections_accepted", 1);
        // Over its address's connection_creation_rate (KIP-612): held
        // before it is served, as Kafka's acceptor holds it.
        let hold_ms = core.quotas().record_connection(peer.ip(), core.now_ms());
        if hold_ms > 0 {
            core.metrics().add("connections_throttled", 1);
            debug!(%peer, hold_ms, "connection_creation_rate exceeded: connection held");
        }
        let core = core.clone();
        let mut rx = shutdown.clone();
        let tls = tls.clone();
        tasks.spawn(
            async move {
                if hold_ms > 0 {
                    tokio::select! {
                        _ = tokio::time::sleep(std::time::Duration::from_millis(hold_ms as u64)) => {}
                        _ = rx.changed() => return,
                    }
                }
                match tls {
                    None => serve_connection(core, stream, peer, rx).await,
                    Some(acceptor) => {
                        if let Some(stream) = tls_handshake(&core, &acceptor, stream).await {
                            serve_connection(core, stream, peer, rx).await;
                        }
                    }
                }
                drop(permit);
            }
            .instrument(info_span!("connection", %peer)),
        );
    }
    // Connections watch the same shutdown signal; wait for them.
    while tasks.join_next().await.is_some() {}
}

/// Runs the TLS handshake of an accepted connection, bounded by the
/// listener's handshake timeout. A failure closes only this connection.
async fn tls_handshake(
    core: &BrokerCore,
    acceptor: &tokio_rustls::TlsAcceptor,
    stream: TcpStream,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let timeout = core
        .config()
        .security
        .tls
        .as_ref()
        .map_or(std::time::Duration::from_secs(10), |t| t.handshake_timeout);
    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(s)) => Some(s),
        Ok(Err(e)) => {
            core.metrics().add("tls_handshake_failures", 1);
            info!(error = %e, "TLS handshake failed; connection closed");
            None
        }
        Err(_) => {
            core.metrics().add("tls_handshake_failures", 1);
            info!(?timeout, "TLS handshake timed out; connection closed");
            None
        }
    }
}

/// Tells the share-group state that a connection is gone, when dropped.
struct ConnectionClosed {
    core: Arc<BrokerCore>,
    connection_id: u64,
}

impl Drop for ConnectionClosed {
    fn drop(&mut self) {
        debug!(connection = self.connection_id, "connection closed");
        self.core
            .shares()
            .connection_closed(self.connection_id, self.core.now_ms());
    }
}

/// Why a connection is being closed.
#[derive(Debug)]
pub(crate) enum Close {
    /// The request cannot be answered; the message is logged.
    Protocol(String),
}

async fn serve_connection<S>(
    core: Arc<BrokerCore>,
    mut stream: S,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut session = Session::new(core.config().security.protocol, &peer.ip().to_string());
    // However the connection ends, the share sessions of departed members
    // last used on it end with it (D18).
    let _closed = ConnectionClosed {
        core: core.clone(),
        connection_id: session.connection_id(),
    };
    debug!(connection = session.connection_id(), %peer, "connection opened");
    let mut decoder = FrameDecoder::new(core.config().max_frame_size);
    let mut out = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    warn!(error = %e, "closing connection: framing lost");
                    core.metrics().add("connections_closed_malformed", 1);
                    let _ = stream.write_all(&out).await;
                    return;
                }
            };
            // A request that may wait must not hold earlier answers back.
            if !out.is_empty() && may_block(&frame) {
                if stream.write_all(&out).await.is_err() {
                    return;
                }
                out.clear();
            }
            let permit = match core
                .request_bytes()
                .acquire_many(frame.len().max(1).min(u32::MAX as usize) as u32)
                .await
            {
                Ok(p) => p,
                Err(_) => return,
            };
            // A request may wait (long-polling fetches): shutdown must not.
            let result = tokio::select! {
                r = process_frame(&core, &mut session, frame, &mut out) => r,
                _ = shutdown.changed() => return,
            };
            drop(permit);
            if let Err(Close::Protocol(msg)) = result {
                warn!("closing connection: {msg}");
                core.metrics().add("connections_closed_malformed", 1);
                let _ = stream.write_all(&out).await;
                return;
            }
            // Throttled by a client quota: the answer goes out now, and no
            // further request is read until the throttle time is over
            // (KIP-219).
            let mute_ms = session.take_mute();
            if mute_ms > 0 {
                if stream.write_all(&out).await.is_err() {
                    return;
                }
                out.clear();
                if !wait_muted(&mut stream, &mut decoder, mute_ms, &mut shutdown).await {
                    return;
                }
            }
            if out.len() >= 256 * 1024 && stream.write_all(&out).await.is_ok() {
                out.clear();
            }
        }
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        // Room for the rest of a partly read frame (bounded, so a length
        // prefix alone cannot make us reserve much), so a large request is
        // not read through repeated buffer doublings and copies.
        let need = decoder.bytes_needed().min(1 << 20);
        decoder.buffer_mut().reserve(need);
        tokio::select! {
            r = stream.read_buf(decoder.buffer_mut()) => match r {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => {
                    debug!(error = %e, "connection read failed");
                    return;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// Bytes a muted connection may read ahead (kept for after the mute).
const MUTED_READ_AHEAD: usize = 64 * 1024;

/// Waits out a quota's mute of `ms`. The connection processes nothing
/// meanwhile but still notices its peer leaving (reading ahead at most
/// [`MUTED_READ_AHEAD`] bytes, then leaving TCP to push back), so a long
/// throttle does not hold a dead connection. False when the connection
/// must end (the peer left, or the broker shuts down).
async fn wait_muted<S>(
    stream: &mut S,
    decoder: &mut FrameDecoder,
    ms: i64,
    shutdown: &mut watch::Receiver<bool>,
) -> bool
where
    S: tokio::io::AsyncRead + Unpin,
{
    let over = tokio::time::sleep(std::time::Duration::from_millis(ms.max(0) as u64));
    tokio::pin!(over);
    loop {
        let room = decoder.buffer_mut().len() < MUTED_READ_AHEAD;
        tokio::select! {
            _ = &mut over => return true,
            _ = shutdown.changed() => return false,
            r = stream.read_buf(decoder.buffer_mut()), if room => match r {
                Ok(0) | Err(_) => return false,
                Ok(_) => {}
            },
        }
    }
}

fn may_block(frame: &Bytes) -> bool {
    frame.len() >= 2 && matches!(i16::from_be_bytes([frame[0], frame[1]]), 1 | 78)
}

async fn process_frame(
    core: &Arc<BrokerCore>,
    session: &mut Session,
    mut frame: Bytes,
    out: &mut BytesMut,
) -> Result<(), Close> {
    let header = match decode_request_header(&mut frame) {
        Ok(h) => h,
        Err(e) => {
            core.metrics().record_error(e.api_key);
            return Err(Close::Protocol(e.to_string()));
        }
    };
    let span = info_span!(
        "request",
        api = api_name(header.api_key),
        version = header.api_version,
        client_id = header.client_id.as_deref().unwrap_or(""),
        correlation_id = header.correlation_id
    );
    let started = Instant::now();
    let key = header.api_key;
    let logged = span.clone();
    let res = if key == SASL_HANDSHAKE_KEY || key == SASL_AUTHENTICATE_KEY {
        let advertised = handlers::advertised_versions(core, key);
        if !advertised.is_some_and(|v| v.contains(header.api_version)) {
            Err(Close::Protocol(format!(
                "{} v{} is not supported by this broker",
                api_name(key),
                header.api_version
            )))
        } else {
            super::security::handle_sasl(core, session, &header, frame, out)
                .instrument(span)
                .await
        }
    } else if !session.may_send(key, Instant::now()) {
        // A SASL listener answers nothing but the handshake before
        // authentication (and after the session expired).
        Err(Close::Protocol(format!(
            "{} before (re-)authentication",
            api_name(key)
        )))
    } else {
        dispatch(core, session, &header, frame, out)
            .instrument(span)
            .await
    };
    let elapsed_us = started.elapsed().as_micros() as u64;
    debug!(
        parent: &logged,
        connection = session.connection_id(),
        elapsed_us,
        ok = res.is_ok(),
        "request served"
    );
    if res.is_ok() {
        core.metrics().record_request(key, elapsed_us);
    } else {
        core.metrics().record_error(key);
    }
    res
}

async fn dispatch(
    core: &Arc<BrokerCore>,
    session: &Session,
    header: &RequestHeaderInfo,
    body: Bytes,
    out: &mut BytesMut,
) -> Result<(), Close> {
    handlers::dispatch(core, session, header, body, out).await
}
