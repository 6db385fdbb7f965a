//! The client layer's typed error, and the one place that decides whether a
//! failed request may be retried.
//!
//! Every variant carries enough context to act on: which API timed out and
//! under which correlation id, why a connection was poisoned, which API the
//! broker lacks. [`ClientError::is_retriable`] is the single decision point;
//! callers never match on variants to decide it themselves.

use std::io;
use std::sync::Arc;

use crate::protocol::{ErrorCode, ProtocolError};

/// A failure of a request sent through the client layer.
///
/// `Clone` so that one connection failure can be reported to every request
/// that was pending on it; I/O errors are shared behind an [`Arc`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Reading from or writing to the socket failed, or the connection could
    /// not be established.
    #[error("I/O error: {0}")]
    Io(Arc<io::Error>),
    /// No response arrived within the request timeout (`request.timeout.ms`).
    /// The connection it was sent on is closed (see the connection module).
    #[error("{api} request with correlation id {correlation_id} timed out")]
    Timeout {
        /// Name of the API of the request.
        api: &'static str,
        /// The request's correlation id.
        correlation_id: i32,
    },
    /// The connection lost its framing or its peer; every pending and future
    /// request on it fails with this reason.
    #[error("connection poisoned: {0}")]
    Poisoned(String),
    /// A message could not be encoded or decoded.
    #[error(transparent)]
    Protocol(ProtocolError),
    /// The broker does not support the API, or not at a version this build
    /// can speak. Detected before anything is written.
    #[error("unsupported version of API {api_name} (key {api_key}): {detail}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// A readable name of the API.
        api_name: &'static str,
        /// What exactly is missing.
        detail: String,
    },
    /// The broker answered with an error code.
    #[error("{api} failed with {code}{}", message_suffix(.message))]
    Broker {
        /// Name of the API whose response carried the code.
        api: &'static str,
        /// The error code.
        code: ErrorCode,
        /// The broker's error message, when it sent one.
        message: Option<String>,
    },
    /// The connection was closed by this client.
    #[error("connection closed")]
    Closed,
    /// The TLS setup or handshake failed (unknown CA, host name mismatch,
    /// unreadable PEM file, ...). Not retriable: the connection fails closed.
    #[error("TLS: {0}")]
    Tls(String),
    /// The broker refused the SASL authentication, or it could not be
    /// completed. Fatal, as Kafka's `SaslAuthenticationException`; the
    /// message names the mechanism and user, never the password.
    #[error("SASL authentication failed (mechanism {mechanism}, user {username:?}): {message}")]
    Authentication {
        /// `sasl.mechanism`.
        mechanism: &'static str,
        /// `sasl.username`.
        username: String,
        /// What went wrong (the broker's message when it sent one).
        message: String,
    },
    /// The client's security settings cannot be used as given.
    #[error("configuration: {0}")]
    Config(String),
}

fn message_suffix(message: &Option<String>) -> String {
    match message {
        Some(m) => format!(": {m}"),
        None => String::new(),
    }
}

impl ClientError {
    /// Whether sending the request again (after backoff, possibly on a new
    /// connection) may succeed.
    ///
    /// Network failures (I/O, timeouts, poisoned connections) are retriable,
    /// as Kafka's `NetworkException`/`TimeoutException` are. Broker error
    /// codes follow Kafka's retriable flags. Encoding or decoding failures,
    /// missing APIs and a connection closed by us are not.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Io(_) | ClientError::Timeout { .. } | ClientError::Poisoned(_) => true,
            ClientError::Broker { code, .. } => code.is_retriable(),
            ClientError::Protocol(_)
            | ClientError::UnsupportedVersion { .. }
            | ClientError::Closed
            | ClientError::Tls(_)
            | ClientError::Authentication { .. }
            | ClientError::Config(_) => false,
        }
    }

    /// Whether the request went unanswered (timeout, lost or poisoned
    /// connection): the broker may have applied it.
    pub fn is_unanswered(&self) -> bool {
        matches!(
            self,
            ClientError::Io(_) | ClientError::Timeout { .. } | ClientError::Poisoned(_)
        )
    }

    /// Whether the failure means the cached cluster metadata is stale and
    /// must be refreshed before retrying: the leader moved
    /// (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH,
    /// UNKNOWN_LEADER_EPOCH), the topic is not known there
    /// (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID),
    /// the broker went away (network failures), or the coordinator moved.
    pub fn invalidates_metadata(&self) -> bool {
        match self {
            ClientError::Io(_) | ClientError::Timeout { .. } | ClientError::Poisoned(_) => true,
            ClientError::Broker { code, .. } => code_invalidates_metadata(*code),
            _ => false,
        }
    }

    /// Whether the failure is a security failure no retry can fix: TLS
    /// (unknown CA, wrong host name), SASL authentication, or an
    /// authorization error from the broker (TOPIC_/GROUP_/CLUSTER_/
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED).
    pub fn is_security_failure(&self) -> bool {
        match self {
            ClientError::Tls(_) | ClientError::Authentication { .. } => true,
            ClientError::Broker { code, .. } => matches!(
                *code,
                ErrorCode::TOPIC_AUTHORIZATION_FAILED
                    | ErrorCode::GROUP_AUTHORIZATION_FAILED
                    | ErrorCode::CLUSTER_AUTHORIZATION_FAILED
                    | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                    | ErrorCode::SASL_AUTHENTICATION_FAILED
            ),
            _ => false,
        }
    }

    /// `Err(ClientError::Broker)` for a non-zero `code`, `Ok(())` otherwise.
    pub fn check(api: &'static str, code: i16, message: Option<String>) -> Result<(), ClientError> {
        let code = ErrorCode(code);
        if code.is_ok() {
            Ok(())
        } else {
            Err(ClientError::Broker { api, code, message })
        }
    }
}

