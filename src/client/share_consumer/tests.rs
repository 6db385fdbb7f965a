//! Protocol flow against scripted brokers: join, fetch in a share session,
//! gaps, piggy-backed acknowledgements, commits, transactions, close.

use super::*;
use crate::client::broker_connection::{Connector, ConnectorFactory};
use crate::client::config::ConnectionConfig;
use crate::client::connection::Connection;
use crate::client::metadata::{PartitionMetadata, TopicMetadata};
use crate::client::test_peer::{Received, ScriptedPeer, all_apis_except};
use crate::protocol::api::{AnyRequest, encode_response_frame};
use crate::protocol::records::{BatchSpec, Record, encode_batch};
use crate::protocol::share_v2::ShareAcknowledgeV2Response;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::share_acknowledge_response::{
    PartitionData as AckPartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::share_group_heartbeat_response::{
    Assignment as WireAssignment, TopicPartitions,
};
use kafka_protocol::messages::{
    RequestKind, ShareAcknowledgeResponse, ShareFetchResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
};
use tokio::sync::{mpsc, oneshot};

const TOPIC: u128 = 0xA;

fn topic_id() -> Uuid {
    Uuid::from_u128(TOPIC)
}

fn tp(p: i32) -> TopicIdPartition {
    TopicIdPartition {
        topic_id: topic_id(),
        topic: "in".into(),
        partition: p,
    }
}

/// Coordinator node 1; partition p led by node 1 + p % 2.
struct FakeLookup;

impl ClusterLookup for FakeLookup {
    fn find_coordinator<'a>(
        &'a self,
        _: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<BrokerAddress, ClientError>> {
        Box::pin(async {
            Ok(BrokerAddress {
                node_id: 1,
                address: "b1:9092".into(),
            })
        })
    }
    fn describe_topics<'a>(
        &'a self,
        ids: &'a [Uuid],
    ) -> futures::future::BoxFuture<'a, Result<ClusterView, ClientError>> {
        Box::pin(async move {
            let mut v = ClusterView::default();
            v.brokers.insert(1, "b1:9092".into());
            v.brokers.insert(2, "b2:9092".into());
            if ids.contains(&topic_id()) {
                v.topics.insert(
                    topic_id(),
                    Arc::new(TopicMetadata {
                        name: "in".into(),
                        topic_id: topic_id(),
                        error: ErrorCode::NONE,
                        partitions: (0..4)
                            .map(|p| PartitionMetadata {
                                partition: p,
                                leader_id: 1 + p % 2,
                                leader_epoch: 0,
                                error: ErrorCode::NONE,
                            })
                            .collect(),
                    }),
                );
            }
            Ok(v)
        })
    }
}

/// A share request forwarded to the test, with the way to answer it.
struct Req {
    node: i32,
    rx: Received,
    reply: oneshot::Sender<Bytes>,
}

impl Req {
    fn fetch(&self) -> &ShareFetchRequest {
        &self.fetch_v2().request
    }
    fn fetch_v2(&self) -> &ShareFetchV2Request {
        match &self.rx.request {
            AnyRequest::ShareFetch(r) => r,
            other => panic!("expected ShareFetch, got {other:?}"),
        }
    }
    fn ack(&self) -> &ShareAcknowledgeRequest {
        match &self.rx.request {
            AnyRequest::ShareAcknowledge(r) => &r.request,
            other => panic!("expected ShareAcknowledge, got {other:?}"),
        }
    }
    fn answer_fetch(self, resp: ShareFetchResponse) {
        let mut out = BytesMut::new();
        encode_response_frame::<ShareFetchV2Request>(
            &resp,
            self.rx.header.api_version,
            self.rx.header.correlation_id,
            &mut out,
        )
        .unwrap();
        let _ = self.reply.send(out.freeze());
    }
    fn answer_ack(self, resp: ShareAcknowledgeResponse) {
        let mut out = BytesMut::new();
        encode_response_frame::<ShareAcknowledgeV2Request>(
            &ShareAcknowledgeV2Response {
                response: resp,
                acquisition_lock_timeout_ms: 30_000,
            },
            self.rx.header.api_version,
            self.rx.header.correlation_id,
            &mut out,
        )
        .unwrap();
        let _ = self.reply.send(out.freeze());
    }
}

/// Brokers whose heartbeats answer themselves (epoch 0 joins at epoch 1
/// with `assignment`) and whose share requests go to the test.
struct Cluster {
    heartbeats: Mutex<Vec<ShareGroupHeartbeatRequest>>,
    assignment: Vec<i32>,
    reqs: mpsc::UnboundedSender<Req>,
    apis: Vec<(i16, i16, i16)>,
}

