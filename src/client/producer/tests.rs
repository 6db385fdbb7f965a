//! The producer against a scripted broker: retries keep their sequence and
//! refresh metadata; staged share acknowledgements go to the leader in the
//! background and their errors surface at commit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTransactionsResponse, EndTxnRequest, FindCoordinatorRequest,
    FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, ProducerId, RequestKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use uuid::Uuid;

use super::*;
use crate::client::broker_connection::{BrokerPool, Connector, ConnectorFactory};
use crate::client::config::ConnectionConfig;
use crate::client::connection::Connection;
use crate::client::test_peer::{ScriptedPeer, all_apis_except, api_versions_response};
use crate::eos::AcknowledgeType;
use crate::protocol::api::AnyRequest;
use crate::protocol::records::RecordBatchView;
use crate::protocol::txn_share_ack::{
    TxnShareAcknowledgePartitionResponse, TxnShareAcknowledgeResponse,
    TxnShareAcknowledgeTopicResponse,
};

const TOPIC_ID: Uuid = Uuid::from_u128(0x1234);

/// What the scripted broker saw and how it answers.
#[derive(Default)]
struct Script {
    /// (api key, detail) of every request after the handshake.
    log: Vec<(i16, String)>,
    /// Error codes for the next Produce answers (then 0).
    produce_errors: Vec<i16>,
    /// Partition error for TxnShareAcknowledge.
    txn_ack_error: i16,
    /// Error codes for the next InitProducerId answers (then 0).
    init_pid_errors: Vec<i16>,
    next_offset: i64,
    epoch: i16,
    /// When set, each Produce answer waits for one permit (the batch
    /// stays in flight until the test adds one).
    hold_produce: Option<Arc<tokio::sync::Semaphore>>,
    /// Check sequences as Apache Kafka does: any sequence is taken as the
    /// first of a producer it holds no state for, then each batch must
    /// follow the last (else OUT_OF_ORDER_SEQUENCE_NUMBER).
    kafka_sequences: bool,
    /// The last sequence written, for `kafka_sequences`.
    last_sequence: Option<i32>,
    /// Answers to the next DescribeTransactions: (error code, state);
    /// then (0, "CompleteCommit"), or `describe_forever` if set.
    describe: Vec<(i16, &'static str)>,
    describe_forever: Option<&'static str>,
    /// Never answer DescribeTransactions (a coordinator that hangs).
    describe_silent: bool,
    /// Apply this many EndTxn requests (the epoch is bumped) without
    /// answering them (an answer lost, a process paused past its request
    /// timeout).
    end_txn_silent: usize,
}

fn metadata_response() -> MetadataResponse {
    MetadataResponse::default()
        .with_brokers(vec![
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("scripted"))
                .with_port(1),
        ])
        .with_controller_id(BrokerId(1))
        .with_topics(vec![
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("in"))))
                .with_topic_id(TOPIC_ID)
                .with_partitions(vec![
                    MetadataResponsePartition::default()
                        .with_partition_index(0)
                        .with_leader_id(BrokerId(1)),
                ]),
        ])
}

