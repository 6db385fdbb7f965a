//! A lazily opened, self-replacing connection to one broker.
//!
//! [`BrokerConnection`] holds at most one [`Connection`] to a broker. The
//! first use opens it; a use that finds it poisoned drops it and opens a new
//! one. Attempts are spaced by the reconnect backoff (`reconnect.backoff.ms`,
//! `reconnect.backoff.max.ms`): a failed attempt and a lost connection both
//! count as failures, and a successful handshake starts the backoff over, as
//! in Kafka's clients. Callers that need a connection while an attempt is
//! under way wait for that attempt instead of starting their own.
//!
//! A call cancelled while it waits for the backoff or for the attempt leaves
//! the schedule as it was: the next call starts the attempt afresh.
//!
//! How a connection is opened is a [`Connector`]: TCP for real brokers, any
//! transport (e.g. `tokio::io::duplex`) in tests. [`BrokerPool`] keeps one
//! [`BrokerConnection`] per broker node id, for the metadata layer to route
//! requests with.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::time::Instant;

use super::backoff::{Backoff, ReconnectSchedule};
use super::config::ConnectionConfig;
use super::connection::Connection;
use super::error::ClientError;
use crate::protocol::api::ApiRequest;

/// The future of one connection attempt (connect and negotiate).
pub type ConnectFuture = Pin<Box<dyn Future<Output = Result<Connection, ClientError>> + Send>>;

/// Opens a negotiated connection to the broker, given the connection settings.
pub type Connector = Arc<dyn Fn(&ConnectionConfig) -> ConnectFuture + Send + Sync>;

struct State {
    current: Option<Arc<Connection>>,
    schedule: ReconnectSchedule,
}

/// The connection to one broker, opened on first use and replaced when
/// poisoned.
pub struct BrokerConnection {
    node_id: i32,
    address: String,
    config: ConnectionConfig,
    connector: Connector,
    state: tokio::sync::Mutex<State>,
}

impl std::fmt::Debug for BrokerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConnection")
            .field("node_id", &self.node_id)
            .field("address", &self.address)
            .finish()
    }
}

impl BrokerConnection {
    /// A broker reached over TCP at `address` (`host:port`).
    pub fn tcp(node_id: i32, address: impl Into<String>, config: ConnectionConfig) -> Self {
        let address = address.into();
        let target = address.clone();
        let connector: Connector = Arc::new(move |config: &ConnectionConfig| {
            let target = target.clone();
            let config = config.clone();
            Box::pin(async move { Connection::connect_tcp(target.as_str(), &config).await })
        });
        Self::with_connector(node_id, address, config, connector)
    }

    /// A broker reached through `connector`; `address` is for display.
    pub fn with_connector(
        node_id: i32,
        address: impl Into<String>,
        config: ConnectionConfig,
        connector: Connector,
    ) -> Self {
        let backoff = Backoff::new(config.reconnect_backoff);
        Self {
            node_id,
            address: address.into(),
            config,
            connector,
            state: tokio::sync::Mutex::new(State {
                current: None,
                schedule: ReconnectSchedule::new(backoff),
            }),
        }
    }

    /// Replaces the reconnect backoff (e.g. a seeded one in tests).
    pub fn with_backoff(self, backoff: Backoff) -> Self {
        Self {
            state: tokio::sync::Mutex::new(State {
                current: None,
                schedule: ReconnectSchedule::new(backoff),
            }),
            ..self
        }
    }

    /// The broker's node id.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The broker's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The connection settings (`client.id`, timeouts, ...).
    pub fn config(&self) -> &ConnectionConfig {
        &self.config
    }