fn cluster(assignment: Vec<i32>) -> (Arc<Cluster>, mpsc::UnboundedReceiver<Req>, Arc<BrokerPool>) {
    cluster_with(assignment, all_apis_except(&[]))
}

/// A cluster whose brokers list `apis` in ApiVersions.
fn cluster_with(
    assignment: Vec<i32>,
    apis: Vec<(i16, i16, i16)>,
) -> (Arc<Cluster>, mpsc::UnboundedReceiver<Req>, Arc<BrokerPool>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let c = Arc::new(Cluster {
        apis,
        heartbeats: Mutex::new(Vec::new()),
        assignment,
        reqs: tx,
    });
    let c2 = c.clone();
    let factory: ConnectorFactory = Arc::new(move |node: i32, _addr: &str| {
        let c = c2.clone();
        let connector: Connector = Arc::new(move |config: &ConnectionConfig| {
            let c = c.clone();
            let config = config.clone();
            Box::pin(async move {
                let (client, server) = tokio::io::duplex(1 << 20);
                tokio::spawn(serve(node, c, server));
                Connection::new(client, &config).await
            })
        });
        connector
    });
    let pool = Arc::new(BrokerPool::with_connector_factory(
        ConnectionConfig::default(),
        factory,
    ));
    (c, rx, pool)
}

async fn serve(node: i32, c: Arc<Cluster>, io: tokio::io::DuplexStream) {
    let mut peer = ScriptedPeer::new(io);
    peer.handshake(&c.apis).await;
    while let Some(r) = peer.recv_or_eof().await {
        let hb = match &r.request {
            AnyRequest::Kafka(k) => match &**k {
                RequestKind::ShareGroupHeartbeat(h) => Some(h.clone()),
                _ => None,
            },
            _ => None,
        };
        if let Some(h) = hb {
            c.heartbeats.lock().push(h.clone());
            let epoch = if h.member_epoch == -1 {
                -1
            } else {
                h.member_epoch.max(0) + 1
            };
            let assignment = (h.member_epoch == 0).then(|| {
                WireAssignment::default().with_topic_partitions(vec![
                    TopicPartitions::default()
                        .with_topic_id(topic_id())
                        .with_partitions(c.assignment.clone()),
                ])
            });
            let resp = ShareGroupHeartbeatResponse::default()
                .with_member_id(Some(h.member_id.clone()))
                .with_member_epoch(epoch)
                .with_heartbeat_interval_ms(60_000)
                .with_assignment(assignment);
            peer.respond::<ShareGroupHeartbeatRequest>(
                &resp,
                r.header.api_version,
                r.header.correlation_id,
            )
            .await;
            continue;
        }
        let (reply, wait) = oneshot::channel();
        c.reqs.send(Req { node, rx: r, reply }).unwrap();
        let Ok(frame) = wait.await else { return };
        peer.write_raw(&frame).await;
    }
}

fn batch(base: i64, n: i32) -> Bytes {
    let spec = BatchSpec {
        base_offset: base,
        ..BatchSpec::default()
    };
    let recs: Vec<Record> = (0..n)
        .map(|i| {
            Record::new(
                i,
                0,
                None,
                Some(Bytes::from(format!("v{}", base + i as i64))),
            )
        })
        .collect();
    encode_batch(&spec, &recs).unwrap()
}

fn fetch_answer(
    partition: i32,
    records: Option<Bytes>,
    acquired: &[(i64, i64, i16)],
    ack_code: i16,
) -> ShareFetchResponse {
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(15_000)
        .with_responses(vec![
            ShareFetchableTopicResponse::default()
                .with_topic_id(topic_id())
                .with_partitions(vec![
                    PartitionData::default()
                        .with_partition_index(partition)
                        .with_acknowledge_error_code(ack_code)
                        .with_records(records)
                        .with_acquired_records(
                            acquired
                                .iter()
                                .map(|&(f, l, d)| {
                                    AcquiredRecords::default()
                                        .with_first_offset(f)
                                        .with_last_offset(l)
                                        .with_delivery_count(d)
                                })
                                .collect(),
                        ),
                ]),
        ])
}

/// (partition, offset, type) carried by a ShareFetch.
fn fetch_acks(r: &ShareFetchRequest) -> Vec<(i32, i64, i8)> {
    let mut out = Vec::new();
    for t in &r.topics {
        for p in &t.partitions {
            for b in &p.acknowledgement_batches {
                for o in b.first_offset..=b.last_offset {
                    let ty = if b.acknowledge_types.len() == 1 {
                        b.acknowledge_types[0]
                    } else {
                        b.acknowledge_types[(o - b.first_offset) as usize]
                    };
                    out.push((p.partition_index, o, ty));
                }
            }
        }
    }
    out
}