async fn serve(io: tokio::io::DuplexStream, script: Arc<Mutex<Script>>) {
    let mut peer = ScriptedPeer::new(io);
    let mut keys = all_apis_except(&[]);
    keys.retain(|k| k.0 != 26);
    keys.push((26, 0, 5));
    let mut av = api_versions_response(&keys);
    av.finalized_features = vec![ScriptedPeer::<tokio::io::DuplexStream>::finalized(
        "transaction.version",
        2,
    )];
    let req = peer.recv().await;
    peer.respond::<kafka_protocol::messages::ApiVersionsRequest>(
        &av,
        req.header.api_version,
        req.header.correlation_id,
    )
    .await;
    while let Some(req) = peer.recv_or_eof().await {
        let (v, cid) = (req.header.api_version, req.header.correlation_id);
        match req.request {
            AnyRequest::TxnShareAcknowledge(r) => {
                let code = {
                    let mut s = script.lock();
                    s.log.push((
                        95,
                        format!(
                            "group={:?} member={:?}/{} pid={} epoch={} types={:?}",
                            r.group_id,
                            r.member_id,
                            r.member_epoch,
                            r.producer_id,
                            r.producer_epoch,
                            r.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types
                        ),
                    ));
                    s.txn_ack_error
                };
                let resp = TxnShareAcknowledgeResponse {
                    responses: vec![TxnShareAcknowledgeTopicResponse {
                        topic_id: TOPIC_ID,
                        partitions: vec![TxnShareAcknowledgePartitionResponse {
                            partition_index: 0,
                            error_code: code,
                            ..Default::default()
                        }],
                    }],
                    ..Default::default()
                };
                peer.respond::<crate::protocol::txn_share_ack::TxnShareAcknowledgeRequest>(
                    &resp, v, cid,
                )
                .await;
            }
            AnyRequest::ShareFetch(_) | AnyRequest::ShareAcknowledge(_) => {
                panic!("share request sent to the producer's peer")
            }
            AnyRequest::ApiVersions(_) => panic!("a second ApiVersions on one connection"),
            AnyRequest::StreamsGroupHeartbeat(_) | AnyRequest::StreamsGroupDescribe(_) => {
                panic!("the producer sent a streams-group request")
            }
            AnyRequest::Kafka(k) => match *k {
                RequestKind::Metadata(_) => {
                    script.lock().log.push((3, String::new()));
                    peer.respond::<MetadataRequest>(&metadata_response(), v, cid)
                        .await;
                }
                RequestKind::FindCoordinator(_) => {
                    script.lock().log.push((10, String::new()));
                    assert!(v >= 4, "FindCoordinator v{v}");
                    let resp = FindCoordinatorResponse::default().with_coordinators(vec![
                        Coordinator::default()
                            .with_key(StrBytes::from_static_str("tx"))
                            .with_node_id(BrokerId(1))
                            .with_host(StrBytes::from_static_str("scripted"))
                            .with_port(1),
                    ]);
                    peer.respond::<FindCoordinatorRequest>(&resp, v, cid).await;
                }
                RequestKind::InitProducerId(_) => {
                    let code = {
                        let mut s = script.lock();
                        s.log.push((22, String::new()));
                        if s.init_pid_errors.is_empty() {
                            0
                        } else {
                            s.init_pid_errors.remove(0)
                        }
                    };
                    let resp = InitProducerIdResponse::default()
                        .with_error_code(code)
                        .with_producer_id(ProducerId(if code == 0 { 42 } else { -1 }))
                        .with_producer_epoch(if code == 0 { 0 } else { -1 });
                    peer.respond::<InitProducerIdRequest>(&resp, v, cid).await;
                }
                RequestKind::EndTxn(r) => {
                    let (epoch, silent) = {
                        let mut s = script.lock();
                        s.log.push((26, format!("v{v} committed={}", r.committed)));
                        s.epoch += 1;
                        let silent = s.end_txn_silent > 0;
                        s.end_txn_silent = s.end_txn_silent.saturating_sub(1);
                        (s.epoch, silent)
                    };
                    if silent {
                        continue;
                    }
                    let resp = EndTxnResponse::default()
                        .with_producer_id(ProducerId(42))
                        .with_producer_epoch(epoch);
                    peer.respond::<EndTxnRequest>(&resp, v, cid).await;
                }
                RequestKind::Produce(r) => {
                    let records = r.topic_data[0].partition_data[0].records.clone().unwrap();
                    let batch = RecordBatchView::parse_all(records).unwrap().remove(0);
                    let n = batch.records(1 << 20).unwrap().len() as i64;
                    let (code, base) = {
                        let mut s = script.lock();
                        s.log.push((
                            0,
                            format!(
                                "pid={} seq={} n={n} txn={}",
                                batch.producer_id(),
                                batch.base_sequence(),
                                batch.is_transactional()
                            ),
                        ));
                        let mut code = if s.produce_errors.is_empty() {
                            0
                        } else {
                            s.produce_errors.remove(0)
                        };
                        if code == 0 && s.kafka_sequences {
                            let seq = batch.base_sequence();
                            if s.last_sequence.is_some_and(|last| seq != last + 1) {
                                code = ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER.0;
                            } else {
                                s.last_sequence = Some(seq + n as i32 - 1);
                            }
                        }
                        let base = s.next_offset;
                        if code == 0 {
                            s.next_offset += n;
                        }
                        (code, base)
                    };
                    let hold = script.lock().hold_produce.clone();
                    if let Some(h) = hold {
                        h.acquire().await.unwrap().forget();
                    }
                    let resp = ProduceResponse::default().with_responses(vec![
                        TopicProduceResponse::default()
                            .with_name(TopicName(StrBytes::from_static_str("in")))
                            .with_topic_id(TOPIC_ID)
                            .with_partition_responses(vec![
                                PartitionProduceResponse::default()
                                    .with_index(0)
                                    .with_error_code(code)
                                    .with_base_offset(if code == 0 { base } else { -1 }),
                            ]),
                    ]);
                    peer.respond::<ProduceRequest>(&resp, v, cid).await;
                }
                RequestKind::DescribeTransactions(r) => {
                    assert_eq!(r.transactional_ids[0].0.as_str(), "tx");
                    let (code, state) = {
                        let mut s = script.lock();
                        if s.describe_silent {
                            s.log.push((65, "silent".into()));
                            continue;
                        }
                        let answer = if !s.describe.is_empty() {
                            s.describe.remove(0)
                        } else {
                            (0, s.describe_forever.unwrap_or("CompleteCommit"))
                        };
                        s.log.push((65, answer.1.to_string()));
                        answer
                    };
                    let resp =
                        DescribeTransactionsResponse::default().with_transaction_states(vec![
                            TransactionState::default()
                                .with_error_code(code)
                                .with_transactional_id(r.transactional_ids[0].clone())
                                .with_transaction_state(StrBytes::from_static_str(state))
                                .with_producer_id(ProducerId(42)),
                        ]);
                    peer.respond::<DescribeTransactionsRequest>(&resp, v, cid)
                        .await;
                }
                other => panic!("unexpected request {other:?}"),
            },
        }
    }
}

fn scripted_metadata(script: Arc<Mutex<Script>>) -> Arc<Metadata> {
    scripted_metadata_with(script, ConnectionConfig::default())
}

