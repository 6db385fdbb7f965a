//! UpdateFeatures: online upgrade and downgrade of `share.version` and
//! `transaction.version` (docs/DESIGN.md D2).
//!
//! Rules, as Kafka's controller applies them: an unknown feature or a level
//! outside the supported range is INVALID_UPDATE_VERSION; lowering a level
//! needs a downgrade (v0: `AllowDowngrade`, v1+: `UpgradeType` 2 or 3);
//! level 0 removes the feature. Ours on top: `share.version` may not go
//! below 3 while any record is TX_PENDING, since the API that would resolve
//! them (key 95) stops being offered. The update is all or nothing and
//! bumps the finalized-features epoch, so clients see it in ApiVersions.
//! It needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED for the
//! whole request otherwise).

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::core::{
    BrokerCore, MAX_SHARE_VERSION, MAX_TRANSACTION_VERSION, SHARE_VERSION, TRANSACTION_VERSION,
};
use sharestream_protocol::ErrorCode;

const UPGRADE: i8 = 1;

pub(crate) fn update_features(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: UpdateFeaturesRequest,
) -> UpdateFeaturesResponse {
    // Alter on the cluster, as Kafka's controller: the whole request is
    // refused, with no per-feature results.
    if !ctx.allowed(core, AclOperation::Alter, &Resource::cluster()) {
        return UpdateFeaturesResponse::default()
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0)
            .with_error_message(Some(StrBytes::from_static_str(
                "Not authorized to update the cluster's features",
            )));
    }
    let current = core.features();
    let (mut share, mut txn) = (current.share_version, current.transaction_version);
    let mut results = Vec::new();
    let mut first_error: Option<(ErrorCode, String)> = None;
    for u in &req.feature_updates {
        let name = u.feature.to_string();
        let allow_downgrade = if ctx.version() == 0 {
            u.allow_downgrade
        } else {
            u.upgrade_type != UPGRADE
        };
        let (cur, max) = match name.as_str() {
            SHARE_VERSION => (share, MAX_SHARE_VERSION),
            TRANSACTION_VERSION => (txn, MAX_TRANSACTION_VERSION),
            _ => (-1, -1),
        };
        let level = u.max_version_level;
        let verdict = if max < 0 {
            Err(format!(
                "The feature {name} is not supported by this broker"
            ))
        } else if level < 0 || level > max {
            Err(format!(
                "Invalid update version {level} for feature {name}: supported levels are 0 to {max}"
            ))
        } else if level < cur && !allow_downgrade {
            Err(format!(
                "Can not downgrade feature {name} from {cur} to {level} without a downgrade flag"
            ))
        } else if name == SHARE_VERSION && level < 3 && core.txn_pending_records() > 0 {
            Err(format!(
                "Can not downgrade {SHARE_VERSION} below 3 while {} records are TX_PENDING: \
                 stop the producers that stage share acknowledgements and wait for their \
                 transactions to end",
                core.txn_pending_records()
            ))
        } else {
            Ok(())
        };
        match verdict {
            Ok(()) => {
                if name == SHARE_VERSION {
                    share = level;
                } else {
                    txn = level;
                }
                results.push(UpdatableFeatureResult::default().with_feature(u.feature.clone()));
            }
            Err(msg) => {
                if first_error.is_none() {
                    first_error = Some((ErrorCode::INVALID_UPDATE_VERSION, msg.clone()));
                }
                results.push(
                    UpdatableFeatureResult::default()
                        .with_feature(u.feature.clone())
                        .with_error_code(ErrorCode::INVALID_UPDATE_VERSION.0)
                        .with_error_message(Some(StrBytes::from_string(msg))),
                );
            }
        }
    }
    if let Some((code, msg)) = first_error {
        // All or nothing: the others were not applied.
        for r in results.iter_mut().filter(|r| r.error_code == 0) {
            r.error_code = ErrorCode::INVALID_UPDATE_VERSION.0;
            r.error_message = Some(StrBytes::from_static_str(
                "Not applied: another update in the request is invalid",
            ));
        }
        return UpdateFeaturesResponse::default()
            .with_error_code(code.0)
            .with_error_message(Some(StrBytes::from_string(msg)))
            .with_results(results);
    }
    if !req.validate_only && (share, txn) != (current.share_version, current.transaction_version) {
        if let Err(e) = core.set_features(share, txn) {
            return UpdateFeaturesResponse::default()
                .with_error_code(ErrorCode::FEATURE_UPDATE_FAILED.0)
                .with_error_message(Some(StrBytes::from_string(format!(
                    "persisting the feature levels failed: {e}"
                ))))
                .with_results(results);
        }
        tracing::info!(
            share_version = share,
            transaction_version = txn,
            "finalized features updated"
        );
    }
    UpdateFeaturesResponse::default().with_results(results)
}
