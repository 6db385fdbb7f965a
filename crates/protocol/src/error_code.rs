//! Kafka error codes: one table with each code's name and whether a client
//! may retry it.
//!
//! The table itself is `kafka-protocol`'s [`ResponseError`]; [`ErrorCode`]
//! wraps it so that names come out in Kafka's own spelling
//! (`NOT_LEADER_OR_FOLLOWER`) and unknown codes are carried, not lost.

use kafka_protocol::error::ResponseError;
use std::fmt;

/// A Kafka error code as carried in responses (`0` is success).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ErrorCode(pub i16);

macro_rules! codes {
    ($($name:ident = $v:literal),* $(,)?) => {
        impl ErrorCode {
            $(
                #[doc = concat!("Kafka error code ", stringify!($v), ".")]
                pub const $name: ErrorCode = ErrorCode($v);
            )*
            /// Every code named here, with its name.
            pub const NAMED: &'static [(ErrorCode, &'static str)] =
                &[$((ErrorCode($v), stringify!($name))),*];
        }
    };
}

codes! {
    UNKNOWN_SERVER_ERROR = -1,
    NONE = 0,
    OFFSET_OUT_OF_RANGE = 1,
    CORRUPT_MESSAGE = 2,
    UNKNOWN_TOPIC_OR_PARTITION = 3,
    INVALID_FETCH_SIZE = 4,
    LEADER_NOT_AVAILABLE = 5,
    NOT_LEADER_OR_FOLLOWER = 6,
    REQUEST_TIMED_OUT = 7,
    MESSAGE_TOO_LARGE = 10,
    OFFSET_METADATA_TOO_LARGE = 12,
    NETWORK_EXCEPTION = 13,
    COORDINATOR_LOAD_IN_PROGRESS = 14,
    COORDINATOR_NOT_AVAILABLE = 15,
    NOT_COORDINATOR = 16,
    INVALID_TOPIC_EXCEPTION = 17,
    RECORD_LIST_TOO_LARGE = 18,
    NOT_ENOUGH_REPLICAS = 19,
    INVALID_REQUIRED_ACKS = 21,
    ILLEGAL_GENERATION = 22,
    INCONSISTENT_GROUP_PROTOCOL = 23,
    INVALID_GROUP_ID = 24,
    UNKNOWN_MEMBER_ID = 25,
    INVALID_SESSION_TIMEOUT = 26,
    REBALANCE_IN_PROGRESS = 27,
    INVALID_COMMIT_OFFSET_SIZE = 28,
    TOPIC_AUTHORIZATION_FAILED = 29,
    GROUP_AUTHORIZATION_FAILED = 30,
    CLUSTER_AUTHORIZATION_FAILED = 31,
    INVALID_TIMESTAMP = 32,
    UNSUPPORTED_SASL_MECHANISM = 33,
    ILLEGAL_SASL_STATE = 34,
    UNSUPPORTED_VERSION = 35,
    TOPIC_ALREADY_EXISTS = 36,
    INVALID_PARTITIONS = 37,
    INVALID_REPLICATION_FACTOR = 38,
    INVALID_REPLICA_ASSIGNMENT = 39,
    INVALID_CONFIG = 40,
    NOT_CONTROLLER = 41,
    INVALID_REQUEST = 42,
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43,
    POLICY_VIOLATION = 44,
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45,
    DUPLICATE_SEQUENCE_NUMBER = 46,
    INVALID_PRODUCER_EPOCH = 47,
    INVALID_TXN_STATE = 48,
    INVALID_PRODUCER_ID_MAPPING = 49,
    INVALID_TRANSACTION_TIMEOUT = 50,
    CONCURRENT_TRANSACTIONS = 51,
    TRANSACTION_COORDINATOR_FENCED = 52,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53,
    SECURITY_DISABLED = 54,
    OPERATION_NOT_ATTEMPTED = 55,
    KAFKA_STORAGE_ERROR = 56,
    SASL_AUTHENTICATION_FAILED = 58,
    UNKNOWN_PRODUCER_ID = 59,
    NON_EMPTY_GROUP = 68,
    GROUP_ID_NOT_FOUND = 69,
    FETCH_SESSION_ID_NOT_FOUND = 70,
    INVALID_FETCH_SESSION_EPOCH = 71,
    UNKNOWN_LEADER_EPOCH = 75,
    UNSUPPORTED_COMPRESSION_TYPE = 76,
    FENCED_LEADER_EPOCH = 74,
    STALE_BROKER_EPOCH = 77,
    OFFSET_NOT_AVAILABLE = 78,
    MEMBER_ID_REQUIRED = 79,
    GROUP_MAX_SIZE_REACHED = 81,
    FENCED_INSTANCE_ID = 82,
    ELECTION_NOT_NEEDED = 84,
    NO_REASSIGNMENT_IN_PROGRESS = 85,
    GROUP_SUBSCRIBED_TO_TOPIC = 86,
    UNSTABLE_OFFSET_COMMIT = 88,
    THROTTLING_QUOTA_EXCEEDED = 89,
    PRODUCER_FENCED = 90,
    RESOURCE_NOT_FOUND = 91,
    DUPLICATE_RESOURCE = 92,
    UNACCEPTABLE_CREDENTIAL = 93,
    INVALID_UPDATE_VERSION = 95,
    FEATURE_UPDATE_FAILED = 96,
    UNKNOWN_TOPIC_ID = 100,
    INCONSISTENT_TOPIC_ID = 103,
    TRANSACTIONAL_ID_NOT_FOUND = 105,
    FETCH_SESSION_TOPIC_ID_ERROR = 106,
    INVALID_RECORD_STATE = 121,
    SHARE_SESSION_NOT_FOUND = 122,
    INVALID_SHARE_SESSION_EPOCH = 123,
    FENCED_MEMBER_EPOCH = 110,
    UNRELEASED_INSTANCE_ID = 111,
    UNSUPPORTED_ASSIGNOR = 112,
    STALE_MEMBER_EPOCH = 113,
    MISMATCHED_ENDPOINT_TYPE = 114,
    UNSUPPORTED_ENDPOINT_TYPE = 115,
    UNKNOWN_CONTROLLER_ID = 116,
    UNKNOWN_SUBSCRIPTION_ID = 117,
    TELEMETRY_TOO_LARGE = 118,
    TRANSACTION_ABORTABLE = 120,
    INVALID_REGULAR_EXPRESSION = 128,
    REBOOTSTRAP_REQUIRED = 129,
    STREAMS_INVALID_TOPOLOGY = 130,
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131,
    STREAMS_TOPOLOGY_FENCED = 132,
    SHARE_SESSION_LIMIT_REACHED = 133,
}