fn scripted_metadata_with(
    script: Arc<Mutex<Script>>,
    connection: ConnectionConfig,
) -> Arc<Metadata> {
    let factory: ConnectorFactory = Arc::new(move |_node, _addr| {
        let script = script.clone();
        let c: Connector = Arc::new(move |config: &ConnectionConfig| {
            let script = script.clone();
            let config = config.clone();
            Box::pin(async move {
                let (client, server) = tokio::io::duplex(1 << 20);
                tokio::spawn(serve(server, script));
                Connection::new(client, &config).await
            })
        });
        c
    });
    let pool = BrokerPool::with_connector_factory(connection, factory);
    Arc::new(
        Metadata::with_pool(vec!["scripted:1".into()], pool).with_retry_backoff(
            crate::client::backoff::BackoffConfig {
                initial: Duration::from_millis(1),
                max: Duration::from_millis(5),
                ..crate::client::backoff::BackoffConfig::retry()
            },
        ),
    )
}

fn config(txn: Option<&str>) -> ProducerConfig {
    let mut b = ProducerConfig::builder()
        .bootstrap_servers("scripted:1")
        .linger(Duration::ZERO)
        .retry_backoff(crate::client::backoff::BackoffConfig {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(5),
            ..crate::client::backoff::BackoffConfig::retry()
        });
    if let Some(t) = txn {
        b = b.transactional_id(t);
    }
    b.build().unwrap()
}

fn log_of(script: &Mutex<Script>, key: i16) -> Vec<String> {
    script
        .lock()
        .log
        .iter()
        .filter(|(k, _)| *k == key)
        .map(|(_, d)| d.clone())
        .collect()
}

#[tokio::test]
async fn retried_batch_keeps_its_sequence_and_refreshes_metadata() {
    let script = Arc::new(Mutex::new(Script {
        produce_errors: vec![ErrorCode::NOT_LEADER_OR_FOLLOWER.0],
        ..Script::default()
    }));
    let p = Producer::with_metadata(config(None), scripted_metadata(script.clone()))
        .await
        .unwrap();
    let a = p.send(ProducerRecord::new("in", "a")).await.await.unwrap();
    assert_eq!(a.offset, 0);
    let b = p.send(ProducerRecord::new("in", "b")).await.await.unwrap();
    assert_eq!(b.offset, 1);
    let produces = log_of(&script, 0);
    assert_eq!(
        produces,
        vec![
            "pid=42 seq=0 n=1 txn=false",
            "pid=42 seq=0 n=1 txn=false",
            "pid=42 seq=1 n=1 txn=false"
        ],
        "the retry reuses sequence 0; nothing is re-sequenced"
    );
    // NOT_LEADER_OR_FOLLOWER made the client refresh metadata between the
    // failed attempt and its retry.
    let keys: Vec<i16> = script.lock().log.iter().map(|(k, _)| *k).collect();
    let first = keys.iter().position(|&k| k == 0).unwrap();
    let second = first + 1 + keys[first + 1..].iter().position(|&k| k == 0).unwrap();
    assert!(keys[first..second].contains(&3), "{keys:?}");
}

#[tokio::test]
async fn idempotent_init_producer_id_retries_while_the_coordinator_loads() {
    // A freshly started Kafka answers COORDINATOR_LOAD_IN_PROGRESS while it
    // loads its transaction state log.
    let script = Arc::new(Mutex::new(Script {
        init_pid_errors: vec![ErrorCode::COORDINATOR_LOAD_IN_PROGRESS.0; 2],
        ..Script::default()
    }));
    let p = Producer::with_metadata(config(None), scripted_metadata(script.clone()))
        .await
        .unwrap();
    assert_eq!(p.producer_id_and_epoch(), (42, 0));
    assert_eq!(log_of(&script, 22).len(), 3, "two retries, then success");

    // A non-retriable answer fails at once.
    let script = Arc::new(Mutex::new(Script {
        init_pid_errors: vec![ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0],
        ..Script::default()
    }));
    let Err(e) = Producer::with_metadata(config(None), scripted_metadata(script.clone())).await
    else {
        panic!("authorization failure is fatal");
    };
    assert!(
        e.to_string().contains("CLUSTER_AUTHORIZATION_FAILED"),
        "{e}"
    );
    assert_eq!(log_of(&script, 22).len(), 1);
}

fn acks(ty: AcknowledgeType) -> BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>> {
    BTreeMap::from([(
        TopicIdPartition {
            topic_id: TOPIC_ID,
            topic: "in".into(),
            partition: 0,
        },
        vec![AcknowledgementBatch {
            first_offset: 10,
            last_offset: 12,
            acknowledge_types: vec![ty],
        }],
    )])
}

