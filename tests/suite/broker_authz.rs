//! Broker authorization over sockets (SASL_PLAINTEXT listener, ACLs on):
//! a matrix with one case per (API family, missing permission) asserting
//! the exact error and that the principal succeeds once granted it; the
//! KIP-1289 authorization errors of TxnShareAcknowledge leaving every
//! record state as it was; the principal that may consume but not stage;
//! deny over allow, prefixes and super users end to end.

use crate::common;

use std::collections::HashMap;

use common::RawClient;
use common::broker::TestBroker;
use common::kip::{self, GROUP as SHARE_GROUP, INPUT};
use common::sasl::*;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::share_acknowledge_request as sa;
use kafka_protocol::messages::share_fetch_request as sf;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::broker::BrokerHandle;
use sharestream::broker::share::RecordState;
use sharestream::protocol::ErrorCode;
use sharestream::protocol::sasl::SaslMechanism;
use uuid::Uuid;

const PW: &str = "pw";

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn principal(user: &str) -> String {
    format!("User:{user}")
}

const TAF: i16 = ErrorCode::TOPIC_AUTHORIZATION_FAILED.0;
const GAF: i16 = ErrorCode::GROUP_AUTHORIZATION_FAILED.0;
const CAF: i16 = ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0;
const TIAF: i16 = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0;

/// The broker of a test with what the test holds of it: the super user's
/// connection, the topic INPUT's id, and the share sessions it opened.
struct Env {
    b: BrokerHandle,
    admin: RawClient,
    input: Uuid,
    /// Members already joined, with their next share session epoch.
    sessions: HashMap<String, i32>,
}

/// A broker with ACLs, `users` (password [`PW`]), the topic INPUT (2
/// partitions, 3 records in partition 0) and GROUP reading from the
/// earliest offset.
async fn env(users: &[&str]) -> Env {
    let users: Vec<(&str, &str)> = users.iter().map(|u| (*u, PW)).collect();
    let mut t = TestBroker::in_memory()
        .sasl(true, &users)
        .configure(|c| {
            c.auto_create_topics = true;
            // PLAIN only: no SCRAM credentials to derive for the many users.
            c.security.sasl_mechanisms = vec![SaslMechanism::Plain];
        })
        .topic(INPUT, 2)
        .earliest(SHARE_GROUP)
        .start()
        .await;
    kip::produce_plain(&mut t.c, INPUT, 0, 3).await;
    Env {
        input: t.topic(),
        b: t.b,
        admin: t.c,
        sessions: HashMap::new(),
    }
}

async fn grant(admin: &mut RawClient, acls: Vec<AclCreation>) {
    if !acls.is_empty() {
        create_acls(admin, acls).await;
    }
}

/// Joins `member` to `group` (subscribed to INPUT) as `c`; returns the
/// heartbeat's error code.
async fn join_group(c: &mut RawClient, group: &str, member: &str) -> i16 {
    c.send(
        &ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_member_id(s(member))
            .with_member_epoch(0)
            .with_subscribed_topic_names(Some(vec![TopicName(s(INPUT))])),
        1,
    )
    .await
    .error_code
}

fn share_fetch_req(group: &str, member: &str, topic: Uuid, epoch: i32) -> ShareFetchRequest {
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(group))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_batch_size(500)
        .with_topics(vec![
            sf::FetchTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![sf::FetchPartition::default().with_partition_index(0)]),
        ])
}

/// The first non-zero error of a ShareFetch answer: top level, then
/// partitions (error, then acknowledge error).
fn share_fetch_code(r: &ShareFetchResponse) -> i16 {
    if r.error_code != 0 {
        return r.error_code;
    }
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| [p.error_code, p.acknowledge_error_code])
        .find(|c| *c != 0)
        .unwrap_or(0)
}

fn share_ack_req(
    group: &str,
    member: &str,
    topic: Uuid,
    epoch: i32,
    first: i64,
    last: i64,
    ty: i8,
) -> ShareAcknowledgeRequest {
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s(group))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![
            sa::AcknowledgeTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![
                    sa::AcknowledgePartition::default()
                        .with_partition_index(0)
                        .with_acknowledgement_batches(vec![
                            sa::AcknowledgementBatch::default()
                                .with_first_offset(first)
                                .with_last_offset(last)
                                .with_acknowledge_types(vec![ty]),
                        ]),
                ]),
        ])
}

fn share_ack_code(r: &ShareAcknowledgeResponse) -> i16 {
    if r.error_code != 0 {
        return r.error_code;
    }
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .find(|c| *c != 0)
        .unwrap_or(0)
}

fn metadata_req(topics: Option<Vec<MetadataRequestTopic>>) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(true)
}

fn by_name(name: &str) -> MetadataRequestTopic {
    MetadataRequestTopic::default().with_name(Some(TopicName(s(name))))
}

/// The API families of the matrix.
#[derive(Debug, Clone, Copy)]
enum Api {
    MetadataByName,
    MetadataById,
    MetadataAutoCreate,
    CreateTopics,
    DeleteTopics,
    CreatePartitions,
    ListOffsets,
    DescribeConfigsTopic,
    DescribeConfigsBroker,
    DescribeConfigsGroup,
    AlterConfigsGroup,
    AlterConfigsTopic,
    AlterConfigsBroker,
    DeleteRecords,
    DescribeProducers,
    DescribeTransactions,
    WriteTxnMarkers,
    FindCoordinatorGroup,
    FindCoordinatorTxn,
    FindCoordinatorShare,
    UpdateFeatures,
    ShareGroupDescribe,
    ShareGroupHeartbeat,
    Produce,
    Fetch,
    InitProducerIdTxn,
    InitProducerIdIdempotent,
    AddPartitionsToTxn,
    AddOffsetsToTxn,
    EndTxn,
    ShareFetch,
    ShareAcknowledge,
    CreateAcls,
    DescribeAcls,
    DescribeLogDirs,
    ListPartitionReassignments,
    AlterPartitionReassignments,
    OffsetForLeaderEpoch,
    ElectLeaders,
}

