//! Backend-neutral scenarios: sharestream's own clients (AdminClient,
//! Producer, ShareConsumer, the read_committed reader of
//! `runtime::verify`) and the runtime, written once over a bootstrap
//! address and run against either backend:
//!
//! - by default each scenario starts a fresh embedded broker in this process
//!   (`sharestream-embedded`), so `cargo test` (scripts/test.sh) runs them;
//! - with `SHARESTREAM_SCENARIO_BOOTSTRAP=host:port` they all run against
//!   that external broker instead (scripts/interop.sh points it at a real
//!   Apache Kafka from scripts/kafka/start.sh); `SHARESTREAM_SCENARIO_BACKEND`
//!   names it in the matrix (default `external`).
//!
//! Topic and group names carry a per-run suffix, so a long-lived external
//! broker can be reused. Each scenario declares the broker capabilities it
//! needs (share groups, transactions, KIP-1289's TxnShareAcknowledge, or its
//! absence); a scenario whose needs the broker does not meet is `n/a`, not a
//! failure. The outcome of every scenario is written to
//! `target/interop/matrix-<backend>-sharestream-rust.json` (client
//! `sharestream-rust`), which `scripts/interop_matrix.py` merges into
//! docs/INTEROP.md next to the real-client rows.
//!
//! Lock expiry: the share scenario sets the group config
//! `share.record.lock.duration.ms` to 1000 (Kafka's lowest allowed value;
//! scripts/kafka/start.sh lowers `group.share.min.record.lock.duration.ms`
//! to 1000 so Kafka accepts it) and waits 2 s past an acquisition: the
//! broker's timer, not the test's, decides, and waiting longer only makes
//! the expiry more certain.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::json;
use sharestream::broker::group::ShareGroupBrokerConfig;
use sharestream::broker::{Broker, BrokerConfig, BrokerHandle};
use sharestream::client::admin::{AdminClient, AlterConfigOp, NewTopic};
use sharestream::client::share_consumer::config::AcquireMode;
use sharestream::client::share_consumer::{AcknowledgementMode, ShareConsumer};
use sharestream::client::{
    ConnectionConfig, Metadata, Producer, ProducerConfig, ProducerRecord, ShareConsumerConfig,
};
use sharestream::eos::AcknowledgeType;
use sharestream::protocol::records::{Compression, RecordHeader};
use sharestream::runtime::verify::{CommittedRecord, read_committed};
use sharestream::runtime::{
    ExactlyOnceMechanism, ProcessingGuarantee, Runtime, RuntimeConfig, RuntimeError,
};
use sharestream::topology::{Serdes, StreamsBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// API keys behind the capabilities, by Kafka name.
const API_VERSIONS: i16 = 18;
const INIT_PRODUCER_ID: i16 = 22;
const END_TXN: i16 = 26;
const SHARE_GROUP_HEARTBEAT: i16 = 76;
const SHARE_FETCH: i16 = 78;
const SHARE_ACKNOWLEDGE: i16 = 79;
const TXN_SHARE_ACKNOWLEDGE: i16 = 95;

/// What a scenario needs from the broker.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Need {
    /// Share groups (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge).
    ShareGroups,
    /// Transactions (InitProducerId, EndTxn).
    Transactions,
    /// KIP-1289's TxnShareAcknowledge (apiKey 95).
    Kip1289,
    /// A broker WITHOUT apiKey 95 (Apache Kafka; for the embedded backend
    /// the scenario starts a broker at share.version 2).
    NoKip1289,
}

impl Need {
    fn met_by(self, apis: &BTreeSet<i16>) -> bool {
        match self {
            Need::ShareGroups => [SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE]
                .iter()
                .all(|k| apis.contains(k)),
            Need::Transactions => apis.contains(&INIT_PRODUCER_ID) && apis.contains(&END_TXN),
            Need::Kip1289 => apis.contains(&TXN_SHARE_ACKNOWLEDGE),
            Need::NoKip1289 => !apis.contains(&TXN_SHARE_ACKNOWLEDGE),
        }
    }
}

/// The broker a scenario runs against.
struct Env {
    bootstrap: String,
    /// Per-run suffix for topic, group and transactional ids.
    run: String,
    embedded: Option<BrokerHandle>,
    apis: BTreeSet<i16>,
}

