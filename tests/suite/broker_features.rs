//! Feature levels: ApiVersions reports them, UpdateFeatures changes them
//! online, and the APIs they gate follow.

use crate::common;

use common::RawClient;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::broker::{Broker, BrokerConfig};
use sharestream::protocol::ErrorCode;
use sharestream::protocol::txn_share_ack::TxnShareAcknowledgeRequest;

async fn versions(c: &mut RawClient) -> ApiVersionsResponse {
    c.send(
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("t"))
            .with_client_software_version(StrBytes::from_static_str("1")),
        3,
    )
    .await
}

fn level(r: &ApiVersionsResponse, name: &str) -> Option<i16> {
    r.finalized_features
        .iter()
        .find(|f| f.name.as_str() == name)
        .map(|f| f.max_version_level)
}

fn max_version(r: &ApiVersionsResponse, key: i16) -> Option<i16> {
    r.api_keys
        .iter()
        .find(|k| k.api_key == key)
        .map(|k| k.max_version)
}

fn update(name: &str, level: i16, upgrade_type: i8) -> UpdateFeaturesRequest {
    UpdateFeaturesRequest::default().with_feature_updates(vec![
        FeatureUpdateKey::default()
            .with_feature(StrBytes::from_string(name.to_string()))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type),
    ])
}

#[tokio::test]
async fn upgrade_and_downgrade_online() {
    let b = Broker::start(BrokerConfig {
        share_version: 2,
        transaction_version: 2,
        ..BrokerConfig::in_memory()
    })
    .await
    .unwrap();
    let mut c = RawClient::connect(b.local_addr()).await;
    let before = versions(&mut c).await;
    assert_eq!(level(&before, "share.version"), Some(2));
    assert_eq!(
        max_version(&before, 95),
        None,
        "key 95 needs share.version 3"
    );

    // Key 95 while disabled: UNSUPPORTED_VERSION in the body.
    let r = c.send(&TxnShareAcknowledgeRequest::default(), 0).await;
    assert_eq!(r.error_code, ErrorCode::UNSUPPORTED_VERSION.0);

    // Unknown feature, level too high, downgrade without the flag.
    let r = c.send(&update("no.such.feature", 1, 1), 1).await;
    assert_eq!(r.error_code, ErrorCode::INVALID_UPDATE_VERSION.0);
    let r = c.send(&update("share.version", 9, 1), 1).await;
    assert_eq!(r.error_code, ErrorCode::INVALID_UPDATE_VERSION.0);
    let r = c.send(&update("share.version", 1, 1), 1).await;
    assert_eq!(r.error_code, ErrorCode::INVALID_UPDATE_VERSION.0);
    assert_eq!(level(&versions(&mut c).await, "share.version"), Some(2));

    // Upgrade: the level and the epoch move.
    let r = c.send(&update("share.version", 3, 1), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let after = versions(&mut c).await;
    assert_eq!(level(&after, "share.version"), Some(3));
    assert!(after.finalized_features_epoch > before.finalized_features_epoch);

    // transaction.version downgrade to 1 (safe downgrade): the TV2 API
    // versions are no longer offered.
    assert_eq!(max_version(&after, 26), Some(5));
    let r = c.send(&update("transaction.version", 1, 2), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let tv1 = versions(&mut c).await;
    assert_eq!(level(&tv1, "transaction.version"), Some(1));
    assert_eq!(max_version(&tv1, 26), Some(4));
    assert_eq!(max_version(&tv1, 0), Some(11));
    // validate_only changes nothing.
    let r = c
        .send(
            &update("transaction.version", 2, 1).with_validate_only(true),
            1,
        )
        .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(
        level(&versions(&mut c).await, "transaction.version"),
        Some(1)
    );
    b.shutdown().await;
}

#[tokio::test]
async fn feature_levels_persist() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(BrokerConfig::with_data_dir(dir.path()))
        .await
        .unwrap();
    let mut c = RawClient::connect(b.local_addr()).await;
    let r = c.send(&update("share.version", 1, 2), 1).await;
    assert_eq!(r.error_code, 0);
    let epoch = versions(&mut c).await.finalized_features_epoch;
    drop(c);
    b.shutdown().await;
    let b = Broker::start(BrokerConfig::with_data_dir(dir.path()))
        .await
        .unwrap();
    let mut c = RawClient::connect(b.local_addr()).await;
    let v = versions(&mut c).await;
    assert_eq!(level(&v, "share.version"), Some(1));
    assert!(v.finalized_features_epoch >= epoch, "epochs never go down");
    b.shutdown().await;
}