fn ack_acks(r: &ShareAcknowledgeRequest) -> Vec<(i32, i64, i8)> {
    let mut out = Vec::new();
    for t in &r.topics {
        for p in &t.partitions {
            for b in &p.acknowledgement_batches {
                for o in b.first_offset..=b.last_offset {
                    let ty = if b.acknowledge_types.len() == 1 {
                        b.acknowledge_types[0]
                    } else {
                        b.acknowledge_types[(o - b.first_offset) as usize]
                    };
                    out.push((p.partition_index, o, ty));
                }
            }
        }
    }
    out
}

fn consumer(mode: AcknowledgementMode, pool: Arc<BrokerPool>) -> ShareConsumer {
    let config = ShareConsumerConfig::builder("g")
        .acknowledgement_mode(mode)
        .build()
        .unwrap();
    ShareConsumer::with_parts(config, pool, Arc::new(FakeLookup)).unwrap()
}

fn offsets(r: &ShareRecords) -> Vec<i64> {
    r.iter().map(|r| r.offset).collect()
}

#[tokio::test(start_paused = true)]
async fn explicit_flow_session_epochs_gaps_piggy_backed_acks_commit_and_close() {
    let (cl, mut broker, pool) = cluster(vec![0]);
    let mut c = consumer(AcknowledgementMode::Explicit, pool);
    let seen = Arc::new(Mutex::new(Vec::<AcknowledgementCommit>::new()));
    let s2 = seen.clone();
    c.set_acknowledgement_commit_callback(move |a| s2.lock().push(a.clone()));
    c.subscribe(["in"]).unwrap();
    let handle = c.metadata_handle();

    let task = tokio::spawn(async move {
        let first = c.poll(Duration::from_secs(10)).await.unwrap();
        assert_eq!(offsets(&first), [0, 1, 2], "3 and 4 are gaps");
        assert_eq!(c.acquisition_lock_timeout_ms(), Some(15_000));
        assert_eq!(c.share_group_metadata().member_epoch(), 1);
        // Explicit mode: no poll before everything is acknowledged.
        assert!(matches!(
            c.poll(Duration::ZERO).await,
            Err(ConsumerError::IllegalState(_))
        ));
        let recs: Vec<_> = first.iter().cloned().collect();
        c.acknowledge(&recs[0], AcknowledgeType::Accept).unwrap();
        c.acknowledge(&recs[1], AcknowledgeType::Release).unwrap();
        c.acknowledge_offset("in", 0, 2, AcknowledgeType::Reject)
            .unwrap();
        let second = c.poll(Duration::ZERO).await.unwrap();
        assert_eq!(offsets(&second), [5, 6]);
        for r in second.iter() {
            c.acknowledge(r, AcknowledgeType::Accept).unwrap();
        }
        let results = c.commit_sync(Duration::from_secs(5)).await.unwrap();
        assert!(results[&tp(0)].is_ok(), "{results:?}");
        c.close(Duration::from_secs(5)).await.unwrap();
        assert!(matches!(
            c.poll(Duration::ZERO).await,
            Err(ConsumerError::Closed)
        ));
        c
    });

    // Opening fetch: epoch 0, the partition listed, no acknowledgements.
    let r = broker.recv().await.unwrap();
    assert_eq!(r.node, 1);
    let f = r.fetch();
    assert_eq!(f.share_session_epoch, 0);
    assert_eq!(
        f.member_id.as_ref().unwrap().as_str(),
        handle.share_group_metadata().member_id()
    );
    assert_eq!(f.max_records, 500);
    assert_eq!(f.topics.len(), 1);
    assert!(fetch_acks(f).is_empty());
    r.answer_fetch(fetch_answer(0, Some(batch(0, 3)), &[(0, 4, 1)], 0));

    // Next fetch: epoch 1, acknowledgements and gaps ride on it.
    let r = broker.recv().await.unwrap();
    let f = r.fetch();
    assert_eq!(f.share_session_epoch, 1);
    assert_eq!(f.max_wait_ms, 0, "poll(0) does not wait");
    assert_eq!(
        fetch_acks(f),
        [(0, 0, 1), (0, 1, 2), (0, 2, 3), (0, 3, 0), (0, 4, 0)]
    );
    r.answer_fetch(fetch_answer(0, Some(batch(5, 2)), &[(5, 6, 1)], 0));

    // commit_sync: ShareAcknowledge at epoch 2.
    let r = broker.recv().await.unwrap();
    let a = r.ack();
    assert_eq!(a.share_session_epoch, 2);
    assert_eq!(ack_acks(a), [(0, 5, 1), (0, 6, 1)]);
    r.answer_ack(ShareAcknowledgeResponse::default().with_responses(vec![
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(topic_id())
                .with_partitions(vec![AckPartitionData::default().with_partition_index(0)]),
        ]));

    // close: the session is closed with epoch -1.
    let r = broker.recv().await.unwrap();
    let a = r.ack();
    assert_eq!(a.share_session_epoch, -1);
    assert!(a.topics.is_empty());
    r.answer_ack(ShareAcknowledgeResponse::default());

    let c = task.await.unwrap();
    let hbs = cl.heartbeats.lock().clone();
    assert_eq!(hbs.first().unwrap().member_epoch, 0, "join");
    assert_eq!(hbs.last().unwrap().member_epoch, -1, "leave");
    assert_eq!(
        hbs.first().unwrap().member_id,
        hbs.last().unwrap().member_id
    );
    let commits = seen.lock().clone();
    let acked: Vec<i64> = commits.iter().flat_map(|c| c.offsets.clone()).collect();
    assert_eq!(
        acked,
        [0, 1, 2, 3, 4, 5, 6],
        "callback saw piggy-backed and committed acks"
    );
    assert!(commits.iter().all(|c| c.error.is_none()));
    assert_eq!(c.metrics().records_polled_total(), 5);
    assert_eq!(c.metrics().acknowledgements_sent_total(), 7);
    assert!(c.metrics().share_group_metadata_fetch_total() >= 2);
    assert_eq!(c.share_group_metadata().member_epoch(), -1);
}

