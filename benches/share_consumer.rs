//! Share-consumer throughput against the embedded in-memory broker.
//!
//! `cargo bench --bench share_consumer` (optionally `-- --records N`). For
//! each record size (100 B, 1 KiB) and consumer count (1, 4 in one share
//! group on one partition) it fills a 1-partition topic with N records
//! (loaded before the clock starts), then the consumers poll in explicit
//! mode and ACCEPT every record (acknowledgements ride on the next
//! ShareFetch); the clock stops when every consumer has committed its last
//! acknowledgements (`commit_sync`) and closed. The share partition's start
//! offset is then checked to have moved past all N records. Prints
//! records/s and MB/s (payload only).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sharestream::broker::{Broker, BrokerConfig, BrokerHandle};
use sharestream::client::admin::{AdminClient, AlterConfigOp, NewTopic};
use sharestream::client::share_consumer::{
    AcknowledgementMode, ShareConsumer, ShareConsumerConfig,
};
use sharestream::client::{ConnectionConfig, Producer, ProducerConfig, ProducerRecord};
use sharestream::eos::AcknowledgeType;

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

/// Hard bound of one measurement (the whole bench stays under a minute).
const LIMIT: Duration = Duration::from_secs(12);

async fn load(broker: &BrokerHandle, topic: &str, n: usize, size: usize) {
    let config = ProducerConfig::builder()
        .bootstrap_servers(broker.bootstrap_servers())
        .linger(Duration::from_millis(5))
        .batch_size(64 * 1024)
        .build()
        .expect("config");
    let p = Producer::new(config).await.expect("producer");
    let payload: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let payload = Bytes::from(payload);
    let mut futures = Vec::with_capacity(n);
    for _ in 0..n {
        futures.push(p.send(ProducerRecord::new(topic, payload.clone())).await);
    }
    for f in futures {
        f.await.expect("delivery");
    }
    p.close().await;
}

/// Runs `consumers` share consumers until `n` records are acknowledged;
/// returns the records counted and the elapsed time.
async fn consume(
    broker: &BrokerHandle,
    group: &str,
    topic: &str,
    n: usize,
    consumers: usize,
) -> (usize, Duration) {
    let total = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..consumers {
        let cfg = ShareConsumerConfig::builder(group)
            .bootstrap_servers([broker.bootstrap_servers()])
            .acknowledgement_mode(AcknowledgementMode::Explicit)
            .max_poll_records(500)
            .fetch_max_wait(Duration::from_millis(20))
            .build()
            .expect("config");
        let mut c = ShareConsumer::new(cfg).expect("consumer");
        c.subscribe([topic.to_string()]).expect("subscribe");
        // Joined and assigned before the clock starts.
        while c.assignment().is_empty() {
            let _ = tokio::time::timeout(Duration::from_secs(1), c.membership_changed()).await;
        }
        clients.push(c);
    }
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut tasks = Vec::new();
    for mut c in clients {
        let total = total.clone();
        tasks.push(tokio::spawn(async move {
            while total.load(Ordering::Relaxed) < n && tokio::time::Instant::now() < deadline {
                let records = c.poll(Duration::from_millis(50)).await.expect("poll");
                for r in &records {
                    c.acknowledge(r, AcknowledgeType::Accept).expect("ack");
                }
                total.fetch_add(records.len(), Ordering::Relaxed);
            }
            c.commit_sync(Duration::from_secs(5)).await.expect("commit");
            let _ = c.close(Duration::from_secs(2)).await;
        }));
    }
    for t in tasks {
        t.await.expect("consumer task");
    }
    (total.load(Ordering::Relaxed), start.elapsed())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let records: usize = args
        .iter()
        .position(|a| a == "--records")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let broker = Broker::start(BrokerConfig {
            message_max_bytes: 8 << 20,
            ..BrokerConfig::in_memory()
        })
        .await
        .expect("broker");
        let admin = AdminClient::new(
            vec![broker.bootstrap_servers()],
            ConnectionConfig::default(),
        );
        println!(
            "{:<8} {:>9} {:>10} {:>14} {:>10}",
            "size", "consumers", "records", "records/s", "MB/s"
        );
        for (i, (size, consumers)) in [(100usize, 1usize), (100, 4), (1024, 1), (1024, 4)]
            .into_iter()
            .enumerate()
        {
            let topic = format!("share-bench-{i}");
            let group = format!("share-bench-group-{i}");
            let topic_id = admin
                .create_topic(NewTopic::new(&topic, 1))
                .await
                .expect("topic");
            admin
                .incremental_alter_group_config(
                    &group,
                    &[(
                        "share.auto.offset.reset",
                        AlterConfigOp::Set("earliest".into()),
                    )],
                )
                .await
                .expect("group config");
            let n = if size >= 1024 { records / 4 } else { records };
            load(&broker, &topic, n, size).await;
            let (got, elapsed) = consume(&broker, &group, &topic, n, consumers).await;
            // Every record acknowledged at the broker (the share partition's
            // start offset moved past all of them).
            let spso = broker
                .core()
                .shares()
                .partition_offsets(&group, topic_id, 0)
                .map(|(s, _)| s)
                .unwrap_or(0);
            let secs = elapsed.as_secs_f64();
            println!(
                "{:<8} {:>9} {:>10} {:>14.0} {:>10.1}{}",
                format!("{size} B"),
                consumers,
                got,
                got as f64 / secs,
                (got * size) as f64 / secs / 1e6,
                if got < n || spso < n as i64 {
                    format!("  (incomplete: {got}/{n} polled, SPSO {spso})")
                } else {
                    String::new()
                }
            );
        }
        broker.shutdown().await;
    });
}