    /// A usable connection: the current one, or a new one if there is none or
    /// it is poisoned. A new attempt waits for the reconnect backoff first.
    /// One attempt per call; its failure is returned.
    pub async fn connection(&self) -> Result<Arc<Connection>, ClientError> {
        let mut st = self.state.lock().await;
        if let Some(conn) = &st.current {
            if !conn.is_poisoned() {
                return Ok(conn.clone());
            }
            tracing::debug!(node_id = self.node_id, address = %self.address,
                reason = ?conn.poison_error(), "replacing poisoned connection");
            st.current = None;
            st.schedule.on_failure(Instant::now());
        }
        if let Some(at) = st.schedule.next_attempt() {
            tokio::time::sleep_until(at).await;
        }
        match (self.connector)(&self.config).await {
            Ok(conn) => {
                st.schedule.on_success();
                let conn = Arc::new(conn);
                st.current = Some(conn.clone());
                Ok(conn)
            }
            Err(e) => {
                let next = st.schedule.on_failure(Instant::now());
                tracing::debug!(node_id = self.node_id, address = %self.address,
                    error = %e, retry_in = ?next.saturating_duration_since(Instant::now()),
                    "connection attempt failed");
                Err(e)
            }
        }
    }

    /// The current connection if it is open and usable now, without
    /// waiting: `None` while there is none, it is poisoned, or an attempt to
    /// open one is under way. [`BrokerConnection::connection`] is the way
    /// that opens or replaces it.
    pub fn current(&self) -> Option<Arc<Connection>> {
        let st = self.state.try_lock().ok()?;
        st.current.as_ref().filter(|c| !c.is_poisoned()).cloned()
    }

    /// Sends `req` on the current connection (opening one if needed).
    pub async fn send<R: ApiRequest>(&self, req: &R) -> Result<R::Response, ClientError> {
        self.connection().await?.send(req).await
    }

    /// Consecutive failed attempts or lost connections since the last
    /// successful connect.
    pub async fn reconnect_failures(&self) -> u32 {
        self.state.lock().await.schedule.failures()
    }
}

/// Builds the [`Connector`] of a broker from its node id and address.
pub type ConnectorFactory = Arc<dyn Fn(i32, &str) -> Connector + Send + Sync>;

/// One [`BrokerConnection`] per broker, keyed by node id.
///
/// Bootstrap servers, whose node ids are not known yet, can be entered under
/// negative ids as Kafka's clients do.
pub struct BrokerPool {
    config: ConnectionConfig,
    factory: Option<ConnectorFactory>,
    brokers: parking_lot::Mutex<HashMap<i32, Arc<BrokerConnection>>>,
}

impl std::fmt::Debug for BrokerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<i32> = self.brokers.lock().keys().copied().collect();
        ids.sort_unstable();
        f.debug_struct("BrokerPool").field("brokers", &ids).finish()
    }
}

