//! The protocol layer's typed error.
//!
//! `kafka-protocol` reports failures as `anyhow::Error`; we wrap them here so
//! that callers always learn which API and version failed, and never see
//! `anyhow` in our public API.

use super::frame::FrameError;

/// A failure to encode or decode something on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The byte stream lost its framing.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A buffer ended before a complete value could be read.
    #[error("truncated input while reading {what}")]
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// An API key this build does not know.
    #[error("unknown API key {api_key}")]
    UnknownApiKey {
        /// The key found on the wire.
        api_key: i16,
    },
    /// A version outside the range this build can encode or decode.
    #[error("unsupported version {version} of API {api_name} (key {api_key})")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// A readable name of the API.
        api_name: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// The peer does not offer an API we need (found by version negotiation).
    #[error("the broker does not support API {api_name} (key {api_key}){}", detail_suffix(.detail))]
    UnsupportedByPeer {
        /// The API key.
        api_key: i16,
        /// A readable name of the API.
        api_name: &'static str,
        /// Why, when more can be said (e.g. the feature that gates it).
        detail: Option<String>,
    },
    /// The bytes do not form a valid message of that API and version.
    #[error("cannot decode {api_name} v{version} (key {api_key}): {message}")]
    Decode {
        /// The API key.
        api_key: i16,
        /// A readable name of the API.
        api_name: &'static str,
        /// The version decoded.
        version: i16,
        /// What went wrong.
        message: String,
    },
    /// A message could not be encoded at that version (e.g. a field the
    /// version lacks holds a non-default value).
    #[error("cannot encode {api_name} v{version} (key {api_key}): {message}")]
    Encode {
        /// The API key.
        api_key: i16,
        /// A readable name of the API.
        api_name: &'static str,
        /// The version encoded.
        version: i16,
        /// What went wrong.
        message: String,
    },
    /// Malformed bytes outside any one API (headers, record batches, ...).
    #[error("malformed {what}: {message}")]
    Malformed {
        /// What was being read.
        what: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

fn detail_suffix(detail: &Option<String>) -> String {
    match detail {
        Some(d) => format!(": {d}"),
        None => String::new(),
    }
}

impl ProtocolError {
    /// Shorthand for [`ProtocolError::Malformed`].
    pub fn malformed(what: &'static str, message: impl Into<String>) -> Self {
        ProtocolError::Malformed {
            what,
            message: message.into(),
        }
    }
}