/// Per-case resources are named after the user so that cases do not see
/// each other's grants.
async fn attempt(api: Api, e: &mut Env, c: &mut RawClient, u: &str) -> i16 {
    let input = e.input;
    match api {
        Api::MetadataByName => {
            let r = c.send(&metadata_req(Some(vec![by_name(INPUT)])), 12).await;
            r.topics[0].error_code
        }
        Api::MetadataById => {
            let r = c
                .send(
                    &metadata_req(Some(vec![
                        MetadataRequestTopic::default()
                            .with_name(None)
                            .with_topic_id(input),
                    ])),
                    12,
                )
                .await;
            let t = &r.topics[0];
            if t.error_code == TAF {
                assert!(
                    t.name.is_none(),
                    "a refused id does not reveal the name: {t:?}"
                );
                assert_eq!(t.topic_id, input);
            }
            t.error_code
        }
        Api::MetadataAutoCreate => {
            let name = format!("auto-{u}");
            let r = c.send(&metadata_req(Some(vec![by_name(&name)])), 12).await;
            let exists = e.b.core().topics().read().get(&name).is_some();
            assert_eq!(exists, r.topics[0].error_code == 0, "created iff allowed");
            r.topics[0].error_code
        }
        Api::CreateTopics => {
            let r = c
                .send(
                    &CreateTopicsRequest::default().with_topics(vec![
                        CreatableTopic::default()
                            .with_name(TopicName(s(&format!("new-{u}"))))
                            .with_num_partitions(1)
                            .with_replication_factor(-1),
                    ]),
                    7,
                )
                .await;
            let t = &r.topics[0];
            if t.error_code == 0 {
                // Created; without DescribeConfigs its configs are withheld.
                assert_eq!(t.topic_config_error_code, TAF);
                assert!(t.configs.as_ref().is_none_or(|c| c.is_empty()));
            }
            t.error_code
        }
        Api::DeleteTopics => {
            let name = format!("del-{u}");
            if e.b.core().topics().read().get(&name).is_none() {
                kip::create_topic(&mut e.admin, &name, 1).await;
            }
            let r = c
                .send(
                    &DeleteTopicsRequest::default().with_topics(vec![
                        DeleteTopicState::default().with_name(Some(TopicName(s(&name)))),
                    ]),
                    6,
                )
                .await;
            r.responses[0].error_code
        }
        Api::CreatePartitions => {
            let name = format!("part-{u}");
            if e.b.core().topics().read().get(&name).is_none() {
                kip::create_topic(&mut e.admin, &name, 1).await;
            }
            let r = c
                .send(
                    &CreatePartitionsRequest::default().with_topics(vec![
                        CreatePartitionsTopic::default()
                            .with_name(TopicName(s(&name)))
                            .with_count(2),
                    ]),
                    3,
                )
                .await;
            r.results[0].error_code
        }
        Api::ListOffsets => {
            let r = c
                .send(
                    &ListOffsetsRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![
                            ListOffsetsTopic::default()
                                .with_name(TopicName(s(INPUT)))
                                .with_partitions(vec![
                                    ListOffsetsPartition::default()
                                        .with_partition_index(0)
                                        .with_timestamp(-1),
                                ]),
                        ]),
                    6,
                )
                .await;
            let p = &r.topics[0].partitions[0];
            if p.error_code == 0 {
                assert_eq!(p.offset, 3);
            }
            p.error_code
        }
        Api::DeleteRecords => {
            use kafka_protocol::messages::delete_records_request::{
                DeleteRecordsPartition, DeleteRecordsTopic,
            };
            // Partition 1 of INPUT is empty: deleting up to its high
            // watermark changes nothing the other cases see.
            let r = c
                .send(
                    &DeleteRecordsRequest::default()
                        .with_timeout_ms(5_000)
                        .with_topics(vec![
                            DeleteRecordsTopic::default()
                                .with_name(TopicName(s(INPUT)))
                                .with_partitions(vec![
                                    DeleteRecordsPartition::default()
                                        .with_partition_index(1)
                                        .with_offset(-1),
                                ]),
                        ]),
                    2,
                )
                .await;
            let p = &r.topics[0].partitions[0];
            if p.error_code == 0 {
                assert_eq!(p.low_watermark, 0);
            } else {
                assert_eq!(p.low_watermark, -1);
            }
            p.error_code
        }
        Api::DescribeProducers => {
            use kafka_protocol::messages::describe_producers_request::TopicRequest;
            let r = c
                .send(
                    &DescribeProducersRequest::default().with_topics(vec![
                        TopicRequest::default()
                            .with_name(TopicName(s(INPUT)))
                            .with_partition_indexes(vec![0]),
                    ]),
                    0,
                )
                .await;
            r.topics[0].partitions[0].error_code
        }
        Api::WriteTxnMarkers => {
            use kafka_protocol::messages::write_txn_markers_request::{
                WritableTxnMarker, WritableTxnMarkerTopic,
            };
            let r = c
                .send(
                    &WriteTxnMarkersRequest::default().with_markers(vec![
                        WritableTxnMarker::default()
                            .with_producer_id(ProducerId(4242))
                            .with_producer_epoch(0)
                            .with_transaction_result(false)
                            .with_topics(vec![
                                WritableTxnMarkerTopic::default()
                                    .with_name(TopicName(s(INPUT)))
                                    .with_partition_indexes(vec![0]),
                            ]),
                    ]),
                    1,
                )
                .await;
            r.markers[0].topics[0].partitions[0].error_code
        }
        Api::DescribeTransactions => {
            let r = c
                .send(
                    &DescribeTransactionsRequest::default()
                        .with_transactional_ids(vec![TransactionalId(s(&format!("dtx-{u}")))]),
                    0,
                )
                .await;
            r.transaction_states[0].error_code
        }
        Api::DescribeConfigsTopic | Api::DescribeConfigsBroker | Api::DescribeConfigsGroup => {
            let (rt, name) = match api {
                Api::DescribeConfigsTopic => (2, INPUT.to_string()),
                Api::DescribeConfigsBroker => (4, String::new()),
                _ => (32, SHARE_GROUP.to_string()),
            };
            let r = c
                .send(
                    &DescribeConfigsRequest::default().with_resources(vec![
                        DescribeConfigsResource::default()
                            .with_resource_type(rt)
                            .with_resource_name(s(&name))
                            .with_configuration_keys(None),
                    ]),
                    4,
                )
                .await;
            let res = &r.results[0];
            if res.error_code == 0 {
                assert!(!res.configs.is_empty());
            } else {
                assert!(res.configs.is_empty());
            }
            res.error_code
        }
        Api::AlterConfigsGroup | Api::AlterConfigsTopic | Api::AlterConfigsBroker => {
            let (rt, name, key) = match api {
                Api::AlterConfigsGroup => (32, format!("g-{u}"), "share.record.lock.duration.ms"),
                Api::AlterConfigsBroker => (4, "0".to_string(), "log.cleaner.backoff.ms"),
                _ => (2, INPUT.to_string(), "retention.ms"),
            };
            let r = c
                .send(
                    &IncrementalAlterConfigsRequest::default().with_resources(vec![
                        AlterConfigsResource::default()
                            .with_resource_type(rt)
                            .with_resource_name(s(&name))
                            .with_configs(vec![
                                AlterableConfig::default()
                                    .with_name(s(key))
                                    .with_config_operation(0)
                                    .with_value(Some(s("20000"))),
                            ]),
                    ]),
                    1,
                )
                .await;
            r.responses[0].error_code
        }
        Api::FindCoordinatorGroup | Api::FindCoordinatorTxn | Api::FindCoordinatorShare => {
            let (key_type, key) = match api {
                Api::FindCoordinatorGroup => (0, format!("grp-{u}")),
                Api::FindCoordinatorTxn => (1, format!("tx-{u}")),
                _ => (2, format!("{SHARE_GROUP}:{input}:0")),
            };
            let r = c
                .send(
                    &FindCoordinatorRequest::default()
                        .with_key_type(key_type)
                        .with_coordinator_keys(vec![s(&key)]),
                    6,
                )
                .await;
            let co = &r.coordinators[0];
            if co.error_code != 0 {
                assert_eq!(co.node_id.0, -1, "a refused key names no node");
            }
            co.error_code
        }
        Api::UpdateFeatures => {
            let level = e.b.core().features().share_version;
            let r = c
                .send(
                    &UpdateFeaturesRequest::default()
                        .with_validate_only(true)
                        .with_feature_updates(vec![
                            FeatureUpdateKey::default()
                                .with_feature(s("share.version"))
                                .with_max_version_level(level)
                                .with_upgrade_type(1),
                        ]),
                    1,
                )
                .await;
            if r.error_code == CAF {
                assert!(r.results.is_empty());
            }
            r.error_code
        }
        Api::ShareGroupDescribe => {
            let group = format!("sgd-{u}");
            if e.sessions.insert(group.clone(), 0).is_none() {
                assert_eq!(join_group(&mut e.admin, &group, &format!("m-{u}")).await, 0);
            }
            let r = c
                .send(
                    &ShareGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId(s(&group))])
                        .with_include_authorized_operations(true),
                    1,
                )
                .await;
            let g = &r.groups[0];
            if g.error_code == 0 {
                assert_eq!(g.members.len(), 1);
                // Describe on the group is among the authorized operations.
                assert_ne!(g.authorized_operations & (1 << DESCRIBE), 0);
            } else {
                assert!(g.members.is_empty());
            }
            g.error_code
        }
        Api::ShareGroupHeartbeat => join_group(c, &format!("hb-{u}"), &format!("m-{u}")).await,
        Api::Produce => {
            let r = c
                .send(
                    &kip::produce_req(
                        INPUT,
                        1,
                        sharestream::protocol::records::encode_batch(
                            &Default::default(),
                            &[sharestream::protocol::records::Record::new(
                                0,
                                1,
                                None,
                                Some(bytes::Bytes::from_static(b"x")),
                            )],
                        )
                        .unwrap(),
                        None,
                    ),
                    9,
                )
                .await;
            r.responses[0].partition_responses[0].error_code
        }
        Api::Fetch => {
            let r = c
                .send(
                    &FetchRequest::default()
                        .with_max_wait_ms(0)
                        .with_min_bytes(0)
                        .with_max_bytes(1 << 20)
                        .with_session_epoch(-1)
                        .with_topics(vec![
                            FetchTopic::default()
                                .with_topic(TopicName(s(INPUT)))
                                .with_partitions(vec![
                                    FetchPartition::default()
                                        .with_partition(0)
                                        .with_partition_max_bytes(1 << 20),
                                ]),
                        ]),
                    12,
                )
                .await;
            let p = &r.responses[0].partitions[0];
            if p.error_code != 0 {
                assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
            }
            p.error_code
        }
        Api::InitProducerIdTxn | Api::InitProducerIdIdempotent => {
            let txn = match api {
                Api::InitProducerIdTxn => Some(TransactionalId(s(&format!("tx-{u}")))),
                _ => None,
            };
            let r = c
                .send(
                    &InitProducerIdRequest::default()
                        .with_transactional_id(txn)
                        .with_transaction_timeout_ms(60_000)
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1),
                    5,
                )
                .await;
            r.error_code
        }
        Api::AddPartitionsToTxn | Api::AddOffsetsToTxn | Api::EndTxn => {
            let txn = format!("tx-{u}");
            // With Write on the transactional id (granted as the base of
            // these cases) the principal gets a producer id.
            let (pid, epoch) = kip::init_pid(c, &txn, 60_000).await;
            match api {
                Api::AddPartitionsToTxn => {
                    let r = c
                        .send(
                            &AddPartitionsToTxnRequest::default()
                                .with_v3_and_below_transactional_id(TransactionalId(s(&txn)))
                                .with_v3_and_below_producer_id(ProducerId(pid))
                                .with_v3_and_below_producer_epoch(epoch)
                                .with_v3_and_below_topics(vec![
                                    AddPartitionsToTxnTopic::default()
                                        .with_name(TopicName(s(INPUT)))
                                        .with_partitions(vec![0]),
                                ]),
                            3,
                        )
                        .await;
                    r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
                }
                Api::AddOffsetsToTxn => {
                    let r = c
                        .send(
                            &AddOffsetsToTxnRequest::default()
                                .with_transactional_id(TransactionalId(s(&txn)))
                                .with_producer_id(ProducerId(pid))
                                .with_producer_epoch(epoch)
                                .with_group_id(GroupId(s(&format!("grp-{u}")))),
                            3,
                        )
                        .await;
                    r.error_code
                }
                _ => {
                    // EndTxn under another transactional id the principal
                    // may not Write.
                    let other = format!("other-{u}");
                    kip::end_txn(c, &other, pid, epoch, false).await.error_code
                }
            }
        }
        Api::ShareFetch => {
            let group = format!("sf-{u}");
            let member = format!("m-{u}");
            if !e.sessions.contains_key(&member) {
                assert_eq!(join_group(&mut e.admin, &group, &member).await, 0);
                e.sessions.insert(member.clone(), 0);
            }
            let epoch = e.sessions[&member];
            let r = c
                .send(&share_fetch_req(&group, &member, input, epoch), 1)
                .await;
            if r.error_code == 0 {
                *e.sessions.get_mut(&member).unwrap() += 1;
            }
            share_fetch_code(&r)
        }
        Api::ShareAcknowledge => {
            // The member holds offset 0 (acquired through the admin's
            // connection); the principal releases it.
            let group = format!("sa-{u}");
            let member = format!("m-{u}");
            if !e.sessions.contains_key(&member) {
                kip::earliest(&mut e.admin, &group).await;
                assert_eq!(join_group(&mut e.admin, &group, &member).await, 0);
                let r = e
                    .admin
                    .send(&share_fetch_req(&group, &member, input, 0), 1)
                    .await;
                assert_eq!(share_fetch_code(&r), 0);
                let acquired = &r.responses[0].partitions[0].acquired_records;
                assert_eq!(acquired[0].first_offset, 0);
                e.sessions.insert(member.clone(), 1);
            }
            let epoch = e.sessions[&member];
            let r = c
                .send(&share_ack_req(&group, &member, input, epoch, 0, 0, 2), 1)
                .await;
            if r.error_code == 0 {
                *e.sessions.get_mut(&member).unwrap() += 1;
            }
            share_ack_code(&r)
        }
        Api::CreateAcls => {
            let r = c
                .send(
                    &CreateAclsRequest::default().with_creations(vec![acl(
                        TOPIC,
                        "x",
                        LITERAL,
                        "User:nobody",
                        READ,
                    )]),
                    3,
                )
                .await;
            r.results[0].error_code
        }
        Api::ListPartitionReassignments => {
            let r = c
                .send(&ListPartitionReassignmentsRequest::default(), 0)
                .await;
            r.error_code
        }
        Api::AlterPartitionReassignments => {
            use kafka_protocol::messages::alter_partition_reassignments_request::{
                ReassignablePartition, ReassignableTopic,
            };
            let node = e.b.core().node_id();
            let r = c
                .send(
                    &AlterPartitionReassignmentsRequest::default().with_topics(vec![
                        ReassignableTopic::default()
                            .with_name(TopicName(s(INPUT)))
                            .with_partitions(vec![
                                ReassignablePartition::default()
                                    .with_partition_index(0)
                                    .with_replicas(Some(vec![BrokerId(node)])),
                            ]),
                    ]),
                    1,
                )
                .await;
            let p = r.responses[0].partitions[0].error_code;
            // The top level and the partition say the same.
            assert!(r.error_code == 0 || r.error_code == p);
            p
        }
        Api::ElectLeaders => {
            use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
            let r = c
                .send(
                    &ElectLeadersRequest::default().with_topic_partitions(Some(vec![
                        TopicPartitions::default()
                            .with_topic(TopicName(s(INPUT)))
                            .with_partitions(vec![0]),
                    ])),
                    2,
                )
                .await;
            let p = r.replica_election_results[0].partition_result[0].error_code;
            assert!(r.error_code == 0 || r.error_code == p);
            p
        }
        Api::OffsetForLeaderEpoch => {
            use kafka_protocol::messages::offset_for_leader_epoch_request::{
                OffsetForLeaderPartition, OffsetForLeaderTopic,
            };
            let r = c
                .send(
                    &OffsetForLeaderEpochRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![
                            OffsetForLeaderTopic::default()
                                .with_topic(TopicName(s(INPUT)))
                                .with_partitions(vec![
                                    OffsetForLeaderPartition::default()
                                        .with_partition(0)
                                        .with_current_leader_epoch(0)
                                        .with_leader_epoch(0),
                                ]),
                        ]),
                    4,
                )
                .await;
            let p = &r.topics[0].partitions[0];
            if p.error_code == 0 {
                assert_eq!((p.leader_epoch, p.end_offset), (0, 3));
            }
            p.error_code
        }
        Api::DescribeLogDirs => {
            let r = c.send(&DescribeLogDirsRequest::default(), 4).await;
            // Refused: no directory besides the error.
            if r.error_code != 0 {
                assert!(r.results.is_empty());
            }
            r.error_code
        }
        Api::DescribeAcls => {
            let r = c
                .send(
                    &DescribeAclsRequest::default()
                        .with_resource_type_filter(1)
                        .with_pattern_type_filter(1)
                        .with_operation(1)
                        .with_permission_type(1),
                    3,
                )
                .await;
            r.error_code
        }
    }
}