#[tokio::test]
async fn staged_acknowledgements_are_sent_before_end_txn() {
    let script = Arc::new(Mutex::new(Script::default()));
    let p = Producer::with_metadata(config(Some("tx")), scripted_metadata(script.clone()))
        .await
        .unwrap();
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    let out = p.send(ProducerRecord::new("in", "out")).await;
    let group = ShareGroupMetadata::new("g", "m-1", 3);
    p.send_share_acknowledgements_to_transaction(acks(AcknowledgeType::Accept), &group)
        .await
        .unwrap();
    p.commit_transaction().await.unwrap();
    out.await.unwrap();
    assert_eq!(
        log_of(&script, 95),
        vec![r#"group=Some("g") member=Some("m-1")/3 pid=42 epoch=0 types=[1]"#]
    );
    assert_eq!(log_of(&script, 0), vec!["pid=42 seq=0 n=1 txn=true"]);
    assert_eq!(log_of(&script, 26), vec!["v5 committed=true"]);
    let keys: Vec<i16> = script.lock().log.iter().map(|(k, _)| *k).collect();
    let end = keys.iter().position(|&k| k == 26).unwrap();
    assert!(keys[..end].contains(&95) && keys[..end].contains(&0));
    assert_eq!(
        p.producer_id_and_epoch(),
        (42, 1),
        "EndTxn v5's epoch is adopted"
    );
    assert_eq!(p.metrics().get("share-ack-txn-send-total"), Some(1.0));
    assert_eq!(p.metrics().get("share-ack-txn-send-error-total"), Some(0.0));
    assert!(p.metrics().get("share-ack-txn-send-rate").unwrap() > 0.0);

    // The next transaction restarts sequences under the new epoch.
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("in", "next"))
        .await
        .await
        .unwrap();
    p.commit_transaction().await.unwrap();
    assert_eq!(log_of(&script, 0)[1], "pid=42 seq=0 n=1 txn=true");
}

#[tokio::test]
async fn staging_errors_surface_at_commit_as_abortable() {
    let script = Arc::new(Mutex::new(Script {
        txn_ack_error: ErrorCode::INVALID_RECORD_STATE.0,
        ..Script::default()
    }));
    let p = Producer::with_metadata(config(Some("tx")), scripted_metadata(script.clone()))
        .await
        .unwrap();
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    let group = ShareGroupMetadata::new("g", "m-1", 3);
    // Staging returns once enqueued ...
    p.send_share_acknowledgements_to_transaction(acks(AcknowledgeType::Reject), &group)
        .await
        .unwrap();
    // ... and its error comes out of the commit, which sends no EndTxn.
    let e = p.commit_transaction().await.unwrap_err();
    assert!(e.is_abortable() && !e.is_fatal(), "{e}");
    assert_eq!(e.code(), Some(ErrorCode::INVALID_RECORD_STATE));
    assert!(log_of(&script, 26).is_empty());
    assert_eq!(p.metrics().get("share-ack-txn-send-error-total"), Some(1.0));
    p.abort_transaction().await.unwrap();
    assert_eq!(log_of(&script, 26), vec!["v5 committed=false"]);
    assert_eq!(p.transaction_state(), TxnState::Ready);

    // A fatal staging error (fenced) makes the producer unusable.
    script.lock().txn_ack_error = ErrorCode::PRODUCER_FENCED.0;
    p.begin_transaction().unwrap();
    p.send_share_acknowledgements_to_transaction(acks(AcknowledgeType::Accept), &group)
        .await
        .unwrap();
    let e = p.commit_transaction().await.unwrap_err();
    assert!(e.is_fatal(), "{e}");
    assert!(p.abort_transaction().await.unwrap_err().is_fatal());
    let _ = ApiKey::Produce;
}

// ---- buffer.memory and max.block.ms ----

/// A value of `n` bytes: `record_size` 21 + n.
fn sized(n: usize) -> ProducerRecord {
    ProducerRecord::new("in", vec![b'x'; n])
}

fn held() -> (Arc<Mutex<Script>>, Arc<tokio::sync::Semaphore>) {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let script = Arc::new(Mutex::new(Script {
        hold_produce: Some(gate.clone()),
        ..Script::default()
    }));
    (script, gate)
}

fn mem_config(txn: Option<&str>, buffer: u64, max_block: Duration) -> ProducerConfig {
    let mut c = config(txn);
    c.buffer_memory = buffer;
    c.max_block = max_block;
    c
}

/// Yields until `cond` holds (the producer's tasks run meanwhile; on
/// paused time no timer fires while tasks are runnable). Panics instead of
/// hanging when it never does.
async fn until(mut cond: impl FnMut() -> bool) {
    for _ in 0..100_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition never held");
}

#[tokio::test(start_paused = true)]
async fn send_waits_for_room_and_proceeds_when_a_batch_completes() {
    let (script, gate) = held();
    let p = Producer::with_metadata(
        mem_config(None, 300, Duration::from_secs(60)),
        scripted_metadata(script.clone()),
    )
    .await
    .unwrap();
    let m = p.buffer_memory();
    assert_eq!(m.total(), 300);
    // Two records of 121 bytes fit; both go out and stay in flight.
    let a = p.send(sized(100)).await;
    let b = p.send(sized(100)).await;
    assert_eq!(m.available(), 300 - 242);
    until(|| log_of(&script, 0).len() == 1).await;
    // The third does not fit: `send` itself waits.
    let mut third = Box::pin(p.send(sized(100)));
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut third)
            .await
            .is_err(),
        "send returned without room in buffer.memory"
    );
    assert_eq!(m.waiting(), 1);
    // The first batch completes: its bytes come back and the send goes on.
    gate.add_permits(1);
    let c = third.await;
    assert_eq!(m.waiting(), 0);
    gate.add_permits(100);
    let offsets = [a.await.unwrap(), b.await.unwrap(), c.await.unwrap()].map(|md| md.offset);
    assert_eq!(offsets, [0, 1, 2], "records keep their order");
    assert_eq!(m.available(), 300, "every byte came back");
    assert_eq!(p.metrics().get("buffer-available-bytes"), Some(300.0));
    assert_eq!(p.metrics().get("buffer-total-bytes"), Some(300.0));
}

