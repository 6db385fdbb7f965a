//! ShareAcknowledge round-trip latency of the embedded broker under many
//! concurrent share consumers, with the broker on disk and fsyncing every
//! write (docs/BENCHMARKS.md, "Share path under a slow disk").
//!
//! ```sh
//! cargo run --release --example share_ack_latency -- --consumers 16 --commits 100
//! ```
//!
//! It starts an embedded broker in a temporary data directory with
//! `FsyncPolicy::EveryBatch` (`--memory` for no disk), creates a topic with
//! one partition per consumer, produces the records, and runs `--consumers`
//! share consumers of one group at once. Each loops: poll (explicit
//! acknowledgement, `--max-poll-records` records), ACCEPT each record, and
//! `commit_sync`, which is one ShareAcknowledge round trip; those are
//! timed. It prints one line `RESULT consumers=.. commits=.. p50_ms=..
//! p90_ms=.. p99_ms=.. max_ms=.. mean_ms=.. fdatasync_p50_ms=.. load1=..`
//! (fdatasync_p50_ms: the median of 100 appends of 200 bytes, each
//! fdatasynced, to a file in the data directory just before the run, as
//! the disk was then; load1: the 1-minute load average when the run
//! ended).

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

use std::time::{Duration, Instant};

use clap::Parser;
use sharestream::broker::{Broker, BrokerConfig, FsyncPolicy};
use sharestream::client::admin::{AdminClient, AlterConfigOp, NewTopic};
use sharestream::client::share_consumer::{AcknowledgementMode, ShareConsumer};
use sharestream::client::{
    ConnectionConfig, Producer, ProducerConfig, ProducerRecord, ShareConsumerConfig,
};
use sharestream::eos::AcknowledgeType;

/// ShareAcknowledge latency under concurrent share consumers.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// Concurrent share consumers (one partition each).
    #[arg(long, default_value_t = 16)]
    consumers: usize,
    /// Timed commits per consumer.
    #[arg(long, default_value_t = 100)]
    commits: usize,
    /// Records per poll (and so per acknowledgement).
    #[arg(long, default_value_t = 5)]
    max_poll_records: usize,
    /// Keep the broker in memory (no share-state log at all).
    #[arg(long)]
    memory: bool,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = if args.memory {
        BrokerConfig::in_memory()
    } else {
        BrokerConfig {
            fsync: FsyncPolicy::EveryBatch,
            ..BrokerConfig::with_data_dir(dir.path())
        }
    };
    let fdatasync_p50_ms = fdatasync_probe(dir.path());
    let broker = Broker::start(config).await.expect("broker");
    let bootstrap = broker.bootstrap_servers();
    let admin = AdminClient::new(vec![bootstrap.clone()], ConnectionConfig::default());
    let partitions = args.consumers as i32;
    admin
        .create_topic(NewTopic::new("lat", partitions))
        .await
        .expect("create topic");
    admin
        .incremental_alter_group_config(
            "lat-g",
            &[(
                "share.auto.offset.reset",
                AlterConfigOp::Set("earliest".into()),
            )],
        )
        .await
        .expect("set share.auto.offset.reset=earliest");
    // Enough records for every commit plus slack, spread evenly.
    let per_partition = (args.commits + 20) * args.max_poll_records;
    let producer = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(bootstrap.clone())
            .linger(Duration::from_millis(5))
            .build()
            .expect("producer config"),
    )
    .await
    .expect("producer");
    let mut sent = Vec::new();
    for i in 0..per_partition * args.consumers {
        let r = ProducerRecord::new("lat", format!("v{i}")).with_partition(i as i32 % partitions);
        sent.push(producer.send(r).await);
    }
    for f in sent {
        f.await.expect("produce");
    }
    producer.close().await;

    let start_line = std::sync::Arc::new(tokio::sync::Barrier::new(args.consumers));
    let mut tasks = Vec::new();
    for c in 0..args.consumers {
        let bootstrap = bootstrap.clone();
        let start_line = start_line.clone();
        let (commits, max_poll) = (args.commits, args.max_poll_records);
        tasks.push(tokio::spawn(async move {
            let config = ShareConsumerConfig::builder("lat-g")
                .client_id(format!("lat-{c}"))
                .bootstrap_servers([bootstrap])
                .acknowledgement_mode(AcknowledgementMode::Explicit)
                .max_poll_records(max_poll)
                .build()
                .expect("consumer config");
            let mut consumer = ShareConsumer::new(config).expect("share consumer");
            consumer.subscribe(["lat".to_string()]).expect("subscribe");
            // Everyone starts timing once every consumer has records.
            let mut first = consumer.poll(Duration::from_secs(30)).await.expect("poll");
            while first.is_empty() {
                first = consumer.poll(Duration::from_secs(30)).await.expect("poll");
            }
            for r in first.iter() {
                consumer
                    .acknowledge(r, AcknowledgeType::Accept)
                    .expect("ack");
            }
            consumer
                .commit_sync(Duration::from_secs(30))
                .await
                .expect("commit");
            start_line.wait().await;
            let mut samples = Vec::with_capacity(commits);
            while samples.len() < commits {
                let polled = consumer.poll(Duration::from_secs(5)).await.expect("poll");
                if polled.is_empty() {
                    continue;
                }
                for r in polled.iter() {
                    consumer
                        .acknowledge(r, AcknowledgeType::Accept)
                        .expect("ack");
                }
                let t = Instant::now();
                consumer
                    .commit_sync(Duration::from_secs(30))
                    .await
                    .expect("commit");
                samples.push(t.elapsed());
            }
            consumer.close(Duration::from_secs(10)).await.ok();
            samples
        }));
    }
    let mut all: Vec<Duration> = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("consumer task"));
    }
    all.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| ms(all[((all.len() as f64 * q) as usize).min(all.len() - 1)]);
    let mean = all.iter().map(|d| ms(*d)).sum::<f64>() / all.len() as f64;
    let load1 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    println!(
        "RESULT consumers={} commits={} p50_ms={:.2} p90_ms={:.2} p99_ms={:.2} max_ms={:.2} mean_ms={:.2} fdatasync_p50_ms={fdatasync_p50_ms:.2} load1={load1}",
        args.consumers,
        all.len(),
        at(0.50),
        at(0.90),
        at(0.99),
        ms(all[all.len() - 1]),
        mean,
    );
    broker.shutdown().await;
}

/// Median wall time of an append of 200 bytes plus fdatasync in `dir`.
fn fdatasync_probe(dir: &std::path::Path) -> f64 {
    use std::io::Write;
    let path = dir.join("fdatasync-probe");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("probe file");
    let mut samples: Vec<f64> = (0..100)
        .map(|_| {
            let t = Instant::now();
            f.write_all(&[b'x'; 200]).expect("probe write");
            f.sync_data().expect("probe fdatasync");
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    drop(f);
    let _ = std::fs::remove_file(&path);
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