/// One matrix case: with `base` granted and `missing` not, `api` answers
/// `denied`; once `missing` is granted too it answers `allowed`.
struct Case {
    api: Api,
    base: fn(&str) -> Vec<AclCreation>,
    missing: fn(&str) -> Vec<AclCreation>,
    denied: i16,
    allowed: i16,
}

fn none(_: &str) -> Vec<AclCreation> {
    Vec::new()
}

fn describe_cluster(u: &str) -> Vec<AclCreation> {
    vec![acl(
        CLUSTER,
        "kafka-cluster",
        LITERAL,
        &principal(u),
        DESCRIBE,
    )]
}

fn cases() -> Vec<Case> {
    fn c(
        api: Api,
        base: fn(&str) -> Vec<AclCreation>,
        missing: fn(&str) -> Vec<AclCreation>,
        denied: i16,
        allowed: i16,
    ) -> Case {
        Case {
            api,
            base,
            missing,
            denied,
            allowed,
        }
    }
    vec![
        c(
            Api::MetadataByName,
            none,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE)],
            TAF,
            0,
        ),
        c(
            Api::MetadataById,
            none,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), READ)],
            TAF,
            0,
        ),
        c(
            Api::MetadataAutoCreate,
            |u| vec![acl(TOPIC, "auto-", PREFIXED, &principal(u), DESCRIBE)],
            |u| {
                vec![acl(
                    TOPIC,
                    &format!("auto-{u}"),
                    LITERAL,
                    &principal(u),
                    CREATE,
                )]
            },
            TAF,
            0,
        ),
        c(
            Api::CreateTopics,
            none,
            |u| vec![acl(TOPIC, "new-", PREFIXED, &principal(u), CREATE)],
            TAF,
            0,
        ),
        // Create on the cluster instead of the topic.
        c(
            Api::CreateTopics,
            none,
            |u| {
                vec![acl(
                    CLUSTER,
                    "kafka-cluster",
                    LITERAL,
                    &principal(u),
                    CREATE,
                )]
            },
            TAF,
            0,
        ),
        c(
            Api::DeleteTopics,
            |u| {
                vec![acl(
                    TOPIC,
                    &format!("del-{u}"),
                    LITERAL,
                    &principal(u),
                    DESCRIBE,
                )]
            },
            |u| {
                vec![acl(
                    TOPIC,
                    &format!("del-{u}"),
                    LITERAL,
                    &principal(u),
                    DELETE,
                )]
            },
            TAF,
            0,
        ),
        c(
            Api::CreatePartitions,
            none,
            |u| {
                vec![acl(
                    TOPIC,
                    &format!("part-{u}"),
                    LITERAL,
                    &principal(u),
                    ALTER,
                )]
            },
            TAF,
            0,
        ),
        c(
            Api::ListOffsets,
            none,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE)],
            TAF,
            0,
        ),
        // Describe on the topic (consumers), or ClusterAction on the
        // cluster (followers), as Kafka's KafkaApis checks it.
        c(
            Api::OffsetForLeaderEpoch,
            none,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE)],
            TAF,
            0,
        ),
        c(
            Api::OffsetForLeaderEpoch,
            none,
            |u| {
                vec![acl(
                    CLUSTER,
                    "kafka-cluster",
                    LITERAL,
                    &principal(u),
                    CLUSTER_ACTION,
                )]
            },
            TAF,
            0,
        ),
        c(
            Api::DescribeConfigsTopic,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), READ)],
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE_CONFIGS)],
            TAF,
            0,
        ),
        c(
            Api::DescribeConfigsBroker,
            none,
            |u| {
                vec![acl(
                    CLUSTER,
                    "kafka-cluster",
                    LITERAL,
                    &principal(u),
                    DESCRIBE_CONFIGS,
                )]
            },
            CAF,
            0,
        ),
        c(
            Api::DescribeConfigsGroup,
            |u| vec![acl(GROUP, SHARE_GROUP, LITERAL, &principal(u), READ)],
            |u| {
                vec![acl(
                    GROUP,
                    SHARE_GROUP,
                    LITERAL,
                    &principal(u),
                    ALTER_CONFIGS,
                )]
            },
            GAF,
            0,
        ),
        c(
            Api::AlterConfigsGroup,
            |u| {
                vec![acl(
                    GROUP,
                    &format!("g-{u}"),
                    LITERAL,
                    &principal(u),
                    DESCRIBE_CONFIGS,
                )]
            },
            |u| {
                vec![acl(
                    GROUP,
                    &format!("g-{u}"),
                    LITERAL,
                    &principal(u),
                    ALTER_CONFIGS,
                )]
            },
            GAF,
            0,
        ),
        c(
            Api::AlterConfigsTopic,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE_CONFIGS)],
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), ALTER_CONFIGS)],
            TAF,
            0,
        ),
        c(
            Api::AlterConfigsBroker,
            |u| {
                vec![acl(
                    CLUSTER,
                    "kafka-cluster",
                    LITERAL,
                    &principal(u),
                    DESCRIBE_CONFIGS,
                )]
            },
            |u| {
                vec![acl(
                    CLUSTER,
                    "kafka-cluster",
                    LITERAL,
                    &principal(u),
                    ALTER_CONFIGS,
                )]
            },
            CAF,
            0,
        ),
        c(
            Api::DescribeProducers,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE)],
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), READ)],
            TAF,
            0,
        ),
        // ClusterAction on the cluster, as Kafka's KafkaApis checks it.
        c(
            Api::WriteTxnMarkers,
            |u| vec![acl(CLUSTER, "kafka-cluster", LITERAL, &principal(u), ALTER)],
            |u| {
                vec![acl(
                    CLUSTER,
                    "kafka-cluster",
                    LITERAL,
                    &principal(u),
                    CLUSTER_ACTION,
                )]
            },
            CAF,
            0,
        ),
        // Past authorization: an id the coordinator never saw.
        c(
            Api::DescribeTransactions,
            none,
            |u| {
                vec![acl(
                    TXN_ID,
                    &format!("dtx-{u}"),
                    LITERAL,
                    &principal(u),
                    DESCRIBE,
                )]
            },
            TIAF,
            ErrorCode::TRANSACTIONAL_ID_NOT_FOUND.0,
        ),
        // Delete on the topic, as Kafka's KafkaApis checks it.
        c(
            Api::DeleteRecords,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE)],
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DELETE)],
            TAF,
            0,
        ),
        c(
            Api::FindCoordinatorGroup,
            none,
            |u| {
                vec![acl(
                    GROUP,
                    &format!("grp-{u}"),
                    LITERAL,
                    &principal(u),
                    DESCRIBE,
                )]
            },
            GAF,
            0,
        ),
        c(
            Api::FindCoordinatorTxn,
            none,
            |u| {
                vec![acl(
                    TXN_ID,
                    &format!("tx-{u}"),
                    LITERAL,
                    &principal(u),
                    DESCRIBE,
                )]
            },
            TIAF,
            0,
        ),
        c(
            Api::FindCoordinatorShare,
            describe_cluster,
            |u| {
                vec![acl(
                    CLUSTER,
                    "kafka-cluster",
                    LITERAL,
                    &principal(u),
                    CLUSTER_ACTION,
                )]
            },
            CAF,
            0,
        ),
        c(
            Api::UpdateFeatures,
            describe_cluster,
            |u| vec![acl(CLUSTER, "kafka-cluster", LITERAL, &principal(u), ALTER)],
            CAF,
            0,
        ),
        c(
            Api::ShareGroupDescribe,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE)],
            |u| {
                vec![acl(
                    GROUP,
                    &format!("sgd-{u}"),
                    LITERAL,
                    &principal(u),
                    DESCRIBE,
                )]
            },
            GAF,
            0,
        ),
        // Describe on the group but not on a topic its members use.
        c(
            Api::ShareGroupDescribe,
            |u| {
                vec![acl(
                    GROUP,
                    &format!("sgd-{u}"),
                    LITERAL,
                    &principal(u),
                    DESCRIBE,
                )]
            },
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE)],
            TAF,
            0,
        ),
        c(
            Api::ShareGroupHeartbeat,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE)],
            |u| vec![acl(GROUP, &format!("hb-{u}"), LITERAL, &principal(u), READ)],
            GAF,
            0,
        ),
        c(
            Api::ShareGroupHeartbeat,
            |u| vec![acl(GROUP, &format!("hb-{u}"), LITERAL, &principal(u), READ)],
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), DESCRIBE)],
            TAF,
            0,
        ),
        c(
            Api::Produce,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), READ)],
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), WRITE)],
            TAF,
            0,
        ),
        c(
            Api::Fetch,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), WRITE)],
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), READ)],
            TAF,
            0,
        ),
        c(
            Api::InitProducerIdTxn,
            |u| {
                vec![acl(
                    TXN_ID,
                    &format!("tx-{u}"),
                    LITERAL,
                    &principal(u),
                    DESCRIBE,
                )]
            },
            |u| {
                vec![acl(
                    TXN_ID,
                    &format!("tx-{u}"),
                    LITERAL,
                    &principal(u),
                    WRITE,
                )]
            },
            TIAF,
            0,
        ),
        c(
            Api::InitProducerIdIdempotent,
            none,
            |u| {
                vec![acl(
                    CLUSTER,
                    "kafka-cluster",
                    LITERAL,
                    &principal(u),
                    IDEMPOTENT_WRITE,
                )]
            },
            CAF,
            0,
        ),
        c(
            Api::AddPartitionsToTxn,
            |u| {
                vec![acl(
                    TXN_ID,
                    &format!("tx-{u}"),
                    LITERAL,
                    &principal(u),
                    WRITE,
                )]
            },
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), WRITE)],
            TAF,
            0,
        ),
        c(
            Api::AddOffsetsToTxn,
            |u| {
                vec![acl(
                    TXN_ID,
                    &format!("tx-{u}"),
                    LITERAL,
                    &principal(u),
                    WRITE,
                )]
            },
            |u| {
                vec![acl(
                    GROUP,
                    &format!("grp-{u}"),
                    LITERAL,
                    &principal(u),
                    READ,
                )]
            },
            GAF,
            0,
        ),
        // EndTxn on a transactional id without Write; once granted, the
        // request passes authorization (and fails on the producer id,
        // which belongs to another transactional id).
        c(
            Api::EndTxn,
            |u| {
                vec![acl(
                    TXN_ID,
                    &format!("tx-{u}"),
                    LITERAL,
                    &principal(u),
                    WRITE,
                )]
            },
            |u| {
                vec![acl(
                    TXN_ID,
                    &format!("other-{u}"),
                    LITERAL,
                    &principal(u),
                    WRITE,
                )]
            },
            TIAF,
            -1,
        ),
        c(
            Api::ShareFetch,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), READ)],
            |u| vec![acl(GROUP, &format!("sf-{u}"), LITERAL, &principal(u), READ)],
            GAF,
            0,
        ),
        // Read on the group, not on the topic: per-partition refusal.
        c(
            Api::ShareFetch,
            |u| vec![acl(GROUP, &format!("sf-{u}"), LITERAL, &principal(u), READ)],
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), READ)],
            TAF,
            0,
        ),
        c(
            Api::ShareAcknowledge,
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), READ)],
            |u| vec![acl(GROUP, &format!("sa-{u}"), LITERAL, &principal(u), READ)],
            GAF,
            0,
        ),
        c(
            Api::ShareAcknowledge,
            |u| vec![acl(GROUP, &format!("sa-{u}"), LITERAL, &principal(u), READ)],
            |u| vec![acl(TOPIC, INPUT, LITERAL, &principal(u), READ)],
            TAF,
            0,
        ),
        c(
            Api::CreateAcls,
            describe_cluster,
            |u| vec![acl(CLUSTER, "kafka-cluster", LITERAL, &principal(u), ALTER)],
            CAF,
            0,
        ),
        c(Api::DescribeAcls, none, describe_cluster, CAF, 0),
        c(Api::DescribeLogDirs, none, describe_cluster, CAF, 0),
        c(
            Api::ListPartitionReassignments,
            none,
            describe_cluster,
            CAF,
            0,
        ),
        c(
            Api::AlterPartitionReassignments,
            describe_cluster,
            |u| vec![acl(CLUSTER, "kafka-cluster", LITERAL, &principal(u), ALTER)],
            CAF,
            0,
        ),
        c(
            Api::ElectLeaders,
            describe_cluster,
            |u| vec![acl(CLUSTER, "kafka-cluster", LITERAL, &principal(u), ALTER)],
            CAF,
            ErrorCode::ELECTION_NOT_NEEDED.0,
        ),
    ]
}