#[tokio::test(start_paused = true)]
async fn send_fails_after_max_block_naming_the_settings() {
    let (script, gate) = held();
    let p = Producer::with_metadata(
        mem_config(None, 300, Duration::from_millis(1500)),
        scripted_metadata(script.clone()),
    )
    .await
    .unwrap();
    let a = p.send(sized(100)).await;
    let b = p.send(sized(100)).await;
    let t0 = tokio::time::Instant::now();
    let e = p.send(sized(100)).await.await.unwrap_err();
    assert!(t0.elapsed() >= Duration::from_millis(1500), "gave up early");
    assert!(
        matches!(
            e,
            ProducerError::BufferExhausted {
                record_bytes: 121,
                buffer_memory: 300,
                available: 58,
                max_block_ms: 1500
            }
        ),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("buffer.memory") && text.contains("max.block.ms"),
        "{text}"
    );
    assert!(!e.is_fatal() && !e.is_abortable());
    assert_eq!(p.metrics().get("buffer-exhausted-total"), Some(1.0));
    // The failed send reserved nothing; the others complete normally.
    assert_eq!(p.buffer_memory().available(), 58);
    gate.add_permits(100);
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(p.buffer_memory().available(), 300);
}

#[tokio::test(start_paused = true)]
async fn a_record_larger_than_buffer_memory_fails_at_once() {
    let script = Arc::new(Mutex::new(Script::default()));
    let p = Producer::with_metadata(
        mem_config(None, 100, Duration::from_secs(60)),
        scripted_metadata(script.clone()),
    )
    .await
    .unwrap();
    let t0 = tokio::time::Instant::now();
    let e = p.send(sized(80)).await.await.unwrap_err();
    assert_eq!(
        t0.elapsed(),
        Duration::ZERO,
        "no waiting for a record that never fits"
    );
    assert!(
        matches!(
            e,
            ProducerError::RecordTooLarge {
                record_bytes: 101,
                buffer_memory: 100
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("buffer.memory"), "{e}");
    assert!(log_of(&script, 0).is_empty(), "nothing was produced");
    assert_eq!(p.buffer_memory().available(), 100);
    // One that fits exactly goes through.
    p.send(sized(79)).await.await.unwrap();
    assert_eq!(p.buffer_memory().available(), 100);
}

#[tokio::test(start_paused = true)]
async fn memory_comes_back_after_failed_batches() {
    // A non-retriable answer fails the batch; retriable ones retry it
    // (with its reservation) until it succeeds.
    let script = Arc::new(Mutex::new(Script {
        produce_errors: vec![
            ErrorCode::MESSAGE_TOO_LARGE.0,
            ErrorCode::NOT_LEADER_OR_FOLLOWER.0,
            ErrorCode::REQUEST_TIMED_OUT.0,
        ],
        ..Script::default()
    }));
    let p = Producer::with_metadata(
        mem_config(None, 1000, Duration::from_secs(60)),
        scripted_metadata(script.clone()),
    )
    .await
    .unwrap();
    let e = p.send(sized(100)).await.await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::MESSAGE_TOO_LARGE), "{e}");
    assert_eq!(p.buffer_memory().available(), 1000);
    p.send(sized(100)).await.await.unwrap();
    assert_eq!(
        log_of(&script, 0).len(),
        4,
        "one failure, two retries, one success"
    );
    assert_eq!(p.buffer_memory().available(), 1000);
}

#[tokio::test(start_paused = true)]
async fn memory_comes_back_on_abort_and_a_failed_send_makes_the_transaction_abortable() {
    let (script, gate) = held();
    let mut c = mem_config(Some("tx"), 300, Duration::from_millis(500));
    // Records linger: the abort finds them still queued.
    c.linger = Duration::from_secs(3600);
    let p = Producer::with_metadata(c, scripted_metadata(script.clone()))
        .await
        .unwrap();
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    let a = p.send(sized(100)).await;
    let b = p.send(sized(100)).await;
    assert_eq!(p.buffer_memory().available(), 58);
    // The third waits; waiting ends the lingering (both go out, held in
    // flight by the broker), then max.block.ms runs out.
    let e = p.send(sized(100)).await.await.unwrap_err();
    assert!(matches!(e, ProducerError::BufferExhausted { .. }), "{e:?}");
    assert_eq!(
        log_of(&script, 0).len(),
        1,
        "the waiting send flushed the batch"
    );
    let e = p.commit_transaction().await.unwrap_err();
    assert!(e.is_abortable(), "{e}");
    // Queued records are failed by the abort; in-flight ones complete.
    let d = p.send(sized(100)).await;
    assert!(d.await.is_err(), "no send after the transaction failed");
    gate.add_permits(100);
    p.abort_transaction().await.unwrap();
    let _ = (a.await, b.await);
    assert_eq!(p.buffer_memory().available(), 300);

    // Queued (lingering) records of an aborted transaction give their
    // bytes back.
    p.begin_transaction().unwrap();
    let q = p.send(sized(100)).await;
    assert_eq!(p.buffer_memory().available(), 179);
    p.abort_transaction().await.unwrap();
    assert!(q.await.is_err());
    assert_eq!(p.buffer_memory().available(), 300);
}

