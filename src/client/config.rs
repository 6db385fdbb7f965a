//! Connection settings, named and defaulted after Kafka's client configs.

use std::time::Duration;

use super::backoff::BackoffConfig;
use crate::protocol::frame::DEFAULT_MAX_FRAME_SIZE;

/// Settings of one broker connection.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionConfig {
    /// `client.id`: sent in the header of every request (default
    /// `"sharestream"`).
    pub client_id: String,
    /// `request.timeout.ms`: how long a request waits for its response
    /// (default 30 s). On expiry the connection is closed, as Kafka's
    /// clients do.
    pub request_timeout: Duration,
    /// `socket.connection.setup.timeout.ms`: how long a TCP connect may take
    /// (default 10 s).
    pub connection_setup_timeout: Duration,
    /// `max.in.flight.requests.per.connection`: requests sent and not yet
    /// answered; further sends wait for a slot (default 5).
    pub max_in_flight_requests: usize,
    /// The largest response frame accepted; a larger length prefix poisons
    /// the connection (default 100 MiB).
    pub max_frame_size: usize,
    /// Spacing of reconnect attempts to one broker
    /// (`reconnect.backoff.ms` / `reconnect.backoff.max.ms`).
    pub reconnect_backoff: BackoffConfig,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            client_id: "sharestream".to_string(),
            request_timeout: Duration::from_secs(30),
            connection_setup_timeout: Duration::from_secs(10),
            max_in_flight_requests: 5,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            reconnect_backoff: BackoffConfig::reconnect(),
        }
    }
}

impl ConnectionConfig {
    /// Sets `client.id`.
    pub fn with_client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = client_id.into();
        self
    }

    /// Sets `request.timeout.ms`.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets `max.in.flight.requests.per.connection` (at least 1).
    pub fn with_max_in_flight_requests(mut self, n: usize) -> Self {
        self.max_in_flight_requests = n.max(1);
        self
    }

    /// Sets the largest accepted response frame.
    pub fn with_max_frame_size(mut self, bytes: usize) -> Self {
        self.max_frame_size = bytes;
        self
    }

    /// Sets the reconnect backoff.
    pub fn with_reconnect_backoff(mut self, backoff: BackoffConfig) -> Self {
        self.reconnect_backoff = backoff;
        self
    }
}