#[tokio::test]
async fn each_api_family_refuses_a_missing_permission_with_kafkas_error_and_serves_once_granted() {
    let cases = cases();
    let users: Vec<String> = (0..cases.len()).map(|i| format!("u{i}")).collect();
    let user_refs: Vec<&str> = users.iter().map(String::as_str).collect();
    let mut e = env(&user_refs).await;
    for (case, u) in cases.iter().zip(&users) {
        let mut c = plain(&e.b, u, PW).await;
        grant(&mut e.admin, (case.base)(u)).await;
        let got = attempt(case.api, &mut e, &mut c, u).await;
        assert_eq!(
            got,
            case.denied,
            "{:?} without the permission: {:?}",
            case.api,
            ErrorCode(got)
        );
        grant(&mut e.admin, (case.missing)(u)).await;
        let got = attempt(case.api, &mut e, &mut c, u).await;
        if case.allowed >= 0 {
            assert_eq!(
                got,
                case.allowed,
                "{:?} with the permission: {:?}",
                case.api,
                ErrorCode(got)
            );
        } else {
            assert!(
                ![TAF, GAF, CAF, TIAF].contains(&got),
                "{:?} with the permission: {:?}",
                case.api,
                ErrorCode(got)
            );
        }
    }
    e.b.shutdown().await;
}