impl ErrorCode {
    /// `true` for code 0.
    pub fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// `true` for any non-zero code.
    pub fn is_err(self) -> bool {
        self.0 != 0
    }

    /// The kafka-protocol table entry, `None` for success.
    pub fn as_response_error(self) -> Option<ResponseError> {
        ResponseError::try_from_code(self.0)
    }

    /// Whether Kafka marks this error retriable (`RetriableException`).
    /// Unknown codes are not retriable, as in Kafka's clients.
    pub fn is_retriable(self) -> bool {
        self.as_response_error().is_some_and(|e| e.is_retriable())
    }

    /// Kafka's name for the code, e.g. `NOT_LEADER_OR_FOLLOWER`; `UNKNOWN(n)`
    /// for a code this build does not know.
    pub fn name(self) -> String {
        match self.as_response_error() {
            None => "NONE".to_string(),
            Some(ResponseError::Unknown(code)) => format!("UNKNOWN({code})"),
            Some(e) => camel_to_upper_snake(&format!("{e:?}")),
        }
    }

    /// A human description of the error.
    pub fn description(self) -> String {
        match self.as_response_error() {
            None => "No error.".to_string(),
            Some(ResponseError::Unknown(code)) => format!("Unknown error code {code}."),
            Some(e) => e.to_string(),
        }
    }