impl Env {
    fn name(&self, base: &str) -> String {
        format!("sc-{base}-{}", self.run)
    }

    fn servers(&self) -> Vec<String> {
        vec![self.bootstrap.clone()]
    }

    fn admin(&self) -> AdminClient {
        AdminClient::new(self.servers(), ConnectionConfig::default())
    }

    fn metadata(&self) -> Metadata {
        Metadata::new(self.servers(), ConnectionConfig::default())
    }

    fn producer_config(&self) -> sharestream::client::config::ProducerConfigBuilder {
        ProducerConfig::builder()
            .bootstrap_servers(&self.bootstrap)
            .linger(Duration::from_millis(2))
            .request_timeout(Duration::from_secs(10))
    }

    async fn create_topic(&self, base: &str, partitions: i32) -> String {
        let topic = self.name(base);
        self.admin()
            .create_topic(NewTopic::new(topic.clone(), partitions))
            .await
            .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
        self.metadata()
            .wait_for_topic(&topic, Duration::from_secs(15))
            .await
            .unwrap_or_else(|e| panic!("topic {topic} never appeared in metadata: {e}"));
        topic
    }

    async fn group_config(&self, group: &str, ops: &[(&str, &str)]) {
        let ops: Vec<(&str, AlterConfigOp)> = ops
            .iter()
            .map(|(k, v)| (*k, AlterConfigOp::Set(v.to_string())))
            .collect();
        self.admin()
            .incremental_alter_group_config(group, &ops)
            .await
            .unwrap_or_else(|e| panic!("IncrementalAlterConfigs on group {group}: {e}"));
    }

    async fn committed(&self, topic: &str) -> Vec<CommittedRecord> {
        read_committed(&self.metadata(), topic)
            .await
            .unwrap_or_else(|e| panic!("read_committed {topic}: {e}"))
    }

    async fn shutdown(self) {
        if let Some(h) = self.embedded {
            h.shutdown().await;
        }
    }
}

/// Which embedded broker a scenario wants (ignored for an external one).
#[derive(Clone, Copy)]
enum Flavor {
    /// share.version 3: everything, KIP-1289 included.
    Full,
    /// share.version 2: share groups without TxnShareAcknowledge, like
    /// Apache Kafka.
    WithoutKip1289,
}

fn run_suffix() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    format!("{}-{}", std::process::id(), ms % 100_000_000)
}

fn external() -> Option<(String, String)> {
    let b = std::env::var("SHARESTREAM_SCENARIO_BOOTSTRAP").ok()?;
    let name = std::env::var("SHARESTREAM_SCENARIO_BACKEND").unwrap_or_else(|_| "external".into());
    Some((name, b))
}

async fn advertised(bootstrap: &str) -> BTreeSet<i16> {
    let md = Metadata::new(vec![bootstrap.to_string()], ConnectionConfig::default());
    let conn = async { md.any_broker()?.connection().await }
        .await
        .unwrap_or_else(|e| panic!("cannot reach {bootstrap}: {e}"));
    (0..=200)
        .filter(|k| conn.versions().peer_range(*k).is_some())
        .collect()
}

async fn start_env(flavor: Flavor, run: &str) -> Env {
    if let Some((_, bootstrap)) = external() {
        let apis = advertised(&bootstrap).await;
        return Env {
            bootstrap,
            run: run.to_string(),
            embedded: None,
            apis,
        };
    }
    let share_version = match flavor {
        Flavor::Full => 3,
        Flavor::WithoutKip1289 => 2,
    };
    let handle = Broker::start(BrokerConfig {
        share_version,
        share_groups: ShareGroupBrokerConfig {
            session_timeout_ms: 3_000,
            min_session_timeout_ms: 1_000,
            heartbeat_interval_ms: 300,
            min_heartbeat_interval_ms: 100,
            min_record_lock_duration_ms: 1_000,
            ..ShareGroupBrokerConfig::default()
        },
        ..BrokerConfig::in_memory()
    })
    .await
    .expect("start embedded broker");
    let bootstrap = handle.bootstrap_servers();
    let apis = advertised(&bootstrap).await;
    Env {
        bootstrap,
        run: run.to_string(),
        embedded: Some(handle),
        apis,
    }
}