// ----- KIP-1289 ----------------------------------------------------------------

fn assert_held_by(e: &Env, member: &str, offsets: std::ops::RangeInclusive<i64>, deliveries: u16) {
    for o in offsets {
        let i = kip::info(&e.b, e.input, 0, o);
        assert_eq!(
            (
                i.state,
                i.member_id.as_deref(),
                i.delivery_count,
                i.producer
            ),
            (RecordState::Acquired, Some(member), deliveries, None),
            "offset {o}"
        );
    }
    assert_eq!(e.b.core().txn_pending_records(), 0, "nothing TX_PENDING");
}

#[tokio::test]
async fn txn_share_acknowledge_authorization_errors_leave_every_record_as_it_was() {
    let mut e = env(&["bob"]).await;
    let member_epoch = kip::join(&mut e.admin, "m1").await;
    let got = kip::acquire(&mut e.admin, "m1", e.input, &[0], 0).await;
    assert_eq!(got, vec![(0, 0, 2)]);
    let (pid, epoch) = kip::init_pid(&mut e.admin, "tx-1", 60_000).await;
    let req = kip::stage_req(
        "tx-1",
        pid,
        epoch,
        "m1",
        member_epoch,
        e.input,
        &[(0, 0, 2, 1)],
    );
    let mut bob = plain(&e.b, "bob", PW).await;
    let bob_p = principal("bob");
    // D14 order: the transactional id, then the group, then the topic;
    // each refusal is top-level and stages nothing.
    let steps: Vec<(Vec<AclCreation>, i16)> = vec![
        (vec![], TIAF),
        (vec![acl(TXN_ID, "tx-1", LITERAL, &bob_p, WRITE)], GAF),
        (vec![acl(GROUP, SHARE_GROUP, LITERAL, &bob_p, READ)], TAF),
    ];
    for (grants, expected) in steps {
        grant(&mut e.admin, grants).await;
        let r = kip::stage(&mut bob, &req).await;
        assert_eq!(r.error_code, expected, "{:?}", ErrorCode(r.error_code));
        assert!(
            r.responses.is_empty(),
            "a top-level refusal has no partitions"
        );
        assert_held_by(&e, "m1", 0..=2, 1);
    }
    // With Read on the topic as well, the same request stages.
    grant(&mut e.admin, vec![acl(TOPIC, INPUT, LITERAL, &bob_p, READ)]).await;
    let r = kip::stage(&mut bob, &req).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(kip::partition_errors(&r), vec![(0, 0)]);
    assert_eq!(kip::info(&e.b, e.input, 0, 0).state, RecordState::TxPending);
    // Aborting makes them AVAILABLE again (the default of
    // group.share.transaction.abort.record.state, D25).
    assert_eq!(
        kip::end_txn(&mut e.admin, "tx-1", pid, epoch, false)
            .await
            .error_code,
        0
    );
    for o in 0..=2 {
        let i = kip::info(&e.b, e.input, 0, o);
        assert_eq!(
            (i.state, i.delivery_count, i.producer),
            (RecordState::Available, 1, None),
            "offset {o}"
        );
    }
    e.b.shutdown().await;
}