    /// `Ok(())` for success, else `Err(self)`.
    pub fn into_result(self) -> Result<(), ErrorCode> {
        if self.is_ok() { Ok(()) } else { Err(self) }
    }
}

fn camel_to_upper_snake(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for (i, c) in s.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

impl std::error::Error for ErrorCode {}

impl From<i16> for ErrorCode {
    fn from(v: i16) -> Self {
        ErrorCode(v)
    }
}

impl From<ErrorCode> for i16 {
    fn from(v: ErrorCode) -> Self {
        v.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_kafka_spelling() {
        assert_eq!(
            ErrorCode::NOT_LEADER_OR_FOLLOWER.name(),
            "NOT_LEADER_OR_FOLLOWER"
        );
        assert_eq!(
            ErrorCode::INVALID_TOPIC_EXCEPTION.name(),
            "INVALID_TOPIC_EXCEPTION"
        );
        assert_eq!(
            ErrorCode::INVALID_RECORD_STATE.name(),
            "INVALID_RECORD_STATE"
        );
        assert_eq!(
            ErrorCode::UNKNOWN_SERVER_ERROR.name(),
            "UNKNOWN_SERVER_ERROR"
        );
        assert_eq!(ErrorCode::NONE.name(), "NONE");
        assert_eq!(ErrorCode(9999).name(), "UNKNOWN(9999)");
    }

    #[test]
    fn constants_agree_with_the_table() {
        // Every named constant must carry the name the table gives its code.
        let all = [
            (ErrorCode::PRODUCER_FENCED, "PRODUCER_FENCED"),
            (ErrorCode::STALE_MEMBER_EPOCH, "STALE_MEMBER_EPOCH"),
            (ErrorCode::TRANSACTION_ABORTABLE, "TRANSACTION_ABORTABLE"),
            (
                ErrorCode::TRANSACTIONAL_ID_NOT_FOUND,
                "TRANSACTIONAL_ID_NOT_FOUND",
            ),
            (ErrorCode::UNKNOWN_TOPIC_ID, "UNKNOWN_TOPIC_ID"),
            (
                ErrorCode::INVALID_PRODUCER_ID_MAPPING,
                "INVALID_PRODUCER_ID_MAPPING",
            ),
            (
                ErrorCode::SHARE_SESSION_NOT_FOUND,
                "SHARE_SESSION_NOT_FOUND",
            ),
            (ErrorCode::FENCED_MEMBER_EPOCH, "FENCED_MEMBER_EPOCH"),
            (
                ErrorCode::UNKNOWN_SUBSCRIPTION_ID,
                "UNKNOWN_SUBSCRIPTION_ID",
            ),
            (ErrorCode::TELEMETRY_TOO_LARGE, "TELEMETRY_TOO_LARGE"),
            (
                ErrorCode::SHARE_SESSION_LIMIT_REACHED,
                "SHARE_SESSION_LIMIT_REACHED",
            ),
            (ErrorCode::FENCED_LEADER_EPOCH, "FENCED_LEADER_EPOCH"),
            (ErrorCode::REBOOTSTRAP_REQUIRED, "REBOOTSTRAP_REQUIRED"),
            (ErrorCode::INVALID_UPDATE_VERSION, "INVALID_UPDATE_VERSION"),
        ];
        for (code, name) in all.iter().chain(ErrorCode::NAMED) {
            assert_eq!(code.name(), *name, "code {}", code.0);
        }
    }

    #[test]
    fn retriable_flags() {
        assert!(ErrorCode::NOT_LEADER_OR_FOLLOWER.is_retriable());
        assert!(ErrorCode::COORDINATOR_NOT_AVAILABLE.is_retriable());
        assert!(ErrorCode::NOT_COORDINATOR.is_retriable());
        assert!(!ErrorCode::PRODUCER_FENCED.is_retriable());
        assert!(!ErrorCode::INVALID_RECORD_STATE.is_retriable());
        assert!(!ErrorCode::REBOOTSTRAP_REQUIRED.is_retriable());
        assert!(!ErrorCode(9999).is_retriable());
    }
}