type Detail = serde_json::Value;
type BoxFut = Pin<Box<dyn Future<Output = Detail> + Send>>;

struct Scenario {
    feature: &'static str,
    needs: &'static [Need],
    flavor: Flavor,
    run: fn(Arc<Env>) -> BoxFut,
}

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            feature: "metadata, leaders, produce to every partition",
            needs: &[],
            flavor: Flavor::Full,
            run: |e| Box::pin(metadata_and_leaders(e)),
        },
        Scenario {
            feature: "produce + fetch with every codec (none, gzip, snappy, lz4, zstd)",
            needs: &[],
            flavor: Flavor::Full,
            run: |e| Box::pin(every_codec(e)),
        },
        Scenario {
            feature: "transaction commit + abort, read_committed reader",
            needs: &[Need::Transactions],
            flavor: Flavor::Full,
            run: |e| Box::pin(transactions_read_committed(e)),
        },
        Scenario {
            feature: "share consumer explicit acks (accept, release, reject), redelivery after lock expiry",
            needs: &[Need::ShareGroups],
            flavor: Flavor::Full,
            run: |e| Box::pin(share_explicit_acks(e)),
        },
        Scenario {
            feature: "share consumer share.acquire.mode=record_limit (ShareFetch v2): one big batch shared by two members",
            needs: &[Need::ShareGroups],
            flavor: Flavor::Full,
            run: |e| Box::pin(share_record_limit(e)),
        },
        Scenario {
            feature: "runtime at_least_once end to end (every input forwarded)",
            needs: &[Need::ShareGroups],
            flavor: Flavor::Full,
            run: |e| Box::pin(runtime_at_least_once(e)),
        },
        Scenario {
            feature: "runtime exactly_once end to end (KIP-1289)",
            needs: &[Need::ShareGroups, Need::Transactions, Need::Kip1289],
            flavor: Flavor::Full,
            run: |e| Box::pin(runtime_exactly_once(e)),
        },
        Scenario {
            feature: "runtime exactly_once through the intent ledger (any broker with share groups and transactions)",
            needs: &[Need::ShareGroups, Need::Transactions],
            flavor: Flavor::Full,
            run: |e| Box::pin(runtime_exactly_once_ledger(e)),
        },
        Scenario {
            feature: "runtime exactly.once.mechanism=kip1289 without apiKey 95: clear start-up error naming the ledger, 95 never sent",
            needs: &[Need::NoKip1289],
            flavor: Flavor::WithoutKip1289,
            run: |e| Box::pin(exactly_once_refused(e)),
        },
    ]
}

// ---------------------------------------------------------------- scenarios

async fn metadata_and_leaders(e: Arc<Env>) -> Detail {
    let partitions = 3;
    let topic = e.create_topic("meta", partitions).await;
    let cluster = e.admin().describe_cluster().await.expect("DescribeCluster");
    assert!(!cluster.brokers.is_empty(), "DescribeCluster: no brokers");
    let md = e.metadata();
    let t = md
        .wait_for_topic(&topic, Duration::from_secs(10))
        .await
        .expect("topic metadata");
    assert_eq!(t.partition_count(), partitions, "partition count");
    for p in 0..partitions {
        let leader = md
            .leader(&topic, p)
            .unwrap_or_else(|| panic!("no leader for {topic}-{p}"));
        assert!(
            cluster
                .brokers
                .iter()
                .any(|b| b.node_id == leader.node_id()),
            "leader {} of {topic}-{p} is not a described broker",
            leader.node_id()
        );
    }
    let producer = Producer::new(e.producer_config().build().unwrap())
        .await
        .expect("producer");
    for round in 0..2 {
        for p in 0..partitions {
            let m = producer
                .send(
                    ProducerRecord::new(topic.clone(), format!("p{p}-r{round}")).with_partition(p),
                )
                .await
                .await
                .unwrap_or_else(|err| panic!("produce to {topic}-{p}: {err}"));
            assert_eq!(m.partition, p, "record went to the partition asked for");
            assert_eq!(m.offset, round as i64, "offsets are dense per partition");
        }
    }
    producer.close().await;
    let got = e.committed(&topic).await;
    assert_eq!(got.len(), 6, "records read back");
    for r in &got {
        let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        assert!(
            v.starts_with(&format!("p{}-", r.partition)),
            "{v} read from partition {}",
            r.partition
        );
    }
    json!({"brokers": cluster.brokers.len(), "partitions": partitions, "records": got.len()})
}