impl BrokerPool {
    /// A pool reaching brokers over TCP.
    pub fn tcp(config: ConnectionConfig) -> Self {
        Self {
            config,
            factory: None,
            brokers: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// A pool whose connections are opened by connectors from `factory`.
    pub fn with_connector_factory(config: ConnectionConfig, factory: ConnectorFactory) -> Self {
        Self {
            config,
            factory: Some(factory),
            brokers: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// The connection to broker `node_id` at `address`. Created on first
    /// request (without connecting yet); replaced if the broker's address
    /// changed.
    pub fn broker(&self, node_id: i32, address: &str) -> Arc<BrokerConnection> {
        let mut brokers = self.brokers.lock();
        if let Some(b) = brokers.get(&node_id)
            && b.address() == address
        {
            return b.clone();
        }
        let config = self.config.clone();
        let b = Arc::new(match &self.factory {
            None => BrokerConnection::tcp(node_id, address, config),
            Some(f) => {
                BrokerConnection::with_connector(node_id, address, config, f(node_id, address))
            }
        });
        brokers.insert(node_id, b.clone());
        b
    }

    /// The connection to broker `node_id`, if known.
    pub fn get(&self, node_id: i32) -> Option<Arc<BrokerConnection>> {
        self.brokers.lock().get(&node_id).cloned()
    }

    /// Forgets broker `node_id` (e.g. gone from the metadata).
    pub fn remove(&self, node_id: i32) -> Option<Arc<BrokerConnection>> {
        self.brokers.lock().remove(&node_id)
    }

    /// Keeps only the brokers for which `keep` is true.
    pub fn retain(&self, mut keep: impl FnMut(i32) -> bool) {
        self.brokers.lock().retain(|id, _| keep(*id));
    }

    /// Node ids of the brokers in the pool, sorted.
    pub fn node_ids(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self.brokers.lock().keys().copied().collect();
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::backoff::BackoffConfig;
    use crate::client::test_peer::{ScriptedPeer, all_apis_except, answered_topic, metadata_for};
    use kafka_protocol::messages::MetadataRequest;
    use parking_lot::Mutex;
    use std::time::Duration;

    /// What the scripted broker does on the n-th connection attempt.
    #[derive(Clone, Copy)]
    enum Attempt {
        /// Handshake, then answer the first request with a wrong correlation id.
        PoisonFirstRequest,
        /// Refuse the connection.
        Refuse,
        /// Handshake, then answer every request normally.
        Serve,
    }

    struct Script {
        plan: Vec<Attempt>,
        attempts: Mutex<Vec<Instant>>,
        client_ids: Mutex<Vec<Option<String>>>,
    }

    fn scripted(plan: Vec<Attempt>) -> (Arc<Script>, Connector) {
        let script = Arc::new(Script {
            plan,
            attempts: Mutex::new(Vec::new()),
            client_ids: Mutex::new(Vec::new()),
        });
        let s = script.clone();
        let connector: Connector = Arc::new(move |config: &ConnectionConfig| {
            let s = s.clone();
            let config = config.clone();
            Box::pin(async move {
                let n = {
                    let mut attempts = s.attempts.lock();
                    attempts.push(Instant::now());
                    attempts.len() - 1
                };
                let what = s.plan[n];
                if let Attempt::Refuse = what {
                    return Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into());
                }
                let (client, server) = tokio::io::duplex(64 * 1024);
                let s2 = s.clone();
                tokio::spawn(async move {
                    let mut peer = ScriptedPeer::new(server);
                    let hello = peer.handshake(&all_apis_except(&[])).await;
                    s2.client_ids.lock().push(hello.header.client_id.clone());
                    while let Some(r) = peer.recv_or_eof().await {
                        s2.client_ids.lock().push(r.header.client_id.clone());
                        let topic = r.metadata_topic();
                        let corr = match what {
                            Attempt::PoisonFirstRequest => r.header.correlation_id + 1,
                            _ => r.header.correlation_id,
                        };
                        peer.respond::<MetadataRequest>(
                            &crate::client::test_peer::metadata_answer(&topic),
                            r.header.api_version,
                            corr,
                        )
                        .await;
                    }
                });
                Connection::new(client, &config).await
            })
        });
        (script, connector)
    }

    fn config() -> ConnectionConfig {
        ConnectionConfig::default().with_client_id("pool-client")
    }

    #[tokio::test(start_paused = true)]
    async fn connects_lazily_and_reuses_the_connection() {
        let (script, connector) = scripted(vec![Attempt::Serve]);
        let bc = BrokerConnection::with_connector(1, "broker-1:9092", config(), connector);
        assert!(
            script.attempts.lock().is_empty(),
            "no connect before first use"
        );
        for t in ["a", "b", "c"] {
            let resp = bc.send(&metadata_for(t)).await.unwrap();
            assert_eq!(answered_topic(&resp), t);
        }
        assert_eq!(script.attempts.lock().len(), 1);
        let ids = script.client_ids.lock().clone();
        assert_eq!(ids.len(), 4, "handshake and three requests");
        assert!(ids.iter().all(|id| id.as_deref() == Some("pool-client")));
    }

    #[tokio::test(start_paused = true)]
    async fn poisoned_connection_is_replaced_with_reconnects_spaced_by_backoff() {
        let exact = BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::reconnect()
        };
        let (script, connector) = scripted(vec![
            Attempt::PoisonFirstRequest,
            Attempt::Refuse,
            Attempt::Serve,
        ]);
        let bc = BrokerConnection::with_connector(
            1,
            "broker-1:9092",
            config().with_reconnect_backoff(exact),
            connector,
        );
        let t0 = Instant::now();
        let first = bc.send(&metadata_for("a")).await.unwrap_err();
        assert!(matches!(first, ClientError::Poisoned(_)), "{first:?}");
        assert!(first.is_retriable());
        // Lost connection: wait 50 ms, then the attempt is refused.
        let second = bc.send(&metadata_for("b")).await.unwrap_err();
        assert!(matches!(second, ClientError::Io(_)), "{second:?}");
        assert_eq!(bc.reconnect_failures().await, 2);
        // Refused: wait 100 ms more, then a healthy connection.
        let third = bc.send(&metadata_for("c")).await.unwrap();
        assert_eq!(answered_topic(&third), "c");
        assert_eq!(bc.reconnect_failures().await, 0);
        let offsets: Vec<Duration> = script.attempts.lock().iter().map(|t| *t - t0).collect();
        assert_eq!(
            offsets,
            [
                Duration::ZERO,
                Duration::from_millis(50),
                Duration::from_millis(150)
            ]
        );
        // The new connection carries client.id too.
        assert!(
            script
                .client_ids
                .lock()
                .iter()
                .all(|id| id.as_deref() == Some("pool-client"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn pool_keeps_one_connection_per_broker() {
        let made = Arc::new(Mutex::new(Vec::<(i32, String)>::new()));
        let m = made.clone();
        let factory: ConnectorFactory = Arc::new(move |id: i32, addr: &str| {
            m.lock().push((id, addr.to_string()));
            scripted(vec![Attempt::Serve; 4]).1
        });
        let pool = BrokerPool::with_connector_factory(config(), factory);
        let a = pool.broker(1, "h1:9092");
        assert!(Arc::ptr_eq(&a, &pool.broker(1, "h1:9092")));
        let b = pool.broker(2, "h2:9092");
        assert_eq!(pool.node_ids(), [1, 2]);
        let resp = b.send(&metadata_for("t")).await.unwrap();
        assert_eq!(answered_topic(&resp), "t");
        // A broker that moved gets a new connection.
        let moved = pool.broker(1, "h1-new:9092");
        assert!(!Arc::ptr_eq(&a, &moved));
        assert_eq!(moved.address(), "h1-new:9092");
        pool.retain(|id| id != 2);
        assert_eq!(pool.node_ids(), [1]);
        assert!(pool.get(2).is_none());
        assert_eq!(
            made.lock().clone(),
            [
                (1, "h1:9092".to_string()),
                (2, "h2:9092".to_string()),
                (1, "h1-new:9092".to_string())
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn seeded_jitter_gives_reproducible_reconnect_times() {
        let cfg = BackoffConfig::reconnect();
        let seed = 99;
        let mut expected = Backoff::with_seed(cfg, seed);
        let d1 = expected.next_delay();
        let d2 = expected.next_delay();
        let (script, connector) = scripted(vec![Attempt::Refuse, Attempt::Refuse, Attempt::Serve]);
        let bc = BrokerConnection::with_connector(2, "broker-2:9092", config(), connector)
            .with_backoff(Backoff::with_seed(cfg, seed));
        let t0 = Instant::now();
        assert!(bc.connection().await.is_err());
        assert!(bc.connection().await.is_err());
        let conn = bc.connection().await.unwrap();
        assert!(!conn.is_poisoned());
        let at = script.attempts.lock().clone();
        // Tokio timers tick in whole milliseconds.
        let close =
            |got: Duration, want: Duration| got >= want && got <= want + Duration::from_millis(1);
        assert!(close(at[1] - t0, d1), "{:?} vs {d1:?}", at[1] - t0);
        assert!(close(at[2] - at[1], d2), "{:?} vs {d2:?}", at[2] - at[1]);
    }
}
