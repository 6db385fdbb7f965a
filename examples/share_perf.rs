//! Share-consumer throughput of sharestream's Rust ShareConsumer against a
//! running broker (Apache Kafka or ours), the counterpart of Kafka's
//! `kafka-share-consumer-perf-test` (org.apache.kafka.tools.ShareConsumerPerformance)
//! for scripts/bench_vs_kafka.sh.
//!
//! ```sh
//! cargo run --release --example share_perf -- \
//!   --bootstrap-server 127.0.0.1:9092 --topic t --group g --num-records 500000
//! ```
//!
//! It sets the group's `share.auto.offset.reset` to `earliest`
//! (IncrementalAlterConfigs), subscribes one consumer in implicit
//! acknowledgement mode (Java's default: each poll accepts the previous
//! one's records), polls until N records arrived, commits the last
//! acknowledgements (`commit_sync`) and prints one line
//! `RESULT records=.. bytes=.. seconds=.. records_per_s=.. mb_per_s=..`.
//! The clock starts at the first poll, as in Kafka's tool; the time to join
//! the group is included there as here.

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

use std::time::{Duration, Instant};

use clap::Parser;
use sharestream::client::admin::{AdminClient, AlterConfigOp};
use sharestream::client::share_consumer::{AcknowledgementMode, ShareConsumer};
use sharestream::client::{ConnectionConfig, ShareConsumerConfig};

/// Share-consumer throughput against a running broker.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// Broker address.
    #[arg(long)]
    bootstrap_server: String,
    /// Topic to read.
    #[arg(long)]
    topic: String,
    /// Share group (use a fresh one per run).
    #[arg(long)]
    group: String,
    /// Records to read.
    #[arg(long)]
    num_records: u64,
    /// max.poll.records (Java's default is 500).
    #[arg(long, default_value_t = 500)]
    max_poll_records: usize,
    /// Give up after this long without a record.
    #[arg(long, default_value_t = 20)]
    idle_timeout_secs: u64,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = Args::parse();
    let admin = AdminClient::new(
        vec![args.bootstrap_server.clone()],
        ConnectionConfig::default(),
    );
    admin
        .incremental_alter_group_config(
            &args.group,
            &[(
                "share.auto.offset.reset",
                AlterConfigOp::Set("earliest".into()),
            )],
        )
        .await
        .expect("set share.auto.offset.reset=earliest");
    let config = ShareConsumerConfig::builder(args.group.clone())
        .bootstrap_servers([args.bootstrap_server.clone()])
        .acknowledgement_mode(AcknowledgementMode::Implicit)
        .max_poll_records(args.max_poll_records)
        .build()
        .expect("consumer config");
    let mut consumer = ShareConsumer::new(config).expect("share consumer");
    consumer.subscribe([args.topic.clone()]).expect("subscribe");
    let (mut records, mut bytes) = (0u64, 0u64);
    let start = Instant::now();
    let mut last = start;
    while records < args.num_records {
        let polled = consumer
            .poll(Duration::from_millis(500))
            .await
            .expect("poll");
        if polled.is_empty() {
            if last.elapsed() > Duration::from_secs(args.idle_timeout_secs) {
                println!("RESULT error=stalled records={records}");
                std::process::exit(1);
            }
            continue;
        }
        last = Instant::now();
        for r in polled.iter() {
            records += 1;
            bytes += r.key.as_ref().map_or(0, |k| k.len()) as u64;
            bytes += r.value.as_ref().map_or(0, |v| v.len()) as u64;
        }
    }
    consumer
        .commit_sync(Duration::from_secs(10))
        .await
        .expect("commit_sync");
    let secs = start.elapsed().as_secs_f64();
    consumer.close(Duration::from_secs(10)).await.ok();
    println!(
        "RESULT records={records} bytes={bytes} seconds={secs:.3} records_per_s={:.0} mb_per_s={:.2}",
        records as f64 / secs,
        bytes as f64 / secs / (1024.0 * 1024.0)
    );
}