#[tokio::test]
async fn a_principal_with_read_on_the_group_but_no_write_on_the_transactional_id_consumes_but_cannot_stage()
 {
    let mut e = env(&["alice"]).await;
    let me = principal("alice");
    grant(
        &mut e.admin,
        vec![
            acl(GROUP, SHARE_GROUP, LITERAL, &me, READ),
            acl(TOPIC, INPUT, LITERAL, &me, READ),
        ],
    )
    .await;
    let mut alice = plain(&e.b, "alice", PW).await;
    // It consumes.
    let member_epoch = kip::join(&mut alice, "m-a").await;
    let got = kip::acquire(&mut alice, "m-a", e.input, &[0], 0).await;
    assert_eq!(got, vec![(0, 0, 2)]);
    assert_held_by(&e, "m-a", 0..=2, 1);
    // It may not use the transactional id: neither find its coordinator,
    // nor get a producer id, nor stage with one obtained elsewhere.
    let r = alice
        .send(
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![s("tx-a")]),
            6,
        )
        .await;
    assert_eq!(r.coordinators[0].error_code, TIAF);
    let r = alice
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(s("tx-a"))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            5,
        )
        .await;
    assert_eq!(r.error_code, TIAF);
    let (pid, epoch) = kip::init_pid(&mut e.admin, "tx-a", 60_000).await;
    let req = kip::stage_req(
        "tx-a",
        pid,
        epoch,
        "m-a",
        member_epoch,
        e.input,
        &[(0, 0, 2, 1)],
    );
    let r = kip::stage(&mut alice, &req).await;
    assert_eq!(r.error_code, TIAF);
    let r = alice
        .send(
            &EndTxnRequest::default()
                .with_transactional_id(TransactionalId(s("tx-a")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(true),
            5,
        )
        .await;
    assert_eq!(r.error_code, TIAF);
    // Nothing changed: still ACQUIRED by the member, nothing TX_PENDING,
    // and the refused requests did not even begin the transaction (no
    // participant was registered): there is nothing to commit.
    assert_held_by(&e, "m-a", 0..=2, 1);
    assert_eq!(
        kip::end_txn(&mut e.admin, "tx-a", pid, epoch, true)
            .await
            .error_code,
        ErrorCode::INVALID_TXN_STATE.0
    );
    assert_held_by(&e, "m-a", 0..=2, 1);
    // The member can still release them and they come back.
    let r = alice
        .send(&share_ack_req(SHARE_GROUP, "m-a", e.input, 1, 0, 2, 2), 1)
        .await;
    assert_eq!(share_ack_code(&r), 0);
    assert_eq!(kip::info(&e.b, e.input, 0, 0).state, RecordState::Available);
    let got = kip::acquire(&mut alice, "m-a", e.input, &[0], 2).await;
    assert_eq!(got, vec![(0, 0, 2)]);
    assert_held_by(&e, "m-a", 0..=2, 2);
    e.b.shutdown().await;
}

// ----- the model end to end --------------------------------------------------------

async fn fetch_code(c: &mut RawClient, topic: &str) -> i16 {
    let r = c
        .send(
            &FetchRequest::default()
                .with_max_wait_ms(0)
                .with_min_bytes(0)
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(TopicName(s(topic)))
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition(0)
                                .with_partition_max_bytes(1 << 20),
                        ]),
                ]),
            12,
        )
        .await;
    r.responses[0].partitions[0].error_code
}

