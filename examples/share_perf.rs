//! Share-consumer throughput of sharestream's Rust ShareConsumer against a
//! running broker (Apache Kafka or ours), the counterpart of Kafka's
//! `kafka-share-consumer-perf-test` (org.apache.kafka.tools.ShareConsumerPerformance)
//! for scripts/bench_vs_kafka.sh, and our side of examples/clients_bench.rs.
//!
//! ```sh
//! cargo run --release --example share_perf -- \
//!   --bootstrap-server 127.0.0.1:9092 --topic t --group g --num-records 500000
//! ```
//!
//! It sets the group's `share.auto.offset.reset` to `earliest`
//! (IncrementalAlterConfigs), subscribes one consumer, polls until N records
//! arrived, commits the last acknowledgements (`commit_sync`) and prints the
//! RESULT line of `perf_common.rs`. By default the acknowledgement mode is
//! implicit (Java's default: each poll accepts the previous one's records);
//! `--explicit` acknowledges every record with ACCEPT itself. Other consumer
//! settings go in `--consumer-prop name=value` (repeatable, e.g.
//! `share.acquire.mode=record_limit`). The clock starts at the first poll,
//! as in Kafka's tool; the time to join the group is included there as
//! here.

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

#[path = "perf_common.rs"]
mod perf_common;

use std::time::{Duration, Instant};

use clap::Parser;
use sharestream::client::admin::{AdminClient, AlterConfigOp};
use sharestream::client::share_consumer::{AcknowledgementMode, ShareConsumer};
use sharestream::client::{ConnectionConfig, ShareConsumerConfig};
use sharestream::eos::AcknowledgeType;

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
    /// Explicit acknowledgement: ACCEPT every record (default: implicit).
    #[arg(long)]
    explicit: bool,
    /// A consumer setting, `name=value` (repeatable).
    #[arg(long = "consumer-prop")]
    consumer_props: Vec<String>,
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
    let mode = if args.explicit {
        AcknowledgementMode::Explicit
    } else {
        AcknowledgementMode::Implicit
    };
    let mut config = ShareConsumerConfig::builder(args.group.clone())
        .bootstrap_servers([args.bootstrap_server.clone()])
        .acknowledgement_mode(mode)
        .max_poll_records(args.max_poll_records)
        .build()
        .expect("consumer config");
    for (k, v) in perf_common::parse_props(&args.consumer_props) {
        config.set(&k, &v).expect("--consumer-prop");
    }
    let mut consumer = ShareConsumer::new(config).expect("share consumer");
    consumer.subscribe([args.topic.clone()]).expect("subscribe");
    let (mut records, mut bytes) = (0u64, 0u64);
    let clock = perf_common::Clock::start();
    let mut last = Instant::now();
    while records < args.num_records {
        let polled = consumer
            .poll(Duration::from_millis(500))
            .await
            .expect("poll");
        if polled.is_empty() {
            if last.elapsed() > Duration::from_secs(args.idle_timeout_secs) {
                perf_common::fail(&format!("stalled after {records} records"));
            }
            continue;
        }
        last = Instant::now();
        for r in polled.iter() {
            records += 1;
            bytes += r.key.as_ref().map_or(0, |k| k.len()) as u64;
            bytes += r.value.as_ref().map_or(0, |v| v.len()) as u64;
            if args.explicit {
                consumer
                    .acknowledge(r, AcknowledgeType::Accept)
                    .expect("acknowledge");
            }
        }
    }
    consumer
        .commit_sync(Duration::from_secs(10))
        .await
        .expect("commit_sync");
    clock.report(records, bytes);
    consumer.close(Duration::from_secs(10)).await.ok();
}
