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
//! With `--replay` it is not a producer client but a load generator for
//! measuring brokers (issue #20, item 4): it encodes one record batch of
//! `--replay-batch-bytes` (16 KiB: the batch the producers above fill) once,
//! without a producer id, and sends that same batch again and again to the
//! leader of partition 0 in Produce requests (acks=all) through one
//! connection, 5 requests in flight, until N records (rounded up to whole
//! batches) are acknowledged. Its own CPU per record is a small fraction of
//! any broker's, so the records/s it reaches are the broker's.
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
    /// Replay one pre-encoded batch instead of producing (see above).
    #[arg(long)]
    replay: bool,
    /// The replayed batch's size in bytes, records included.
    #[arg(long, default_value_t = 16384)]
    replay_batch_bytes: usize,
}

fn main() {
    let args = Args::parse();
    // The replay load runs on one thread: its few tasks hand each request
    // to one another, and a second thread would only add wake-ups.
    let rt = if args.replay {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
    .enable_all()
    .build()
    .expect("tokio runtime");
    rt.block_on(run(args));
}

async fn run(args: Args) {
    let admin = AdminClient::new(
        vec![args.bootstrap_server.clone()],
        ConnectionConfig::default(),
    );
    // An error here is "already exists" on a rerun; a real failure shows
    // up as a send error below.
    let _ = admin
        .create_topic(NewTopic::new(&args.topic, args.partitions))
        .await;
    if args.replay {
        replay(&args).await;
        return;
    }
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

/// `--replay`: the same batch, sent until `num_records` are acknowledged.
async fn replay(args: &Args) {
    use kafka_protocol::messages::{
        ProduceRequest, ProduceResponse, TopicName, produce_request::PartitionProduceData,
        produce_request::TopicProduceData,
    };
    use kafka_protocol::protocol::StrBytes;
    use sharestream::client::Metadata;
    use sharestream::client::connection::PendingResponse;
    use sharestream::protocol::records::{BatchSpec, Record, encode_batch};
    use std::collections::VecDeque;
    use std::time::Duration;

    const IN_FLIGHT: usize = 5;
    let metadata = Metadata::new(
        vec![args.bootstrap_server.clone()],
        ConnectionConfig::default(),
    );
    let topic = metadata
        .wait_for_topic(&args.topic, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| perf_common::fail(&format!("metadata: {e}")));
    let leader = metadata
        .leader(&args.topic, 0)
        .unwrap_or_else(|| perf_common::fail("no leader for partition 0"));
    let conn = leader
        .connection()
        .await
        .unwrap_or_else(|e| perf_common::fail(&format!("connect: {e}")));
    // Record overhead in a batch: attributes, deltas, lengths, no key, no
    // headers; about 8 bytes at these sizes. The batch header is 61 bytes.
    let per_batch = ((args.replay_batch_bytes.saturating_sub(61)) / (args.record_size + 8)).max(1);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let value = perf_common::payload(args.record_size);
    let records: Vec<Record> = (0..per_batch)
        .map(|i| Record::new(i as i32, now_ms, None, Some(value.clone())))
        .collect();
    let batch = encode_batch(&BatchSpec::default(), &records).expect("encode the batch");
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(args.topic.clone())))
                .with_topic_id(topic.topic_id)
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch)),
                ]),
        ]);
    let batches = args.num_records.div_ceil(per_batch);
    let check = |resp: ProduceResponse| {
        for t in &resp.responses {
            for p in &t.partition_responses {
                if p.error_code != 0 {
                    perf_common::fail(&format!("Produce error code {}", p.error_code));
                }
            }
        }
    };
    let clock = perf_common::Clock::start();
    let mut pending: VecDeque<PendingResponse<ProduceResponse>> = VecDeque::new();
    for _ in 0..batches {
        if pending.len() >= IN_FLIGHT {
            let r = pending.pop_front().expect("a pending request");
            check(
                r.await
                    .unwrap_or_else(|e| perf_common::fail(&format!("{e}"))),
            );
        }
        let p = conn
            .enqueue(&request)
            .await
            .unwrap_or_else(|e| perf_common::fail(&format!("{e}")));
        pending.push_back(p);
    }
    for r in pending {
        check(
            r.await
                .unwrap_or_else(|e| perf_common::fail(&format!("{e}"))),
        );
    }
    let n = (batches * per_batch) as u64;
    clock.report(n, n * args.record_size as u64);
}