#[tokio::test]
async fn deny_wins_over_allow_prefixes_match_and_super_users_bypass_acls() {
    let mut e = env(&["alice", "bob"]).await;
    kip::create_topic(&mut e.admin, "secret-1", 1).await;
    grant(
        &mut e.admin,
        vec![
            acl(TOPIC, "*", LITERAL, "User:*", ALL),
            deny(TOPIC, "secret", PREFIXED, &principal("alice"), READ),
        ],
    )
    .await;
    let mut alice = plain(&e.b, "alice", PW).await;
    let mut bob = plain(&e.b, "bob", PW).await;
    assert_eq!(fetch_code(&mut alice, INPUT).await, 0);
    assert_eq!(fetch_code(&mut alice, "secret-1").await, TAF);
    assert_eq!(fetch_code(&mut bob, "secret-1").await, 0);
    // The deny is on Read only: Describe (implied by the allowed All) stays.
    let r = alice
        .send(&metadata_req(Some(vec![by_name("secret-1")])), 12)
        .await;
    assert_eq!(r.topics[0].error_code, 0);
    // Deny All to everyone: super users are still allowed.
    grant(&mut e.admin, vec![deny(TOPIC, "*", LITERAL, "User:*", ALL)]).await;
    assert_eq!(fetch_code(&mut bob, INPUT).await, TAF);
    assert_eq!(fetch_code(&mut e.admin, "secret-1").await, 0);
    e.b.shutdown().await;
}