async fn every_codec(e: Arc<Env>) -> Detail {
    let codecs = [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ];
    let mut out = serde_json::Map::new();
    for (name, codec) in codecs {
        let topic = e.create_topic(&format!("codec-{name}"), 1).await;
        let producer = Producer::new(
            e.producer_config()
                .compression(codec)
                .linger(Duration::from_millis(20))
                .build()
                .unwrap(),
        )
        .await
        .expect("producer");
        let n = 200;
        let mut sent = Vec::new();
        let mut futures = Vec::new();
        for i in 0..n {
            // Compressible values with a unique part.
            let value = format!("{name}-{i:04}-{}", "abcdefgh".repeat(16));
            let mut r = ProducerRecord::new(topic.clone(), value.clone())
                .with_key(format!("k{i}"))
                .with_partition(0);
            r.headers = vec![RecordHeader::new(
                "codec",
                Some(Bytes::from(name.to_string())),
            )];
            sent.push(value);
            futures.push(producer.send(r).await);
        }
        for f in futures {
            f.await
                .unwrap_or_else(|err| panic!("{name}: produce failed: {err}"));
        }
        producer.close().await;
        let got = e.committed(&topic).await;
        let values: Vec<String> = got
            .iter()
            .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
            .collect();
        assert_eq!(values, sent, "{name}: values read back in order");
        for (i, r) in got.iter().enumerate() {
            assert_eq!(
                r.key.as_deref(),
                Some(format!("k{i}").as_bytes()),
                "{name}: key"
            );
            assert_eq!(
                r.header_str("codec").as_deref(),
                Some(name),
                "{name}: header"
            );
        }
        out.insert(name.to_string(), json!(got.len()));
    }
    serde_json::Value::Object(out)
}

async fn transactions_read_committed(e: Arc<Env>) -> Detail {
    let topic = e.create_topic("txn", 2).await;
    let producer = Producer::new(
        e.producer_config()
            .transactional_id(e.name("txn-producer"))
            .transaction_timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    )
    .await
    .expect("producer");
    producer
        .init_transactions()
        .await
        .expect("init_transactions");
    let send_all = async |prefix: &str, n: usize| {
        let mut sends = Vec::with_capacity(n);
        for i in 0..n {
            sends.push(
                producer
                    .send(
                        ProducerRecord::new(topic.clone(), format!("{prefix}-{i}"))
                            .with_partition(i as i32 % 2),
                    )
                    .await,
            );
        }
        sends
    };
    for (prefix, n, commit) in [
        ("committed-a", 10, true),
        ("aborted", 7, false),
        ("committed-b", 5, true),
    ] {
        producer.begin_transaction().expect("begin_transaction");
        for f in send_all(prefix, n).await {
            f.await
                .unwrap_or_else(|err| panic!("{prefix}: produce failed: {err}"));
        }
        if commit {
            producer.commit_transaction().await.expect("commit");
        } else {
            producer.abort_transaction().await.expect("abort");
        }
    }
    producer.close().await;
    let got = e.committed(&topic).await;
    let values: BTreeMap<String, usize> = got.iter().fold(BTreeMap::new(), |mut m, r| {
        let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        *m.entry(v).or_default() += 1;
        m
    });
    assert!(
        !values.keys().any(|v| v.starts_with("aborted")),
        "read_committed delivered aborted records: {values:?}"
    );
    for (prefix, n) in [("committed-a", 10), ("committed-b", 5)] {
        for i in 0..n {
            assert_eq!(
                values.get(&format!("{prefix}-{i}")),
                Some(&1),
                "{prefix}-{i} read exactly once"
            );
        }
    }
    assert_eq!(got.len(), 15);
    // The aborted records and the transaction markers still take offsets:
    // 10 + 7 + 5 records and 3 markers per partition over two partitions.
    let max_offset: i64 = got.iter().map(|r| r.offset).max().unwrap_or(-1);
    assert!(
        max_offset >= 10,
        "offsets {max_offset}: aborted records and markers should sit between"
    );
    json!({"committed_read": got.len(), "aborted_read": 0, "max_offset": max_offset})
}