#[tokio::test(start_paused = true)]
async fn close_fails_waiting_sends_and_returns_every_byte() {
    let (script, gate) = held();
    let p = Producer::with_metadata(
        mem_config(None, 300, Duration::from_secs(60)),
        scripted_metadata(script.clone()),
    )
    .await
    .unwrap();
    let a = p.send(sized(100)).await;
    let b = p.send(sized(100)).await;
    let waiting = tokio::spawn({
        let p = p.clone();
        async move { p.send(sized(100)).await.await }
    });
    until(|| p.buffer_memory().waiting() == 1).await;
    let memory_view = p.clone();
    let closing = tokio::spawn(p.clone().close());
    let e = waiting.await.unwrap().unwrap_err();
    assert!(matches!(e, ProducerError::Closed), "{e:?}");
    gate.add_permits(100);
    closing.await.unwrap();
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(memory_view.buffer_memory().available(), 300);
    assert!(matches!(
        memory_view.send(sized(1)).await.await,
        Err(ProducerError::Closed)
    ));
}

/// What an application holds per record until it awaits the delivery: the
/// future (two words) and its channel, whose payload is a
/// `RecordMetadata` or a boxed error.
#[test]
fn per_record_delivery_state_stays_small() {
    assert_eq!(std::mem::size_of::<DeliveryFuture>(), 16);
    assert!(
        std::mem::size_of::<Outcome>() <= std::mem::size_of::<RecordMetadata>() + 8,
        "{} vs {}",
        std::mem::size_of::<Outcome>(),
        std::mem::size_of::<RecordMetadata>()
    );
}

/// Apache Kafka takes any sequence as the first one of a producer id it
/// holds no state for. The first batch of a partition therefore goes alone:
/// a second batch sent behind a first one that is then refused (a partition
/// just created, not yet served) would be written as the producer's first,
/// and the first could never be written after it (seen on Kafka 4.4 as
/// OUT_OF_ORDER_SEQUENCE_NUMBER when loading a new topic).
#[tokio::test(start_paused = true)]
async fn the_first_batch_of_a_partition_goes_alone() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let script = Arc::new(Mutex::new(Script {
        hold_produce: Some(gate.clone()),
        produce_errors: vec![ErrorCode::NOT_LEADER_OR_FOLLOWER.0],
        kafka_sequences: true,
        ..Script::default()
    }));
    let p = Producer::with_metadata(config(None), scripted_metadata(script.clone()))
        .await
        .unwrap();
    // Two batches (a record each: two do not fit in one 16 KiB batch).
    let a = p.send(sized(10_000)).await;
    until(|| log_of(&script, 0).len() == 1).await;
    let b = p.send(sized(10_000)).await;
    // Whatever went out behind the first batch is on the wire by now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    gate.add_permits(100);
    let a = a.await.expect("the first batch is written after its retry");
    let b = b.await.expect("the second batch follows it");
    assert_eq!((a.offset, b.offset), (0, 1), "in order");
    assert_eq!(
        log_of(&script, 0),
        vec![
            "pid=42 seq=0 n=1 txn=false",
            "pid=42 seq=0 n=1 txn=false",
            "pid=42 seq=1 n=1 txn=false"
        ]
    );
}

/// The sender queues a request on the connection itself while a slot is
/// free, and through the broker's dispatcher once none is. With two slots
/// on the connection and five batches allowed in flight per partition, the
/// requests take both ways in turn; the broker, which checks sequences as
/// Kafka does, must see every batch once and in order.
#[tokio::test(start_paused = true)]
async fn batches_keep_their_order_when_the_connection_runs_out_of_slots() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let script = Arc::new(Mutex::new(Script {
        hold_produce: Some(gate.clone()),
        kafka_sequences: true,
        ..Script::default()
    }));
    let connection = ConnectionConfig::default().with_max_in_flight_requests(2);
    let p = Producer::with_metadata(
        config(None),
        scripted_metadata_with(script.clone(), connection),
    )
    .await
    .unwrap();
    let first = p.send(sized(10_000)).await;
    gate.add_permits(1);
    assert_eq!(first.await.unwrap().offset, 0);
    const N: usize = 12;
    let mut futures = Vec::new();
    for _ in 0..N {
        futures.push(p.send(sized(10_000)).await);
    }
    // Let the requests pile up behind the two slots, then free the broker
    // a few answers at a time.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..N {
        gate.add_permits(1);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let mut offsets = Vec::new();
    for f in futures {
        offsets.push(f.await.expect("delivered").offset);
    }
    assert_eq!(offsets, (1..=N as i64).collect::<Vec<_>>(), "in order");
    let expected: Vec<String> = (0..=N)
        .map(|seq| format!("pid=42 seq={seq} n=1 txn=false"))
        .collect();
    assert_eq!(
        log_of(&script, 0),
        expected,
        "each batch once, in sequence order"
    );
}