#[tokio::test]
async fn metadata_lists_only_describable_topics_and_reports_authorized_operations() {
    let mut e = env(&["alice"]).await;
    kip::create_topic(&mut e.admin, "visible", 1).await;
    kip::create_topic(&mut e.admin, "hidden", 1).await;
    let me = principal("alice");
    grant(
        &mut e.admin,
        vec![
            acl(TOPIC, INPUT, LITERAL, &me, DESCRIBE),
            acl(TOPIC, "visible", LITERAL, &me, READ),
        ],
    )
    .await;
    let mut alice = plain(&e.b, "alice", PW).await;
    let all = |v: i16| {
        MetadataRequest::default()
            .with_topics(None)
            .with_include_cluster_authorized_operations(v <= 10)
            .with_include_topic_authorized_operations(true)
    };
    let r = alice.send(&all(10), 10).await;
    let mut names: Vec<(String, i32)> = r
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().unwrap().0.to_string(),
                t.topic_authorized_operations,
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            (INPUT.to_string(), 1 << DESCRIBE),
            ("visible".to_string(), (1 << READ) | (1 << DESCRIBE)),
        ]
    );
    // No Describe on the cluster: its operations are reported as none.
    assert_eq!(r.cluster_authorized_operations, 0);
    // A named hidden topic is refused, existing or not.
    let r = alice
        .send(
            &metadata_req(Some(vec![by_name("hidden"), by_name("nonexistent")])),
            12,
        )
        .await;
    assert!(
        r.topics
            .iter()
            .all(|t| t.error_code == TAF && t.partitions.is_empty())
    );
    assert!(e.b.core().topics().read().get("nonexistent").is_none());
    // The super user sees every topic and every operation.
    let r = e.admin.send(&all(10), 10).await;
    assert_eq!(r.topics.len(), 3);
    let topic_ops: i32 = [
        READ,
        WRITE,
        CREATE,
        DESCRIBE,
        DELETE,
        ALTER,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
    ]
    .iter()
    .map(|op| 1 << op)
    .sum();
    assert!(
        r.topics
            .iter()
            .all(|t| t.topic_authorized_operations == topic_ops)
    );
    let cluster_ops: i32 = [
        CREATE,
        CLUSTER_ACTION,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
        IDEMPOTENT_WRITE,
        ALTER,
        DESCRIBE,
    ]
    .iter()
    .map(|op| 1 << op)
    .sum();
    assert_eq!(r.cluster_authorized_operations, cluster_ops);
    // DescribeCluster: the cluster's operations only when asked for, 0
    // without Describe on the cluster.
    let dc = |ops: bool| {
        DescribeClusterRequest::default()
            .with_endpoint_type(1)
            .with_include_cluster_authorized_operations(ops)
    };
    assert_eq!(
        alice
            .send(&dc(false), 1)
            .await
            .cluster_authorized_operations,
        i32::MIN
    );
    assert_eq!(
        alice.send(&dc(true), 1).await.cluster_authorized_operations,
        0
    );
    grant(
        &mut e.admin,
        vec![acl(CLUSTER, "kafka-cluster", LITERAL, &me, DESCRIBE)],
    )
    .await;
    assert_eq!(
        alice.send(&dc(true), 1).await.cluster_authorized_operations,
        1 << DESCRIBE
    );
    assert_eq!(
        e.admin
            .send(&dc(true), 1)
            .await
            .cluster_authorized_operations,
        cluster_ops
    );
    e.b.shutdown().await;
}

#[tokio::test]
async fn unauthenticated_connections_get_nothing_but_the_handshake_for_any_api() {
    let e = env(&[]).await;
    let tsa = kip::stage_req("tx", 1, 0, "m", 1, e.input, &[(0, 0, 0, 1)]);
    for which in 0..3 {
        let mut c = RawClient::connect(e.b.local_addr()).await;
        let v = c.send(&ApiVersionsRequest::default(), 2).await;
        assert_eq!(v.error_code, 0);
        match which {
            0 => {
                c.send_only(&share_fetch_req(SHARE_GROUP, "m", e.input, 0), 1)
                    .await
            }
            1 => c.send_only(&tsa, 0).await,
            _ => {
                c.send_only(
                    &CreateAclsRequest::default()
                        .with_creations(vec![acl(TOPIC, "*", LITERAL, "User:*", ALL)]),
                    3,
                )
                .await
            }
        };
        assert!(
            c.is_closed().await,
            "request {which} before authentication must close"
        );
    }
    // Nothing was granted or joined by those requests.
    assert!(e.b.core().security().authorizer().unwrap().is_empty());
    assert!(!e.b.core().shares().is_member_alive(SHARE_GROUP, "m"));
    e.b.shutdown().await;
}

/// `allow.everyone.if.no.acl.found` over a plaintext listener (every
/// client is User:ANONYMOUS, no super user): what no ACL covers is open,
/// so the client may create topics and ACLs; a Deny of everyone on one
/// topic closes that topic alone; an Allow of someone else closes one too.
#[tokio::test]
async fn allow_everyone_if_no_acl_found_opens_only_what_no_acl_covers() {
    let t = TestBroker::in_memory()
        .configure(|c| {
            c.security.acl_enabled = true;
            c.security.allow_everyone_if_no_acl_found = true;
        })
        .start()
        .await;
    let (b, mut c) = (t.b, t.c);
    for topic in ["open", "closed", "bobs"] {
        kip::create_topic(&mut c, topic, 1).await;
    }
    create_acls(
        &mut c,
        vec![
            deny(TOPIC, "closed", LITERAL, "User:*", ALL),
            acl(TOPIC, "bobs", LITERAL, &principal("bob"), WRITE),
        ],
    )
    .await;
    let produce = |topic: &str| {
        let records = vec![sharestream::protocol::records::Record::new(
            0,
            0,
            None,
            Some(bytes::Bytes::from_static(b"v")),
        )];
        let batch = sharestream::protocol::records::encode_batch(
            &sharestream::protocol::records::BatchSpec::default(),
            &records,
        )
        .unwrap();
        kip::produce_req(topic, 0, batch, None)
    };
    let mut codes = Vec::new();
    for topic in ["open", "closed", "bobs"] {
        let r = c.send(&produce(topic), 9).await;
        codes.push(r.responses[0].partition_responses[0].error_code);
    }
    assert_eq!(codes, vec![0, TAF, TAF]);
    b.shutdown().await;
}