/// The metadata-invalidating error codes (see
/// [`ClientError::invalidates_metadata`]); the one table both the producer
/// and the metadata cache consult.
pub fn code_invalidates_metadata(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NOT_LEADER_OR_FOLLOWER
            | ErrorCode::LEADER_NOT_AVAILABLE
            | ErrorCode::FENCED_LEADER_EPOCH
            | ErrorCode::UNKNOWN_LEADER_EPOCH
            | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
            | ErrorCode::UNKNOWN_TOPIC_ID
            | ErrorCode::INCONSISTENT_TOPIC_ID
            | ErrorCode::NOT_COORDINATOR
            | ErrorCode::COORDINATOR_NOT_AVAILABLE
            | ErrorCode::NETWORK_EXCEPTION
            | ErrorCode::KAFKA_STORAGE_ERROR
    )
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(Arc::new(e))
    }
}

impl From<ProtocolError> for ClientError {
    /// A peer lacking an API becomes [`ClientError::UnsupportedVersion`];
    /// everything else stays a [`ClientError::Protocol`].
    fn from(e: ProtocolError) -> Self {
        match e {
            ProtocolError::UnsupportedByPeer {
                api_key,
                api_name,
                detail,
            } => ClientError::UnsupportedVersion {
                api_key,
                api_name,
                detail: detail.unwrap_or_else(|| "the broker does not offer this API".into()),
            },
            other => ClientError::Protocol(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retriable_is_decided_in_one_place() {
        assert!(ClientError::from(io::Error::from(io::ErrorKind::ConnectionReset)).is_retriable());
        assert!(
            ClientError::Timeout {
                api: "Metadata",
                correlation_id: 3
            }
            .is_retriable()
        );
        assert!(ClientError::Poisoned("eof".into()).is_retriable());
        assert!(!ClientError::Closed.is_retriable());
        assert!(
            !ClientError::UnsupportedVersion {
                api_key: 95,
                api_name: "TxnShareAcknowledge",
                detail: String::new()
            }
            .is_retriable()
        );
        assert!(
            ClientError::check("Produce", 6, None)
                .unwrap_err()
                .is_retriable()
        );
        assert!(
            !ClientError::check("Produce", 90, None)
                .unwrap_err()
                .is_retriable()
        );
        assert!(ClientError::check("Produce", 0, None).is_ok());
    }

    #[test]
    fn unsupported_by_peer_maps_to_unsupported_version() {
        let e = ClientError::from(ProtocolError::UnsupportedByPeer {
            api_key: 95,
            api_name: "TxnShareAcknowledge",
            detail: None,
        });
        assert!(matches!(
            e,
            ClientError::UnsupportedVersion {
                api_key: 95,
                api_name: "TxnShareAcknowledge",
                ..
            }
        ));
        assert!(e.to_string().contains("TxnShareAcknowledge"));
    }

    #[test]
    fn broker_error_display_names_the_code() {
        let e = ClientError::check("ShareFetch", 122, Some("gone".into())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ShareFetch failed with SHARE_SESSION_NOT_FOUND (122): gone"
        );
    }
}
