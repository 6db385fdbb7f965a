//! Producer throughput and memory of sharestream's Rust Producer against a
//! running broker (Apache Kafka or ours), in a process of its own so that
//! its peak RSS is the client's alone.
//!
//! ```sh
//! cargo run --release --example produce_perf -- \
//!   --bootstrap-server 127.0.0.1:9092 --topic t --partitions 1 \
//!   --num-records 1000000 --record-size 100
//! ```
//!
//! It creates the topic if it is missing, sends one warm-up record, then
//! calls `send` N times without awaiting any delivery (every record is
//! handed to the producer at once, as a loop over Java's `send` does) and
//! only then awaits the N delivery futures. Each record gets its own copy of
//! the value unless `--shared-value`. Extra producer settings go in
//! `--producer-prop name=value` (repeatable; the defaults are Java's:
//! acks=all, idempotence, linger.ms=5, batch.size=16384). It prints one line
//! `RESULT records=.. seconds=.. records_per_s=.. mb_per_s=.. peak_rss_mib=..`
//! where the peak RSS is the process's `VmHWM`.

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

use std::time::Instant;

use bytes::Bytes;
use clap::Parser;
use sharestream::client::admin::{AdminClient, NewTopic};
use sharestream::client::{ConnectionConfig, Producer, ProducerConfig, ProducerRecord};

/// Producer throughput and peak RSS against a running broker.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// Broker address.
    #[arg(long)]
    bootstrap_server: String,
    /// Topic to write (created with `--partitions` if missing).
    #[arg(long)]
    topic: String,
    /// Partitions of the topic when it is created.
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Records to send.
    #[arg(long)]
    num_records: usize,
    /// Value size in bytes (no key).
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// Send one shared value buffer in every record instead of a copy per
    /// record (an application usually serializes each record on its own).
    #[arg(long)]
    shared_value: bool,
    /// A producer setting, `name=value` (repeatable).
    #[arg(long = "producer-prop")]
    producer_props: Vec<String>,
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = Args::parse();
    let admin = AdminClient::new(
        vec![args.bootstrap_server.clone()],
        ConnectionConfig::default(),
    );
    // An error here is "already exists" on a rerun; a real failure shows
    // up as a send error below.
    let _ = admin
        .create_topic(NewTopic::new(&args.topic, args.partitions))
        .await;
    let mut props = vec![(
        "bootstrap.servers".to_string(),
        args.bootstrap_server.clone(),
    )];
    for p in &args.producer_props {
        let (k, v) = p.split_once('=').expect("--producer-prop name=value");
        props.push((k.to_string(), v.to_string()));
    }
    let config = ProducerConfig::from_properties(props).expect("producer config");
    let producer = Producer::new(config).await.expect("producer");
    producer
        .send(ProducerRecord::new(
            &args.topic,
            Bytes::from_static(b"warm-up"),
        ))
        .await
        .await
        .expect("warm-up record");
    let payload = Bytes::from(
        (0..args.record_size)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>(),
    );
    let start = Instant::now();
    let mut deliveries = Vec::with_capacity(args.num_records);
    for _ in 0..args.num_records {
        let value = if args.shared_value {
            payload.clone()
        } else {
            Bytes::copy_from_slice(&payload)
        };
        deliveries.push(producer.send(ProducerRecord::new(&args.topic, value)).await);
    }
    for d in deliveries {
        d.await.expect("delivery");
    }
    let secs = start.elapsed().as_secs_f64();
    producer.close().await;
    let n = args.num_records as f64;
    println!(
        "RESULT records={} seconds={secs:.3} records_per_s={:.0} mb_per_s={:.1} peak_rss_mib={:.1}",
        args.num_records,
        n / secs,
        n * args.record_size as f64 / secs / 1e6,
        status_kib("VmHWM:") as f64 / 1024.0
    );
}
