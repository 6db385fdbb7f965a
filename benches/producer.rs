//! Producer throughput against the embedded in-memory broker.
//!
//! `cargo bench --bench producer` (optionally `-- --records N`). For each
//! record size (100 B, 1 KiB) and codec (none, lz4) it sends N unkeyed
//! records through one idempotent producer (acks=all, linger.ms=5,
//! batch.size=64 KiB) to a 4-partition topic, waits for every delivery
//! future, and prints records/s and MB/s (payload bytes only).

use std::time::{Duration, Instant};

use bytes::Bytes;
use sharestream::broker::{Broker, BrokerConfig};
use sharestream::client::admin::{AdminClient, NewTopic};
use sharestream::client::{ConnectionConfig, Producer, ProducerConfig, ProducerRecord};
use sharestream::protocol::records::Compression;

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let records: usize = args
        .iter()
        .position(|a| a == "--records")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000);
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
            "{:<8} {:<6} {:>10} {:>14} {:>10}",
            "size", "codec", "records", "records/s", "MB/s"
        );
        for (i, (size, codec)) in [
            (100usize, Compression::None),
            (100, Compression::Lz4),
            (1024, Compression::None),
            (1024, Compression::Lz4),
        ]
        .into_iter()
        .enumerate()
        {
            let topic = format!("bench-{i}");
            admin
                .create_topic(NewTopic::new(&topic, 4))
                .await
                .expect("topic");
            let n = if size >= 1024 { records / 4 } else { records };
            let config = ProducerConfig::builder()
                .bootstrap_servers(broker.bootstrap_servers())
                .linger(Duration::from_millis(5))
                .batch_size(64 * 1024)
                .compression(codec)
                .build()
                .expect("config");
            let p = Producer::new(config).await.expect("producer");
            // Warm-up: metadata and connections.
            p.send(ProducerRecord::new(&topic, Bytes::from(vec![0u8; size])))
                .await
                .await
                .expect("warm-up");
            let payload: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let payload = Bytes::from(payload);
            let start = Instant::now();
            let mut futures = Vec::with_capacity(n);
            for _ in 0..n {
                futures.push(p.send(ProducerRecord::new(&topic, payload.clone())).await);
            }
            for f in futures {
                f.await.expect("delivery");
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{:<8} {:<6} {:>10} {:>14.0} {:>10.1}",
                format!("{size} B"),
                format!("{codec:?}").to_lowercase(),
                n,
                n as f64 / secs,
                (n * size) as f64 / secs / 1e6
            );
            p.close().await;
        }
        broker.shutdown().await;
    });
}