async fn share_explicit_acks(e: Arc<Env>) -> Detail {
    let topic = e.create_topic("share", 1).await;
    let group = e.name("share-group");
    e.group_config(
        &group,
        &[
            ("share.auto.offset.reset", "earliest"),
            ("share.record.lock.duration.ms", "1000"),
        ],
    )
    .await;
    let producer = Producer::new(e.producer_config().build().unwrap())
        .await
        .expect("producer");
    for i in 0..4 {
        producer
            .send(ProducerRecord::new(topic.clone(), format!("r{i}")).with_partition(0))
            .await
            .await
            .expect("produce");
    }
    producer.close().await;

    let mut consumer = ShareConsumer::new(
        ShareConsumerConfig::builder(group.clone())
            .bootstrap_servers(e.servers())
            .acknowledgement_mode(AcknowledgementMode::Explicit)
            .max_poll_records(100)
            .fetch_max_wait(Duration::from_millis(200))
            .build()
            .unwrap(),
    )
    .expect("share consumer");
    consumer.subscribe([topic.clone()]).expect("subscribe");

    // r0, r3: ACCEPT. r2: REJECT. r1: RELEASE on its first delivery; on its
    // second, held past the lock (its late ACCEPT must fail); ACCEPT on the
    // third.
    let mut deliveries: BTreeMap<String, Vec<i16>> = BTreeMap::new();
    let mut late_ack_failed = None;
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut done = false;
    while !done {
        assert!(
            Instant::now() < deadline,
            "share scenario timed out; deliveries so far: {deliveries:?}"
        );
        let records = consumer
            .poll(Duration::from_millis(500))
            .await
            .expect("poll");
        let mut held = None;
        for r in records.iter() {
            let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            let seen = deliveries.entry(v.clone()).or_default();
            seen.push(r.delivery_count);
            let ty = match (v.as_str(), seen.len()) {
                ("r0" | "r3", _) => Some(AcknowledgeType::Accept),
                ("r2", _) => Some(AcknowledgeType::Reject),
                ("r1", 1) => Some(AcknowledgeType::Release),
                ("r1", 2) => None,
                ("r1", _) => {
                    done = true;
                    Some(AcknowledgeType::Accept)
                }
                (other, _) => panic!("unexpected record {other}"),
            };
            match ty {
                Some(ty) => consumer.acknowledge(r, ty).expect("acknowledge"),
                None => held = Some(r.clone()),
            }
        }
        let results = consumer
            .commit_sync(Duration::from_secs(10))
            .await
            .expect("commit_sync");
        for (tp, res) in &results {
            res.as_ref()
                .unwrap_or_else(|err| panic!("acknowledgement of {tp:?} failed: {err}"));
        }
        if let Some(r) = held {
            // Past the 1 s acquisition lock: the broker takes r1 back.
            tokio::time::sleep(Duration::from_secs(2)).await;
            consumer
                .acknowledge(&r, AcknowledgeType::Accept)
                .expect("acknowledge");
            let results = consumer
                .commit_sync(Duration::from_secs(10))
                .await
                .expect("commit_sync");
            late_ack_failed = Some(results.values().any(|res| res.is_err()));
        }
    }
    // Nothing else comes: accepted and rejected records are final.
    let rest = consumer
        .poll(Duration::from_millis(1500))
        .await
        .expect("poll");
    let rest: Vec<String> = rest
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    consumer.close(Duration::from_secs(10)).await.ok();
    assert!(rest.is_empty(), "records after the end: {rest:?}");
    assert_eq!(deliveries.get("r0"), Some(&vec![1]), "r0 accepted once");
    assert_eq!(
        deliveries.get("r2"),
        Some(&vec![1]),
        "r2 rejected, never redelivered"
    );
    assert_eq!(deliveries.get("r3"), Some(&vec![1]), "r3 accepted once");
    assert_eq!(
        deliveries.get("r1"),
        Some(&vec![1, 2, 3]),
        "r1: released, then redelivered after the lock expired"
    );
    assert_eq!(
        late_ack_failed,
        Some(true),
        "an ACCEPT after the lock expired must be refused"
    );
    json!({"deliveries": deliveries, "late_ack_refused": true})
}