#[tokio::test(start_paused = true)]
async fn implicit_mode_accepts_the_previous_poll_on_the_next_fetch() {
    let (_cl, mut broker, pool) = cluster(vec![0]);
    let mut c = consumer(AcknowledgementMode::Implicit, pool);
    c.subscribe(["in"]).unwrap();
    let task = tokio::spawn(async move {
        let first = c.poll(Duration::from_secs(10)).await.unwrap();
        assert_eq!(offsets(&first), [0, 1]);
        let r = first.iter().next().unwrap().clone();
        assert!(matches!(
            c.acknowledge(&r, AcknowledgeType::Reject),
            Err(ConsumerError::IllegalState(_))
        ));
        let second = c.poll(Duration::ZERO).await.unwrap();
        assert!(second.is_empty());
    });
    let r = broker.recv().await.unwrap();
    r.answer_fetch(fetch_answer(0, Some(batch(0, 2)), &[(0, 1, 1)], 0));
    let r = broker.recv().await.unwrap();
    assert_eq!(fetch_acks(r.fetch()), [(0, 0, 1), (0, 1, 1)]);
    r.answer_fetch(fetch_answer(0, None, &[], 0));
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn aborted_transaction_hands_records_back_and_consumer_never_sends_them() {
    let (_cl, mut broker, pool) = cluster(vec![0]);
    let mut c = consumer(AcknowledgementMode::Explicit, pool);
    c.subscribe(["in"]).unwrap();
    let task = tokio::spawn(async move {
        let first = c.poll(Duration::from_secs(10)).await.unwrap();
        let recs: Vec<_> = first.iter().cloned().collect();
        c.acknowledge_in_transaction(&recs[0], AcknowledgeType::Accept)
            .unwrap();
        c.acknowledge_in_transaction(&recs[1], AcknowledgeType::Reject)
            .unwrap();
        c.acknowledge(&recs[2], AcknowledgeType::Accept).unwrap();
        let txn = c.take_transaction_acknowledgements().unwrap();
        let staged: Vec<_> = txn
            .acknowledgements
            .partitions()
            .flat_map(|(_, a)| a.iter().collect::<Vec<_>>())
            .collect();
        assert_eq!(
            staged,
            [(0, AcknowledgeType::Accept), (1, AcknowledgeType::Reject)]
        );
        assert!(c.poll(Duration::ZERO).await.unwrap().is_empty());
        c.transaction_outcome(txn.id, TransactionOutcome::Aborted)
            .unwrap();
        let again = c.poll(Duration::ZERO).await.unwrap();
        assert_eq!(
            again.as_slice(),
            &recs[..2],
            "same records, same delivery count"
        );
    });
    let r = broker.recv().await.unwrap();
    r.answer_fetch(fetch_answer(0, Some(batch(0, 3)), &[(0, 2, 1)], 0));
    // Offset 2's acceptance waits one fetch for the rest of its acquired
    // range (D39), which went into the transaction instead.
    let r = broker.recv().await.unwrap();
    assert!(fetch_acks(r.fetch()).is_empty());
    r.answer_fetch(fetch_answer(0, None, &[], 0));
    let r = broker.recv().await.unwrap();
    assert_eq!(
        fetch_acks(r.fetch()),
        [(0, 2, 1)],
        "staged offsets are not sent by the consumer (D8)"
    );
    r.answer_fetch(fetch_answer(0, None, &[], 0));
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn one_share_session_per_leader_and_session_errors_reset_the_epoch() {
    let (_cl, mut broker, pool) = cluster(vec![0, 1]);
    let mut c = consumer(AcknowledgementMode::Implicit, pool);
    c.subscribe(["in"]).unwrap();
    let task = tokio::spawn(async move {
        let first = c.poll(Duration::from_secs(10)).await.unwrap();
        assert_eq!(first.len(), 2);
        let _ = c.poll(Duration::ZERO).await.unwrap();
        let _ = c.poll(Duration::ZERO).await.unwrap();
    });
    // Round 1: both leaders at epoch 0, one partition each.
    let mut round = vec![broker.recv().await.unwrap(), broker.recv().await.unwrap()];
    round.sort_by_key(|r| r.node);
    for r in round {
        let f = r.fetch();
        assert_eq!(f.share_session_epoch, 0);
        let p = f.topics[0].partitions[0].partition_index;
        assert_eq!(r.node, 1 + p % 2);
        r.answer_fetch(fetch_answer(p, Some(batch(0, 1)), &[(0, 0, 1)], 0));
    }
    // Round 2: epoch 1 with the acceptance; node 2 says its session is gone.
    let mut round = vec![broker.recv().await.unwrap(), broker.recv().await.unwrap()];
    round.sort_by_key(|r| r.node);
    for r in round {
        assert_eq!(r.fetch().share_session_epoch, 1);
        assert_eq!(fetch_acks(r.fetch()).len(), 1);
        if r.node == 2 {
            r.answer_fetch(
                ShareFetchResponse::default().with_error_code(ErrorCode::SHARE_SESSION_NOT_FOUND.0),
            );
        } else {
            r.answer_fetch(fetch_answer(0, None, &[], 0));
        }
    }
    // Round 3: node 1 moves on to epoch 2; node 2 opens a new session.
    let mut round = vec![broker.recv().await.unwrap(), broker.recv().await.unwrap()];
    round.sort_by_key(|r| r.node);
    assert_eq!(round[0].fetch().share_session_epoch, 2);
    assert_eq!(round[1].fetch().share_session_epoch, 0);
    assert_eq!(
        round[1].fetch().topics.len(),
        1,
        "a new session lists its partitions again"
    );
    for r in round {
        r.answer_fetch(fetch_answer(0, None, &[], 0));
    }
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn commit_async_reports_per_partition_errors_to_handle_and_callback() {
    let (_cl, mut broker, pool) = cluster(vec![0]);
    let mut c = consumer(AcknowledgementMode::Explicit, pool);
    let seen = Arc::new(Mutex::new(Vec::<AcknowledgementCommit>::new()));
    let s2 = seen.clone();
    c.set_acknowledgement_commit_callback(move |a| s2.lock().push(a.clone()));
    c.subscribe(["in"]).unwrap();
    let task = tokio::spawn(async move {
        let first = c.poll(Duration::from_secs(10)).await.unwrap();
        for r in first.iter() {
            c.acknowledge(r, AcknowledgeType::Accept).unwrap();
        }
        let results = c.commit_async().unwrap().await.unwrap();
        match &results[&tp(0)] {
            Err(ConsumerError::Acknowledgement { code, .. }) => {
                assert_eq!(*code, ErrorCode::INVALID_RECORD_STATE)
            }
            other => panic!("{other:?}"),
        }
        // The callback runs on the consumer's task, at the next poll.
        assert!(seen.lock().is_empty());
        assert!(c.poll(Duration::ZERO).await.unwrap().is_empty());
        let seen = seen.lock().clone();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].offsets, [0, 1]);
        assert!(seen[0].error.is_some());
    });
    let r = broker.recv().await.unwrap();
    r.answer_fetch(fetch_answer(0, Some(batch(0, 2)), &[(0, 1, 1)], 0));
    let r = broker.recv().await.unwrap();
    let a = r.ack();
    assert_eq!(a.share_session_epoch, 1);
    assert_eq!(ack_acks(a), [(0, 0, 1), (0, 1, 1)]);
    r.answer_ack(ShareAcknowledgeResponse::default().with_responses(vec![
        ShareAcknowledgeTopicResponse::default()
            .with_topic_id(topic_id())
            .with_partitions(vec![
                AckPartitionData::default()
                    .with_partition_index(0)
                    .with_error_code(ErrorCode::INVALID_RECORD_STATE.0),
            ]),
    ]));
    let r = broker.recv().await.unwrap();
    assert_eq!(r.fetch().share_session_epoch, 2);
    r.answer_fetch(fetch_answer(0, None, &[], 0));
    task.await.unwrap();
}

/// `share.acquire.mode=record_limit` goes out as ShareAcquireMode 1 at
/// ShareFetch v2; the default is batch_optimized (0).
#[tokio::test(start_paused = true)]
async fn record_limit_is_sent_at_v2() {
    let (_cl, mut broker, pool) = cluster(vec![0]);
    let config = ShareConsumerConfig::builder("g")
        .acquire_mode(AcquireMode::RecordLimit)
        .max_poll_records(7)
        .build()
        .unwrap();
    let mut c = ShareConsumer::with_parts(config, pool, Arc::new(FakeLookup)).unwrap();
    c.subscribe(["in"]).unwrap();
    let task = tokio::spawn(async move {
        let first = c.poll(Duration::from_secs(10)).await.unwrap();
        assert_eq!(offsets(&first), [0, 1]);
    });
    let r = broker.recv().await.unwrap();
    assert_eq!(r.rx.header.api_version, 2);
    assert_eq!(r.fetch_v2().acquire_mode(), Some(AcquireMode::RecordLimit));
    assert!(!r.fetch_v2().is_renew_ack);
    assert_eq!(r.fetch().max_records, 7);
    r.answer_fetch(fetch_answer(0, Some(batch(0, 2)), &[(0, 1, 1)], 0));
    task.await.unwrap();
}

/// A broker with ShareFetch v1 only (Kafka 4.1): batch_optimized works at
/// v1; record_limit fails the poll with an error naming the setting.
#[tokio::test(start_paused = true)]
async fn record_limit_against_a_v1_broker_names_the_setting() {
    let v1_only = || {
        all_apis_except(&[])
            .into_iter()
            .map(|(k, min, max)| {
                if k == 78 || k == 79 {
                    (k, min, 1)
                } else {
                    (k, min, max)
                }
            })
            .collect::<Vec<_>>()
    };
    let (_cl, mut broker, pool) = cluster_with(vec![0], v1_only());
    let mut c = consumer(AcknowledgementMode::Implicit, pool);
    c.subscribe(["in"]).unwrap();
    let task = tokio::spawn(async move {
        let first = c.poll(Duration::from_secs(10)).await.unwrap();
        assert_eq!(offsets(&first), [0, 1]);
    });
    let r = broker.recv().await.unwrap();
    assert_eq!(r.rx.header.api_version, 1);
    r.answer_fetch(fetch_answer(0, Some(batch(0, 2)), &[(0, 1, 1)], 0));
    task.await.unwrap();

    let (_cl, _broker, pool) = cluster_with(vec![0], v1_only());
    let config = ShareConsumerConfig::builder("g")
        .acquire_mode(AcquireMode::RecordLimit)
        .build()
        .unwrap();
    let mut c = ShareConsumer::with_parts(config, pool, Arc::new(FakeLookup)).unwrap();
    c.subscribe(["in"]).unwrap();
    let e = c
        .poll(Duration::from_secs(10))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("share.acquire.mode=record_limit") && e.contains("batch_optimized"),
        "{e}"
    );
}

