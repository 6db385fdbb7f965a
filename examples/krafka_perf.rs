//! The krafka side of examples/clients_bench.rs: the same load as
//! `share_perf` and `produce_perf`, driven through the public API of the
//! `krafka` crate (a pure-Rust Kafka client, a dev-dependency), one client
//! per process, printing the RESULT line of `perf_common.rs`.
//!
//! ```sh
//! cargo run --release --example krafka_perf -- share-consume \
//!   --bootstrap-server 127.0.0.1:9092 --topic t --group g --num-records 500000
//! cargo run --release --example krafka_perf -- produce \
//!   --bootstrap-server 127.0.0.1:9092 --topic t --num-records 500000 --record-size 100
//! cargo run --release --example krafka_perf -- produce --transaction-records 1000 \
//!   --transactional-id tx-1 --bootstrap-server 127.0.0.1:9092 --topic t --num-records 100000
//! ```
//!
//! Settings are the ones `clients_bench` gives ours: explicit ACCEPT of
//! every record and max.poll.records 500 for the share consumer; acks=all,
//! idempotence, linger 5 ms and batch 16 KiB for the producer. Setup (the
//! group's `share.auto.offset.reset=earliest`, topic creation, a warm-up
//! record) happens before the clock starts, as in our tools.

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

#[path = "perf_common.rs"]
mod perf_common;

use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use krafka::Kafka;
use krafka::admin::{ConfigOp, ConfigResource, NewTopic};
use krafka::producer::Acks;
use krafka::share_consumer::{AcknowledgementMode, AcquireMode};

/// krafka's clients under the load of clients_bench.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One share consumer reads N records, acknowledging each (ACCEPT).
    ShareConsume {
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
        /// max.poll.records.
        #[arg(long, default_value_t = 500)]
        max_poll_records: i32,
        /// share.acquire.mode: batch_optimized or record_limit.
        #[arg(long, default_value = "batch_optimized")]
        acquire_mode: String,
        /// Give up after this long without a record.
        #[arg(long, default_value_t = 20)]
        idle_timeout_secs: u64,
    },
    /// One producer sends N records (optionally in transactions).
    Produce {
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
        /// Records per transaction; 0: no transactions.
        #[arg(long, default_value_t = 0)]
        transaction_records: usize,
        /// transactional.id when `--transaction-records` is set.
        #[arg(long, default_value = "krafka-perf")]
        transactional_id: String,
    },
}

async fn connect(bootstrap: &str) -> Kafka {
    Kafka::builder(bootstrap)
        .connect()
        .await
        .unwrap_or_else(|e| perf_common::fail(&format!("connect: {e}")))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    match Args::parse().command {
        Command::ShareConsume {
            bootstrap_server,
            topic,
            group,
            num_records,
            max_poll_records,
            acquire_mode,
            idle_timeout_secs,
        } => {
            let kafka = connect(&bootstrap_server).await;
            let set = ConfigOp::Set {
                name: "share.auto.offset.reset".into(),
                value: "earliest".into(),
            };
            let results = kafka
                .admin()
                .incremental_alter_configs(
                    [(ConfigResource::group(group.clone()), vec![set])],
                    Default::default(),
                )
                .await
                .expect("IncrementalAlterConfigs");
            for r in results.values() {
                r.as_ref().expect("share.auto.offset.reset=earliest");
            }
            let acquire = match acquire_mode.as_str() {
                "record_limit" => AcquireMode::RecordLimit,
                _ => AcquireMode::BatchOptimized,
            };
            let consumer = kafka
                .share_consumer(group)
                .acknowledgement_mode(AcknowledgementMode::Explicit)
                .max_poll_records(max_poll_records)
                .acquire_mode(acquire)
                .build()
                .await
                .expect("share consumer");
            consumer
                .subscribe([topic.as_str()])
                .await
                .expect("subscribe");
            let (mut records, mut bytes) = (0u64, 0u64);
            let clock = perf_common::Clock::start();
            let mut last = Instant::now();
            while records < num_records {
                let polled = consumer
                    .poll(Duration::from_millis(500))
                    .await
                    .expect("poll");
                if polled.is_empty() {
                    if last.elapsed() > Duration::from_secs(idle_timeout_secs) {
                        perf_common::fail(&format!("stalled after {records} records"));
                    }
                    continue;
                }
                last = Instant::now();
                for r in &polled {
                    records += 1;
                    bytes += r.key.as_ref().map_or(0, |k| k.len()) as u64;
                    bytes += r.value.as_ref().map_or(0, |v| v.len()) as u64;
                    consumer.ack(r).expect("ack");
                }
            }
            consumer.commit().await.expect("commit");
            clock.report(records, bytes);
            consumer.close().await.ok();
        }
        Command::Produce {
            bootstrap_server,
            topic,
            partitions,
            num_records,
            record_size,
            transaction_records,
            transactional_id,
        } => {
            let kafka = connect(&bootstrap_server).await;
            let new = NewTopic::new(topic.clone(), partitions, -1).expect("topic");
            // "Already exists" on a rerun; a real failure shows up below.
            let _ = kafka.admin().create_topics([new], Default::default()).await;
            let builder = kafka
                .producer()
                .acks(Acks::All)
                .idempotent(true)
                .linger(Duration::from_millis(5))
                .batch_size(16 * 1024);
            let payload = perf_common::payload(record_size);
            let record = || krafka::Record::new(topic.clone(), payload.to_vec());
            if transaction_records > 0 {
                let producer = builder
                    .build_transactional(transactional_id)
                    .await
                    .expect("transactional producer");
                producer.begin().expect("begin");
                let _warm_up = producer
                    .send(krafka::Record::new(topic.clone(), &b"warm-up"[..]))
                    .await
                    .expect("warm-up record");
                producer.commit().await.expect("commit warm-up");
                let clock = perf_common::Clock::start();
                let mut sent = 0;
                while sent < num_records {
                    producer.begin().expect("begin");
                    let n = transaction_records.min(num_records - sent);
                    for _ in 0..n {
                        // Not awaited: the commit flushes the transaction
                        // and fails if a record failed.
                        drop(producer.enqueue(record()).await.expect("enqueue"));
                    }
                    producer.commit().await.expect("commit");
                    sent += n;
                }
                let n = num_records as u64;
                clock.report(n, n * record_size as u64);
                producer.close().await.ok();
            } else {
                let producer = builder.build().await.expect("producer");
                let _warm_up = producer
                    .send(krafka::Record::new(topic.clone(), &b"warm-up"[..]))
                    .await
                    .expect("warm-up record");
                let clock = perf_common::Clock::start();
                let mut deliveries = Vec::with_capacity(num_records);
                for _ in 0..num_records {
                    deliveries.push(producer.enqueue(record()).await.expect("enqueue"));
                }
                for d in deliveries {
                    let _metadata = d.await.expect("delivery");
                }
                let n = num_records as u64;
                clock.report(n, n * record_size as u64);
                producer.close().await.ok();
            }
        }
    }
}
