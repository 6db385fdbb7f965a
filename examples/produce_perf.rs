//! Producer throughput and memory of sharestream's Rust Producer against a
//! running broker (Apache Kafka or ours), in a process of its own so that
//! its peak RSS is the client's alone; our side of examples/clients_bench.rs.
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
//! acks=all, idempotence, linger.ms=5, batch.size=16384).
//!
//! With `--transaction-records K` (and `--producer-prop
//! transactional.id=..`) the records go in transactions of K records each:
//! begin, K sends, commit (which waits for every delivery), N / K times.
//!
//! It prints the RESULT line of `perf_common.rs`.

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

#[path = "perf_common.rs"]
mod perf_common;

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
    /// Records per transaction (needs `transactional.id`); 0: no
    /// transactions.
    #[arg(long, default_value_t = 0)]
    transaction_records: usize,
    /// A producer setting, `name=value` (repeatable).
    #[arg(long = "producer-prop")]
    producer_props: Vec<String>,
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
    props.extend(perf_common::parse_props(&args.producer_props));
    let config = ProducerConfig::from_properties(props).expect("producer config");
    let producer = Producer::new(config).await.expect("producer");
    let txn = args.transaction_records;
    if txn > 0 {
        producer
            .init_transactions()
            .await
            .expect("init_transactions");
        producer.begin_transaction().expect("begin");
    }
    producer
        .send(ProducerRecord::new(
            &args.topic,
            Bytes::from_static(b"warm-up"),
        ))
        .await
        .await
        .expect("warm-up record");
    if txn > 0 {
        producer.commit_transaction().await.expect("commit warm-up");
    }
    let payload = perf_common::payload(args.record_size);
    let value = || {
        if args.shared_value {
            payload.clone()
        } else {
            Bytes::copy_from_slice(&payload)
        }
    };
    let clock = perf_common::Clock::start();
    if txn > 0 {
        let mut sent = 0;
        while sent < args.num_records {
            producer.begin_transaction().expect("begin");
            let n = txn.min(args.num_records - sent);
            for _ in 0..n {
                // Delivery futures are not awaited: the commit waits for
                // every record of the transaction and fails if one failed.
                drop(
                    producer
                        .send(ProducerRecord::new(&args.topic, value()))
                        .await,
                );
            }
            producer.commit_transaction().await.expect("commit");
            sent += n;
        }
    } else {
        let mut deliveries = Vec::with_capacity(args.num_records);
        for _ in 0..args.num_records {
            deliveries.push(
                producer
                    .send(ProducerRecord::new(&args.topic, value()))
                    .await,
            );
        }
        for d in deliveries {
            d.await.expect("delivery");
        }
    }
    let n = args.num_records as u64;
    clock.report(n, n * args.record_size as u64);
    producer.close().await;
}