/// A member whose session the broker expired (the process was paused past
/// it) learns so from a ShareFetch answering UNKNOWN_MEMBER_ID: it is not a
/// fatal error; the consumer rejoins (a heartbeat at epoch 0) and fetches
/// again. Found by the chaos test's SIGSTOP pauses: the runtime stopped.
#[tokio::test(start_paused = true)]
async fn a_share_fetch_answering_unknown_member_rejoins_instead_of_failing() {
    let (cl, mut broker, pool) = cluster(vec![0]);
    let mut c = consumer(AcknowledgementMode::Explicit, pool);
    c.subscribe(["in"]).unwrap();
    let task = tokio::spawn(async move {
        let mut got = Vec::new();
        for _ in 0..50 {
            let r = c.poll(Duration::from_millis(200)).await.expect("not fatal");
            got.extend(offsets(&r));
            if !got.is_empty() {
                break;
            }
        }
        got
    });
    let r = broker.recv().await.unwrap();
    let joins_before = cl
        .heartbeats
        .lock()
        .iter()
        .filter(|h| h.member_epoch == 0)
        .count();
    r.answer_fetch(ShareFetchResponse::default().with_error_code(ErrorCode::UNKNOWN_MEMBER_ID.0));
    // The consumer rejoins, then fetches on a new session (it would fail
    // instead, and never fetch again, if the error were fatal).
    let r = tokio::time::timeout(Duration::from_secs(60), broker.recv())
        .await
        .expect("the consumer fetches again after the error")
        .unwrap();
    assert_eq!(r.fetch().share_session_epoch, 0, "a new share session");
    let joins_after = cl
        .heartbeats
        .lock()
        .iter()
        .filter(|h| h.member_epoch == 0)
        .count();
    assert!(
        joins_after > joins_before,
        "rejoined with a heartbeat at epoch 0"
    );
    r.answer_fetch(fetch_answer(0, Some(batch(0, 3)), &[(0, 2, 1)], 0));
    assert_eq!(task.await.unwrap(), vec![0, 1, 2]);
}

