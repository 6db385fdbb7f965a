//! [`ConfigError`]: a refused setting, the one shape the client, the share
//! consumer and the broker's group configs report it in.

use crate::ErrorCode;

/// A setting that is unknown, or whose value does not parse or is out of
/// range. The message always names the setting.
///
/// `code` is the Kafka error code a broker answers with when the setting
/// came in a request (IncrementalAlterConfigs on a group): INVALID_CONFIG,
/// or INVALID_REQUEST for a request that names no valid resource. Client
/// side it is INVALID_CONFIG and carries no more than the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// The setting's name as given (empty when no single setting is at
    /// fault).
    pub setting: String,
    /// The full message, e.g. `linger.ms: expected a non-negative integer, got "x"`.
    pub message: String,
    /// Kafka's error code for the refusal.
    pub code: ErrorCode,
}

impl ConfigError {
    /// A refusal of `setting` (INVALID_CONFIG) with `message`, which names
    /// the setting.
    pub fn new(setting: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            setting: setting.into(),
            message: message.into(),
            code: ErrorCode::INVALID_CONFIG,
        }
    }

    /// `setting: expected <expected>, got "<got>"`.
    pub fn invalid(setting: &str, expected: &str, got: &str) -> Self {
        Self::new(
            setting,
            format!("{setting}: expected {expected}, got {got:?}"),
        )
    }

    /// An unknown setting.
    pub fn unknown(setting: &str) -> Self {
        Self::new(setting, format!("unknown setting '{setting}'"))
    }

    /// The same refusal with another Kafka error code.
    pub fn with_code(mut self, code: ErrorCode) -> Self {
        self.code = code;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_setting() {
        let e = ConfigError::invalid("linger.ms", "a non-negative integer", "x");
        assert_eq!(
            e.to_string(),
            "linger.ms: expected a non-negative integer, got \"x\""
        );
        assert_eq!(e.setting, "linger.ms");
        assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
        let e = ConfigError::unknown("lingr.ms").with_code(ErrorCode::INVALID_REQUEST);
        assert_eq!(e.to_string(), "unknown setting 'lingr.ms'");
        assert_eq!(e.code, ErrorCode::INVALID_REQUEST);
    }
}
