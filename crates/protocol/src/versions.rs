//! Version negotiation from an ApiVersions response.
//!
//! For every API both sides know, the version to use is the highest one in
//! the intersection of the peer's range and ours. An API the peer does not
//! list (or whose range does not meet ours) gives
//! [`ProtocolError::UnsupportedByPeer`] before any byte is sent.

use std::collections::HashMap;

use kafka_protocol::messages::ApiVersionsResponse;

use super::api::{Versions, api_name, codec_versions};
use super::error::ProtocolError;

/// The versions agreed with one broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NegotiatedVersions {
    peer: HashMap<i16, Versions>,
    finalized_features: HashMap<String, i16>,
    finalized_features_epoch: i64,
}

impl NegotiatedVersions {
    /// Builds the table from a peer's ApiVersions response.
    pub fn from_response(resp: &ApiVersionsResponse) -> Self {
        let peer = resp
            .api_keys
            .iter()
            .map(|k| {
                (
                    k.api_key,
                    Versions {
                        min: k.min_version,
                        max: k.max_version,
                    },
                )
            })
            .collect();
        let finalized_features = resp
            .finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.max_version_level))
            .collect();
        Self {
            peer,
            finalized_features,
            finalized_features_epoch: resp.finalized_features_epoch,
        }
    }

    /// Builds the table from explicit peer ranges (tests, scripted peers).
    pub fn from_ranges(ranges: impl IntoIterator<Item = (i16, Versions)>) -> Self {
        Self {
            peer: ranges.into_iter().collect(),
            finalized_features: HashMap::new(),
            finalized_features_epoch: -1,
        }
    }

    /// The peer's advertised range for `api_key`.
    pub fn peer_range(&self, api_key: i16) -> Option<Versions> {
        self.peer.get(&api_key).copied()
    }

    /// The highest version of `api_key` that both this build and the peer
    /// support.
    pub fn version_for(&self, api_key: i16) -> Result<i16, ProtocolError> {
        let ours = codec_versions(api_key).ok_or(ProtocolError::UnknownApiKey { api_key })?;
        self.version_within(api_key, ours)
    }

    /// The highest version both sides support for the request type `R`: the
    /// key's codec range narrowed to `R`'s own (kafka-protocol's ShareFetch
    /// and ShareAcknowledge structs stop at v1, our wrappers of them reach v2).
    pub fn version_for_type<R: crate::api::ApiRequest>(&self) -> Result<i16, ProtocolError> {
        let key = R::API_KEY;
        let codec = codec_versions(key).ok_or(ProtocolError::UnknownApiKey { api_key: key })?;
        let own = R::versions();
        let ours = crate::api::Versions {
            min: codec.min.max(own.min),
            max: codec.max.min(own.max),
        };
        self.version_within(key, ours)
    }

    /// The highest version of `api_key` within both `ours` and the peer's range.
    pub fn version_within(&self, api_key: i16, ours: Versions) -> Result<i16, ProtocolError> {
        let theirs = self
            .peer
            .get(&api_key)
            .ok_or_else(|| ProtocolError::UnsupportedByPeer {
                api_key,
                api_name: api_name(api_key),
                detail: None,
            })?;
        let min = ours.min.max(theirs.min);
        let max = ours.max.min(theirs.max);
        if min > max {
            return Err(ProtocolError::UnsupportedByPeer {
                api_key,
                api_name: api_name(api_key),
                detail: Some(format!(
                    "broker supports versions {}..={}, this client {}..={}",
                    theirs.min, theirs.max, ours.min, ours.max
                )),
            });
        }
        Ok(max)
    }

    /// A finalized feature level the peer reported (e.g. `share.version`).
    pub fn finalized_feature(&self, name: &str) -> Option<i16> {
        self.finalized_features.get(name).copied()
    }

    /// The peer's finalized-features epoch (-1 when unknown).
    pub fn finalized_features_epoch(&self) -> i64 {
        self.finalized_features_epoch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    fn resp(keys: &[(i16, i16, i16)]) -> ApiVersionsResponse {
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

    #[test]
    fn highest_common_version() {
        let n = NegotiatedVersions::from_response(&resp(&[(0, 3, 9), (1, 4, 99)]));
        assert_eq!(n.version_for(0).unwrap(), 9);
        let ours = codec_versions(1).unwrap();
        assert_eq!(n.version_for(1).unwrap(), ours.max);
    }

    #[test]
    fn missing_api_is_typed_unsupported() {
        let n = NegotiatedVersions::from_response(&resp(&[(0, 3, 9)]));
        match n.version_for(95) {
            Err(ProtocolError::UnsupportedByPeer {
                api_key: 95,
                api_name: "TxnShareAcknowledge",
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn disjoint_ranges_are_unsupported() {
        let n = NegotiatedVersions::from_response(&resp(&[(0, 100, 200)]));
        assert!(matches!(
            n.version_for(0),
            Err(ProtocolError::UnsupportedByPeer { api_key: 0, .. })
        ));
    }
}