/// D38: ShareFetch's MaxBytes is `fetch.max.bytes` bounded by
/// `max.partition.fetch.bytes` for each partition of the request.
#[test]
fn share_fetch_max_bytes_is_bounded_per_partition() {
    // Kafka's defaults, one partition: the per-partition limit.
    assert_eq!(share_fetch_max_bytes(52_428_800, 1_048_576, 1), 1_048_576);
    assert_eq!(share_fetch_max_bytes(52_428_800, 1_048_576, 3), 3_145_728);
    // fetch.max.bytes stays the bound of the whole request.
    assert_eq!(share_fetch_max_bytes(2_000_000, 1_048_576, 3), 2_000_000);
    assert_eq!(
        share_fetch_max_bytes(52_428_800, 1_048_576, 100),
        52_428_800
    );
    // Acknowledgements only: bounded as one partition.
    assert_eq!(share_fetch_max_bytes(52_428_800, 1_048_576, 0), 1_048_576);
    // No overflow at the extremes.
    assert_eq!(
        share_fetch_max_bytes(i32::MAX, i32::MAX, usize::MAX),
        i32::MAX
    );
    assert_eq!(share_fetch_max_bytes(52_428_800, -1, 4), 0);
}

/// D38 on the wire: with Kafka's defaults each leader's ShareFetch asks for
/// 1 MiB per partition it fetches from (two partitions per leader here),
/// and a lower `fetch.max.bytes` bounds the request.
#[tokio::test(start_paused = true)]
async fn share_fetch_asks_for_max_partition_fetch_bytes_per_partition() {
    for (fetch_max_bytes, want) in [(None, 2_097_152), (Some(1_500_000), 1_500_000)] {
        let (_cl, mut broker, pool) = cluster(vec![0, 1, 2, 3]);
        let mut b = ShareConsumerConfig::builder("g");
        if let Some(v) = fetch_max_bytes {
            b = b.fetch_max_bytes(v);
        }
        let mut c =
            ShareConsumer::with_parts(b.build().unwrap(), pool, Arc::new(FakeLookup)).unwrap();
        c.subscribe(["in"]).unwrap();
        let task = tokio::spawn(async move {
            let first = c.poll(Duration::from_secs(10)).await.unwrap();
            assert_eq!(first.len(), 2);
        });
        let mut round = vec![broker.recv().await.unwrap(), broker.recv().await.unwrap()];
        round.sort_by_key(|r| r.node);
        for r in round {
            let f = r.fetch();
            assert_eq!(f.topics[0].partitions.len(), 2);
            assert_eq!(f.max_bytes, want, "node {}", r.node);
            let p = f.topics[0].partitions[0].partition_index;
            r.answer_fetch(fetch_answer(p, Some(batch(0, 1)), &[(0, 0, 1)], 0));
        }
        task.await.unwrap();
    }
}