#[tokio::test(start_paused = true)]
async fn a_batch_refused_unwritten_does_not_break_the_sequence_chain() {
    // Kafka checks sequences: once the batch at sequence 1 is refused
    // (MESSAGE_TOO_LARGE: not written), the broker waits for sequence 1,
    // and the batches sent behind it (2, 3) are refused with
    // OUT_OF_ORDER_SEQUENCE_NUMBER. They must be renumbered and written,
    // not fail, nor every later batch of the partition with them.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let script = Arc::new(Mutex::new(Script {
        hold_produce: Some(gate.clone()),
        produce_errors: vec![0, ErrorCode::MESSAGE_TOO_LARGE.0],
        kafka_sequences: true,
        ..Script::default()
    }));
    let p = Producer::with_metadata(config(None), scripted_metadata(script.clone()))
        .await
        .unwrap();
    let first = p.send(sized(10_000)).await;
    gate.add_permits(1);
    assert_eq!(first.await.unwrap().offset, 0);
    let a = p.send(sized(10_000)).await;
    let b = p.send(sized(10_000)).await;
    let c = p.send(sized(10_000)).await;
    // Past linger.ms: all three are on the wire (the scripted broker reads
    // the next request only after it answered the one before).
    tokio::time::sleep(Duration::from_secs(1)).await;
    gate.add_permits(100);
    let e = a.await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::MESSAGE_TOO_LARGE), "{e}");
    let (b, c) = (b.await.unwrap(), c.await.unwrap());
    assert_eq!((b.offset, c.offset), (1, 2), "in order, after the gap");
    // And the partition goes on.
    assert_eq!(p.send(sized(10_000)).await.await.unwrap().offset, 3);
    let log = log_of(&script, 0);
    assert_eq!(
        &log[..4],
        &[
            "pid=42 seq=0 n=1 txn=false",
            "pid=42 seq=1 n=1 txn=false",
            "pid=42 seq=2 n=1 txn=false",
            "pid=42 seq=3 n=1 txn=false",
        ]
    );
    assert_eq!(
        &log[4..],
        &[
            "pid=42 seq=1 n=1 txn=false",
            "pid=42 seq=2 n=1 txn=false",
            "pid=42 seq=3 n=1 txn=false",
        ],
        "the two batches behind the gap retried one lower, then the next"
    );
}

#[tokio::test(start_paused = true)]
async fn a_record_larger_than_max_request_size_fails_at_once() {
    let script = Arc::new(Mutex::new(Script::default()));
    let mut c = config(None);
    c.max_request_size = 1000;
    let p = Producer::with_metadata(c, scripted_metadata(script.clone()))
        .await
        .unwrap();
    let e = p.send(sized(2000)).await.await.unwrap_err();
    assert!(
        matches!(
            e,
            ProducerError::RecordTooLargeForRequest {
                max_request_size: 1000,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("max.request.size"), "{e}");
    assert!(log_of(&script, 0).is_empty(), "nothing was produced");
    assert_eq!(p.send(sized(500)).await.await.unwrap().offset, 0);
}

/// The keys of the requests after the handshake, Metadata and
/// FindCoordinator left out.
fn request_keys(script: &Mutex<Script>) -> Vec<i16> {
    script
        .lock()
        .log
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| *k != 3 && *k != 10)
        .collect()
}

/// A transactional producer (`tx`) on the scripted broker, initialised.
async fn initialised(script: &Arc<Mutex<Script>>) -> Producer {
    let p = Producer::with_metadata(config(Some("tx")), scripted_metadata(script.clone()))
        .await
        .unwrap();
    p.init_transactions().await.unwrap();
    p
}

/// Commits a transaction of one record, then sends one in the next: how
/// long after the commit that record was delivered.
async fn held_after_a_commit(script: &Arc<Mutex<Script>>) -> Duration {
    let p = initialised(script).await;
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("in", "first"))
        .await
        .await
        .unwrap();
    p.commit_transaction().await.unwrap();
    next_transaction_held(&p, "second").await
}

/// Begins the next transaction at once and sends `value` in it: how long
/// until that record was delivered.
async fn next_transaction_held(p: &Producer, value: &'static str) -> Duration {
    let ended = Instant::now();
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("in", value))
        .await
        .await
        .unwrap();
    ended.elapsed()
}

/// Runs a first transaction of one record, then a second, and returns
/// the producer.
async fn two_transactions(script: &Arc<Mutex<Script>>) -> Producer {
    let p = initialised(script).await;
    for value in ["first", "second"] {
        p.begin_transaction().unwrap();
        let out = p.send(ProducerRecord::new("in", value)).await;
        p.commit_transaction().await.unwrap();
        out.await.unwrap();
    }
    p
}

#[tokio::test]
async fn the_next_transaction_is_sent_once_the_coordinator_completed_the_last() {
    // Apache Kafka answers EndTxn before its markers are written. A Produce
    // of the next transaction arriving before they are waits 20 ms on the
    // broker, so the producer asks for the state first and sends when the
    // transaction is complete.
    let script = Arc::new(Mutex::new(Script {
        describe: vec![(0, "PrepareCommit"), (0, "PrepareCommit")],
        ..Script::default()
    }));
    let _p = two_transactions(&script).await;
    assert_eq!(
        request_keys(&script)[..8],
        // init; the first transaction: produce, end, 3 probes; the second:
        // its produce, only then, and its end (its probe may still run)
        [22, 0, 26, 65, 65, 65, 0, 26],
        "{:?}",
        script.lock().log
    );
    assert_eq!(
        log_of(&script, 65)[..3],
        ["PrepareCommit", "PrepareCommit", "CompleteCommit"]
    );
}