async fn share_record_limit(e: Arc<Env>) -> Detail {
    const N: usize = 60;
    const MAX: usize = 7;
    let topic = e.create_topic("record-limit", 1).await;
    let group = e.name("record-limit-group");
    e.group_config(&group, &[("share.auto.offset.reset", "earliest")])
        .await;
    // One batch of N records: a long linger, sent without waiting.
    let producer = Producer::new(
        e.producer_config()
            .linger(Duration::from_millis(200))
            .build()
            .unwrap(),
    )
    .await
    .expect("producer");
    let mut sends = Vec::with_capacity(N);
    for i in 0..N {
        sends.push(
            producer
                .send(ProducerRecord::new(topic.clone(), format!("r{i}")).with_partition(0))
                .await,
        );
    }
    for s in sends {
        s.await.expect("produce");
    }
    producer.close().await;

    // Two members. With record_limit the broker acquires at most MAX
    // records for a fetch, so the first member's poll leaves the rest of
    // the batch to the second. (With batch_optimized the first takes the
    // whole batch and the second gets the same offsets only after the
    // first one's acquisition lock expired: checked to fail here.)
    let member = || {
        ShareConsumer::new(
            ShareConsumerConfig::builder(group.clone())
                .bootstrap_servers(e.servers())
                .acknowledgement_mode(AcknowledgementMode::Explicit)
                .acquire_mode(AcquireMode::RecordLimit)
                .max_poll_records(MAX)
                .fetch_max_wait(Duration::from_millis(200))
                .build()
                .unwrap(),
        )
        .expect("share consumer")
    };
    let (mut a, mut b) = (member(), member());
    a.subscribe([topic.clone()]).expect("subscribe");
    b.subscribe([topic.clone()]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut polled: Vec<Vec<i64>> = Vec::new();
    for c in [&mut a, &mut b] {
        loop {
            assert!(Instant::now() < deadline, "timed out waiting for records");
            let records = c.poll(Duration::from_millis(500)).await.expect("poll");
            if !records.is_empty() {
                polled.push(records.iter().map(|r| r.offset).collect());
                break;
            }
        }
    }
    a.close(Duration::from_secs(10)).await.ok();
    b.close(Duration::from_secs(10)).await.ok();
    let (oa, ob) = (&polled[0], &polled[1]);
    assert!(oa.len() <= MAX && ob.len() <= MAX, "{oa:?} {ob:?}");
    assert!(
        oa.iter().all(|o| !ob.contains(o)),
        "both members got the same offsets: {oa:?} {ob:?}"
    );
    json!({"records": N, "first_member": oa, "second_member": ob})
}

fn forward_topology(group: &str, input: &str, output: &str) -> sharestream::topology::Topology {
    let b = StreamsBuilder::new(group.to_string());
    b.stream::<String, String>(input.to_string(), Serdes::string(), Serdes::string())
        .map_values(|v| format!("out-{v}"))
        .to(output.to_string(), Serdes::string(), Serdes::string());
    b.build().expect("topology")
}

fn runtime_config(e: &Env, app: &str, guarantee: ProcessingGuarantee) -> RuntimeConfig {
    RuntimeConfig {
        application_id: app.to_string(),
        bootstrap_servers: e.servers(),
        processing_guarantee: guarantee,
        num_workers: 2,
        commit_interval: Duration::from_millis(50),
        max_records_per_transaction: 100,
        max_poll_records: 50,
        transaction_timeout: Duration::from_secs(20),
        shutdown_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(10),
        ..RuntimeConfig::default()
    }
}

async fn produce_inputs(e: &Env, topic: &str, partitions: i32, n: usize) {
    let p = Producer::new(e.producer_config().build().unwrap())
        .await
        .expect("producer");
    let mut futures = Vec::with_capacity(n);
    for i in 0..n {
        futures.push(
            p.send(
                ProducerRecord::new(topic.to_string(), format!("v{i}"))
                    .with_key(format!("k{i}"))
                    .with_partition(i as i32 % partitions),
            )
            .await,
        );
    }
    for f in futures {
        f.await.expect("produce input");
    }
    p.close().await;
}

/// Runs the forwarding topology until the output holds every input, and
/// returns how often each output value arrived.
async fn forward_all(
    e: &Env,
    base: &str,
    guarantee: ProcessingGuarantee,
) -> BTreeMap<String, usize> {
    forward_all_with(e, base, guarantee, ExactlyOnceMechanism::Auto)
        .await
        .0
}

/// [`forward_all`] with `exactly.once.mechanism`; also the mechanism the
/// runtime settled on.
async fn forward_all_with(
    e: &Env,
    base: &str,
    guarantee: ProcessingGuarantee,
    mechanism: ExactlyOnceMechanism,
) -> (BTreeMap<String, usize>, ExactlyOnceMechanism) {
    let n = 300;
    let input = e.create_topic(&format!("{base}-in"), 2).await;
    let output = e.create_topic(&format!("{base}-out"), 2).await;
    let group = e.name(&format!("{base}-app"));
    e.group_config(&group, &[("share.auto.offset.reset", "earliest")])
        .await;
    produce_inputs(e, &input, 2, n).await;
    let mut config = runtime_config(e, &group, guarantee);
    config.exactly_once_mechanism = mechanism;
    let handle = Runtime::builder(forward_topology(&group, &input, &output))
        .config(config)
        .start()
        .await
        .unwrap_or_else(|err| panic!("runtime start ({guarantee}): {err}"));
    let used = handle.config().exactly_once_mechanism;
    let md = e.metadata();
    let deadline = Instant::now() + Duration::from_secs(60);
    let counts = loop {
        let got = read_committed(&md, &output).await.expect("read output");
        let counts: BTreeMap<String, usize> = got.iter().fold(BTreeMap::new(), |mut m, r| {
            let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            *m.entry(v).or_default() += 1;
            m
        });
        if (0..n).all(|i| counts.contains_key(&format!("out-v{i}"))) {
            break counts;
        }
        assert!(
            Instant::now() < deadline,
            "{guarantee}: only {} of {n} inputs reached the output",
            counts.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    handle
        .stop()
        .await
        .unwrap_or_else(|err| panic!("runtime stop ({guarantee}): {err}"));
    assert_eq!(counts.len(), n, "no output value that is not an input");
    (counts, used)
}

async fn runtime_at_least_once(e: Arc<Env>) -> Detail {
    let counts = forward_all(&e, "alo", ProcessingGuarantee::AtLeastOnce).await;
    let dup: usize = counts.values().map(|c| c - 1).sum();
    json!({"inputs": counts.len(), "duplicates": dup})
}

async fn runtime_exactly_once(e: Arc<Env>) -> Detail {
    let counts = forward_all(&e, "eos", ProcessingGuarantee::ExactlyOnce).await;
    let dup: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).collect();
    assert!(dup.is_empty(), "exactly_once wrote duplicates: {dup:?}");
    json!({"inputs": counts.len(), "duplicates": 0})
}

async fn runtime_exactly_once_ledger(e: Arc<Env>) -> Detail {
    let (counts, used) = forward_all_with(
        &e,
        "eos-ledger",
        ProcessingGuarantee::ExactlyOnce,
        ExactlyOnceMechanism::Ledger,
    )
    .await;
    assert_eq!(used, ExactlyOnceMechanism::Ledger);
    let dup: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).collect();
    assert!(
        dup.is_empty(),
        "exactly_once (ledger) wrote duplicates: {dup:?}"
    );
    json!({"inputs": counts.len(), "duplicates": 0, "mechanism": "ledger"})
}

/// A TCP proxy in front of the broker that records the API key of every
/// request passing through it.
struct CountingProxy {
    addr: String,
    keys: Arc<Mutex<Vec<i16>>>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let keys = Arc::new(Mutex::new(Vec::new()));
        let k = keys.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let k = k.clone();
                tokio::spawn(async move {
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let back = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut sr, &mut cw).await;
                    });
                    loop {
                        let mut size = [0u8; 4];
                        if cr.read_exact(&mut size).await.is_err() {
                            break;
                        }
                        let len = i32::from_be_bytes(size).max(0) as usize;
                        let mut body = vec![0u8; len];
                        if cr.read_exact(&mut body).await.is_err() {
                            break;
                        }
                        if len >= 2 {
                            k.lock().push(i16::from_be_bytes([body[0], body[1]]));
                        }
                        if sw.write_all(&size).await.is_err() || sw.write_all(&body).await.is_err()
                        {
                            break;
                        }
                    }
                    back.abort();
                });
            }
        });
        Self { addr, keys, task }
    }
}