/// D39 on the wire, implicit mode: a fetch carries the acceptance of an
/// acquired range only once the whole range was handed out, so Kafka's
/// broker never splits it into per-offset states.
/// D49: a full poll whose last records begin an acquired range that goes
/// on in the buffer leaves that range to the next poll, so that what the
/// application acknowledges after each poll covers whole ranges. Without
/// it the first poll hands out 0..=3 and its acceptance covers a part of
/// 3..=5.
#[tokio::test]
async fn a_full_poll_ends_where_an_acquired_range_ends() {
    let (_cl, mut broker, pool) = cluster(vec![0]);
    let config = ShareConsumerConfig::builder("g")
        .max_poll_records(4)
        .build()
        .unwrap();
    let mut c = ShareConsumer::with_parts(config, pool, Arc::new(FakeLookup)).unwrap();
    c.subscribe(["in"]).unwrap();
    let task = tokio::spawn(async move {
        let first = offsets(&c.poll(Duration::from_secs(10)).await.unwrap());
        let second = offsets(&c.poll(Duration::from_secs(10)).await.unwrap());
        let third = offsets(&c.poll(Duration::ZERO).await.unwrap());
        (first, second, third, c)
    });
    // The first fetch acquires two ranges, 0..=2 and 3..=5.
    let r = broker.recv().await.unwrap();
    r.answer_fetch(fetch_answer(
        0,
        Some(batch(0, 6)),
        &[(0, 2, 1), (3, 5, 1)],
        0,
    ));
    // Poll 1 (full before it ended at 2) prefetches, nothing acknowledged
    // yet; poll 2 takes 3..=5
    // from its buffer, and its fetch for more carries the acceptance of
    // 0..=2, whole; poll 3's carries 3..=5, whole.
    let mut acks = Vec::new();
    for _ in 0..3 {
        let r = broker.recv().await.unwrap();
        acks.push(fetch_acks(r.fetch()));
        r.answer_fetch(fetch_answer(0, None, &[], 0));
    }
    let (first, second, third, _c) = task.await.unwrap();
    assert_eq!(
        first,
        [0, 1, 2],
        "the range 3..=5 is left whole to the next poll"
    );
    assert_eq!(second, [3, 4, 5]);
    assert_eq!(third, Vec::<i64>::new());
    assert_eq!(
        acks,
        [
            vec![],
            (0..=2).map(|o| (0, o, 1)).collect::<Vec<_>>(),
            (3..=5).map(|o| (0, o, 1)).collect::<Vec<_>>(),
        ],
        "each poll's acceptances went whole, in order"
    );
}