#[tokio::test(start_paused = true)]
async fn the_first_probe_waits_only_for_a_coordinator_that_answered_before_completing() {
    use super::FIRST_PROBE_DELAY;
    // A coordinator that completes before it answers EndTxn (ours): the
    // probe goes at once, and the next transaction is not held.
    let script = Arc::new(Mutex::new(Script::default()));
    let held = held_after_a_commit(&script).await;
    assert!(held < FIRST_PROBE_DELAY, "held for {held:?}");
    assert_eq!(log_of(&script, 65)[..1], ["CompleteCommit"]);

    // One that answers first (Apache Kafka): after a first probe found
    // the transaction still prepared, later first probes wait the delay,
    // so that they are not all spent on an answer known in advance.
    let script = Arc::new(Mutex::new(Script {
        describe: vec![(0, "PrepareCommit")],
        ..Script::default()
    }));
    let p = two_transactions(&script).await;
    let held = next_transaction_held(&p, "third").await;
    assert!(held >= FIRST_PROBE_DELAY, "held for {held:?}");
    assert_eq!(
        log_of(&script, 65)[..3],
        ["PrepareCommit", "CompleteCommit", "CompleteCommit"]
    );
}

#[tokio::test]
async fn a_coordinator_that_will_not_describe_is_not_asked_again() {
    let script = Arc::new(Mutex::new(Script {
        describe: vec![(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0, "")],
        ..Script::default()
    }));
    let _p = two_transactions(&script).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The refusal ends the hold at once, and the probe is off for good.
    assert_eq!(request_keys(&script), vec![22, 0, 26, 65, 0, 26]);
}

#[tokio::test(start_paused = true)]
async fn a_transaction_that_stays_prepared_holds_the_next_for_a_bounded_time() {
    let script = Arc::new(Mutex::new(Script {
        describe_forever: Some("PrepareCommit"),
        ..Script::default()
    }));
    let held = held_after_a_commit(&script).await;
    assert!(
        held >= COMPLETION_WAIT_MAX - Duration::from_millis(10) && held <= COMPLETION_WAIT_MAX,
        "held for {held:?}"
    );
    // 1 ms, then 1, 2, 4 and 8 ms pauses: bounded probes, not a request storm.
    let probes = log_of(&script, 65).len();
    assert!((10..=20).contains(&probes), "{probes} probes");
}

#[tokio::test(start_paused = true)]
async fn a_coordinator_that_does_not_answer_holds_the_next_transaction_for_a_bounded_time() {
    let script = Arc::new(Mutex::new(Script {
        describe_silent: true,
        ..Script::default()
    }));
    let held = held_after_a_commit(&script).await;
    // The hold ends at its own limit, not at the probe's request timeout
    // (30 s). Here coordinator and leader are one scripted node, which
    // answers the Produce ahead of the unanswered probe: that poisons the
    // connection, and the batch goes again after a reconnect (up to about
    // 60 ms more). On a cluster, the coordinator hangs on its own broker.
    assert!(
        held >= COMPLETION_WAIT_MAX && held < Duration::from_millis(250),
        "held for {held:?}"
    );
    assert_eq!(log_of(&script, 65), ["silent"]);
}

/// A producer whose transaction timeout (the coordinator calls' retry
/// budget) is shorter than its request timeout, as a process paused in the
/// middle of EndTxn sees it: the budget is gone when the attempt fails.
async fn producer_with_short_budget(script: &Arc<Mutex<Script>>) -> Producer {
    let mut cfg = config(Some("tx"));
    cfg.transaction_timeout = Duration::from_secs(10);
    let connection = ConnectionConfig {
        request_timeout: Duration::from_secs(30),
        ..ConnectionConfig::default()
    };
    let p = Producer::with_metadata(cfg, scripted_metadata_with(script.clone(), connection))
        .await
        .unwrap();
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("in", "out"))
        .await
        .await
        .unwrap();
    p
}

/// EndTxn(commit) applied but unanswered until after the retry budget
/// passed: it is asked once more instead of failing, and the answer to that
/// (a retry of a completed commit) ends the commit.
#[tokio::test(start_paused = true)]
async fn an_unanswered_end_txn_is_asked_once_more_past_the_budget() {
    let script = Arc::new(Mutex::new(Script {
        end_txn_silent: 1,
        ..Script::default()
    }));
    let p = producer_with_short_budget(&script).await;
    p.commit_transaction().await.unwrap();
    assert_eq!(log_of(&script, 26), vec!["v5 committed=true"; 2]);
    assert_eq!(p.producer_id_and_epoch(), (42, 2));
}

/// Unanswered again: the outcome is unknown, which the producer reports as
/// such (fatal to it: an abort now would be refused if the commit
/// happened); it asks no more.
#[tokio::test(start_paused = true)]
async fn an_end_txn_unanswered_twice_past_the_budget_has_an_unknown_outcome() {
    let script = Arc::new(Mutex::new(Script {
        end_txn_silent: 2,
        ..Script::default()
    }));
    let p = producer_with_short_budget(&script).await;
    let e = p.commit_transaction().await.unwrap_err();
    assert!(e.is_outcome_unknown() && e.is_fatal(), "{e}");
    assert!(e.to_string().contains("EndTxn(commit) is unknown"), "{e}");
    assert_eq!(log_of(&script, 26).len(), 2);
    let e = p.abort_transaction().await.unwrap_err();
    assert!(e.is_outcome_unknown(), "{e}");
    assert_eq!(log_of(&script, 26).len(), 2, "no EndTxn(abort) is sent");
}