async fn exactly_once_refused(e: Arc<Env>) -> Detail {
    let proxy = CountingProxy::start(e.bootstrap.clone()).await;
    let group = e.name("eos-refused");
    let input = e.create_topic("eos-refused-in", 1).await;
    let output = e.create_topic("eos-refused-out", 1).await;
    let mut config = runtime_config(&e, &group, ProcessingGuarantee::ExactlyOnce);
    config.bootstrap_servers = vec![proxy.addr.clone()];
    // Forced: `auto` would take the intent ledger here.
    config.exactly_once_mechanism = ExactlyOnceMechanism::Kip1289;
    let started = Runtime::builder(forward_topology(&group, &input, &output))
        .config(config)
        .start()
        .await;
    let keys = proxy.keys.lock().clone();
    proxy.task.abort();
    let err = match started {
        Ok(h) => {
            let _ = h.stop().await;
            panic!("exactly_once (kip1289) started against a broker without TxnShareAcknowledge");
        }
        Err(err) => err,
    };
    let msg = err.to_string();
    assert!(
        matches!(err, RuntimeError::Unsupported(_)),
        "expected the start-up capability error, got: {msg}"
    );
    assert!(
        msg.contains("exactly.once.mechanism=ledger") && msg.contains("apiKey 95"),
        "the error must name the fix: {msg}"
    );
    assert!(
        keys.contains(&API_VERSIONS),
        "the runtime asked ApiVersions through the proxy: {keys:?}"
    );
    assert!(
        !keys.contains(&TXN_SHARE_ACKNOWLEDGE),
        "TxnShareAcknowledge (apiKey 95) was sent: {keys:?}"
    );
    let distinct: BTreeSet<i16> = keys.iter().copied().collect();
    json!({"error": msg, "api_keys_sent": distinct})
}