#[tokio::test(start_paused = true)]
async fn implicit_acceptances_ride_on_a_fetch_by_whole_acquired_ranges() {
    let (_cl, mut broker, pool) = cluster(vec![0]);
    let config = ShareConsumerConfig::builder("g")
        .max_poll_records(3)
        .build()
        .unwrap();
    let mut c = ShareConsumer::with_parts(config, pool, Arc::new(FakeLookup)).unwrap();
    c.subscribe(["in"]).unwrap();
    let task = tokio::spawn(async move {
        let mut polls = Vec::new();
        for _ in 0..3 {
            polls.push(offsets(&c.poll(Duration::from_secs(10)).await.unwrap()));
        }
        // The fourth poll waits for the third one's prefetch.
        polls.push(offsets(&c.poll(Duration::ZERO).await.unwrap()));
        polls
    });
    // Fetch 1 acquires 0..=4; poll 1 hands out 0..=2 and prefetches.
    let r = broker.recv().await.unwrap();
    r.answer_fetch(fetch_answer(0, Some(batch(0, 5)), &[(0, 4, 1)], 0));
    let r = broker.recv().await.unwrap();
    assert!(fetch_acks(r.fetch()).is_empty());
    r.answer_fetch(fetch_answer(0, Some(batch(5, 3)), &[(5, 7, 1)], 0));
    // Poll 2 accepts 0..=2 and hands out 3 and 4 only: 5 would begin the
    // range 5..=7, which goes to poll 3 whole (D49). Its buffer holds a
    // poll, so it fetches nothing, and 0..=2 wait for the rest of their
    // range (D39): no request. Poll 3 accepts 3 and 4, hands out 5..=7,
    // and its prefetch carries the range 0..=4, whole.
    let r = broker.recv().await.unwrap();
    assert_eq!(
        fetch_acks(r.fetch()),
        (0..=4).map(|o| (0, o, 1)).collect::<Vec<_>>()
    );
    r.answer_fetch(fetch_answer(0, Some(batch(8, 1)), &[(8, 8, 1)], 0));
    // Poll 4 hands out 8 and, not full, asks for more at once, carrying
    // 5..=7, whole.
    let r = broker.recv().await.unwrap();
    assert_eq!(
        fetch_acks(r.fetch()),
        (5..=7).map(|o| (0, o, 1)).collect::<Vec<_>>()
    );
    r.answer_fetch(fetch_answer(0, None, &[], 0));
    assert_eq!(
        task.await.unwrap(),
        [vec![0, 1, 2], vec![3, 4], vec![5, 6, 7], vec![8]]
    );
}