// ------------------------------------------------------------------ driver

fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into()),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_against_backend() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
    let backend = external()
        .map(|(n, _)| n)
        .unwrap_or_else(|| "sharestream-embedded".into());
    let only = std::env::var("SHARESTREAM_SCENARIO_ONLY").ok();
    let run = run_suffix();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (i, sc) in scenarios().into_iter().enumerate() {
        if let Some(o) = &only
            && !sc.feature.contains(o.as_str())
        {
            continue;
        }
        let started = Instant::now();
        let env = Arc::new(start_env(sc.flavor, &format!("{run}-{i}")).await);
        let unmet: Vec<String> = sc
            .needs
            .iter()
            .filter(|n| !n.met_by(&env.apis))
            .map(|n| format!("{n:?}"))
            .collect();
        let (status, detail, result) = if !unmet.is_empty() {
            (
                "n/a",
                format!("the broker lacks {}", unmet.join(", ")),
                serde_json::Value::Null,
            )
        } else {
            let task = tokio::spawn((sc.run)(env.clone()));
            match tokio::time::timeout(Duration::from_secs(120), task).await {
                Ok(Ok(v)) => ("pass", String::new(), v),
                Ok(Err(join)) => ("fail", panic_text(join), serde_json::Value::Null),
                Err(_) => (
                    "fail",
                    "timed out after 120 s".into(),
                    serde_json::Value::Null,
                ),
            }
        };
        if let Ok(env) = Arc::try_unwrap(env) {
            env.shutdown().await;
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "scenario [{backend}] {status:4} {} ({secs:.1}s) {detail}",
            sc.feature
        );
        if status == "fail" {
            failures.push(format!("{}: {detail}", sc.feature));
        }
        rows.push(json!({
            "client": "sharestream-rust",
            "feature": sc.feature,
            "needs": sc.needs.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>(),
            "status": status,
            "detail": detail,
            "seconds": (secs * 10.0).round() / 10.0,
            "result": result,
        }));
    }
    if only.is_none() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/interop");
        std::fs::create_dir_all(&dir).unwrap();
        let matrix = json!({"backend": backend, "rows": rows});
        std::fs::write(
            dir.join(format!("matrix-{backend}-sharestream-rust.json")),
            serde_json::to_string_pretty(&matrix).unwrap(),
        )
        .unwrap();
    }
    assert!(
        failures.is_empty(),
        "scenario failures against {backend}:\n{}",
        failures.join("\n")
    );
}
