//! Runtime benchmarks on the embedded broker (one process, loopback),
//! bounded to about two minutes:
//!
//! 1. exactly-once vs at-least-once throughput, values of 100 B and 1 KiB,
//!    4 partitions, 4 workers, commit interval 100 ms;
//! 2. parallelism beyond the partition count: one partition, 5 ms of
//!    async work per record (`map_async`), 1..32 workers: records/s and %
//!    of linear (the 1-worker rate times the workers);
//! 3. end-to-end latency, produce -> visible to a read_committed reader,
//!    p50/p99, at half the exactly-once 100 B throughput.
//!
//! `cargo bench --bench runtime`. Figures: docs/BENCHMARKS.md.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sharestream::broker::{Broker, BrokerConfig, BrokerHandle};
use sharestream::client::admin::{AdminClient, AlterConfigOp, NewTopic};
use sharestream::client::{ConnectionConfig, Metadata, Producer, ProducerConfig, ProducerRecord};
use sharestream::runtime::verify::CommittedReader;
use sharestream::runtime::{ProcessingGuarantee, Runtime, RuntimeConfig};
use sharestream::topology::{Serdes, StreamsBuilder, Topology};

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

async fn setup(b: &BrokerHandle, group: &str, input: &str, output: &str, partitions: i32) {
    let a = AdminClient::new(vec![b.bootstrap_servers()], ConnectionConfig::default());
    a.create_topic(NewTopic::new(input, partitions))
        .await
        .unwrap();
    a.create_topic(NewTopic::new(output, partitions))
        .await
        .unwrap();
    a.incremental_alter_group_config(
        group,
        &[(
            "share.auto.offset.reset",
            AlterConfigOp::Set("earliest".into()),
        )],
    )
    .await
    .unwrap();
}

async fn producer(b: &BrokerHandle) -> Producer {
    Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(b.bootstrap_servers())
            .linger(Duration::from_millis(5))
            .batch_size(512 * 1024)
            .build()
            .unwrap(),
    )
    .await
    .unwrap()
}

async fn produce(b: &BrokerHandle, topic: &str, n: usize, size: usize) {
    let p = producer(b).await;
    let value = Bytes::from(vec![b'x'; size]);
    let mut f = Vec::with_capacity(n);
    for i in 0..n {
        f.push(p.send(ProducerRecord::new(topic, value.clone()).with_key(format!("k{i}"))));
    }
    for x in f {
        x.await.unwrap();
    }
    p.close().await;
}

fn forward(group: &str, input: &str, output: &str) -> Topology {
    let b = StreamsBuilder::new(group);
    b.stream::<Bytes, Bytes>(input, Serdes::bytes(), Serdes::bytes())
        .to(output, Serdes::bytes(), Serdes::bytes());
    b.build().unwrap()
}

fn config(b: &BrokerHandle, app: &str, workers: usize, g: ProcessingGuarantee) -> RuntimeConfig {
    RuntimeConfig {
        application_id: app.into(),
        bootstrap_servers: vec![b.bootstrap_servers()],
        num_workers: workers,
        processing_guarantee: g,
        commit_interval: Duration::from_millis(100),
        max_records_per_transaction: 2000,
        max_poll_records: 500,
        ..RuntimeConfig::default()
    }
}

/// Runs `topology` until `n` source records are committed; records/s.
async fn run_until(topology: Topology, cfg: RuntimeConfig, n: u64) -> (f64, f64, f64) {
    let start = Instant::now();
    let h = Runtime::builder(topology)
        .config(cfg)
        .start()
        .await
        .unwrap();
    let m = h.metrics().clone();
    while m.records_committed.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    let p50 = m.commit_latency_quantile(0.5).as_secs_f64() * 1e3;
    let p99 = m.commit_latency_quantile(0.99).as_secs_f64() * 1e3;
    h.stop().await.unwrap();
    (n as f64 / secs, p50, p99)
}

#[tokio::main]
async fn main() {
    let total = Instant::now();
    let b = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    println!(
        "## 1. exactly_once vs at_least_once (4 partitions, 4 workers, commit.interval.ms=100)\n"
    );
    println!("| value | guarantee | records | records/s | MB/s | commit p50 | commit p99 |");
    println!("|---|---|---|---|---|---|---|");
    let mut eos_100 = 0.0;
    for (size, n) in [(100usize, 100_000usize), (1024, 40_000)] {
        // exactly_once waiting for each commit (the KIP's loop), exactly_once
        // polling during the commit (the default), at_least_once.
        for (g, overlap) in [
            (ProcessingGuarantee::ExactlyOnce, false),
            (ProcessingGuarantee::ExactlyOnce, true),
            (ProcessingGuarantee::AtLeastOnce, true),
        ] {
            let tag = format!("{}-{overlap}-{size}", g.name());
            let (input, output) = (format!("in-{tag}"), format!("out-{tag}"));
            setup(&b, &tag, &input, &output, 4).await;
            produce(&b, &input, n, size).await;
            let mut cfg = config(&b, &tag, 4, g);
            cfg.poll_during_commit = overlap;
            let (rate, p50, p99) = run_until(forward(&tag, &input, &output), cfg, n as u64).await;
            if size == 100 && g == ProcessingGuarantee::ExactlyOnce && overlap {
                eos_100 = rate;
            }
            let name = match (g, overlap) {
                (ProcessingGuarantee::ExactlyOnce, false) => {
                    "exactly_once, poll.during.commit=false"
                }
                (ProcessingGuarantee::ExactlyOnce, true) => "exactly_once",
                _ => g.name(),
            };
            println!(
                "| {size} B | {name} | {n} | {rate:.0} | {:.1} | {p50:.1} ms | {p99:.1} ms |",
                rate * size as f64 / 1e6
            );
        }
    }

    println!(
        "\n## 2. parallelism beyond the partition count (1 partition, 5 ms async work per record, exactly_once)\n"
    );
    println!("| workers | records | records/s | % of linear |");
    println!("|---|---|---|---|");
    let mut base = 0.0;
    for w in [1usize, 2, 4, 8, 16, 32] {
        let tag = format!("par-{w}");
        let (input, output) = (format!("in-{tag}"), format!("out-{tag}"));
        setup(&b, &tag, &input, &output, 1).await;
        let n = (300 * w).max(400);
        produce(&b, &input, n, 100).await;
        let sb = StreamsBuilder::new(tag.clone());
        // One record in processing per worker: the semaphore of the async
        // operator is shared by the workers and holds `w` permits.
        sb.stream::<Bytes, Bytes>(input.as_str(), Serdes::bytes(), Serdes::bytes())
            .map_async(w, |v: Bytes| async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok::<_, String>(v)
            })
            .to(output.as_str(), Serdes::bytes(), Serdes::bytes());
        let mut cfg = config(&b, &tag, w, ProcessingGuarantee::ExactlyOnce);
        cfg.max_poll_records = 20;
        let (rate, _, _) = run_until(sb.build().unwrap(), cfg, n as u64).await;
        if w == 1 {
            base = rate;
        }
        println!(
            "| {w} | {n} | {rate:.0} | {:.0}% |",
            100.0 * rate / (base * w as f64)
        );
    }

    println!(
        "\n## 3. end-to-end latency, produce -> read_committed visibility (100 B, 4 partitions, 4 workers, exactly_once)\n"
    );
    let rate = (eos_100 / 2.0).max(100.0);
    let tag = "latency";
    setup(&b, tag, "in-latency", "out-latency", 4).await;
    let h = Runtime::builder(forward(tag, "in-latency", "out-latency"))
        .config(config(&b, tag, 4, ProcessingGuarantee::ExactlyOnce))
        .start()
        .await
        .unwrap();
    let base_instant = Instant::now();
    let p = producer(&b).await;
    let secs = 6.0;
    let n = (rate * secs) as usize;
    let sender = tokio::spawn(async move {
        let interval = Duration::from_secs_f64(1.0 / rate);
        let start = Instant::now();
        for i in 0..n {
            let due = start + interval.mul_f64(i as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now())
                && wait > Duration::from_millis(1)
            {
                tokio::time::sleep(wait).await;
            }
            let sent = base_instant.elapsed().as_nanos() as u64;
            let mut v = sent.to_be_bytes().to_vec();
            v.resize(100, b'x');
            drop(p.send(ProducerRecord::new("in-latency", v).with_key(format!("k{i}"))));
        }
        p.flush().await;
    });
    let md = Metadata::new(vec![b.bootstrap_servers()], ConnectionConfig::default());
    let mut reader = CommittedReader::new(&md, "out-latency").await.unwrap();
    let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let deadline = Instant::now() + Duration::from_secs_f64(secs + 15.0);
    while (hist.len() as usize) < n && Instant::now() < deadline {
        for r in reader.poll().await.unwrap() {
            let v = r.value.unwrap();
            let sent = u64::from_be_bytes(v[..8].try_into().unwrap());
            let now = base_instant.elapsed().as_nanos() as u64;
            let _ = hist.record(((now.saturating_sub(sent)) / 1000).max(1));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    sender.await.unwrap();
    h.stop().await.unwrap();
    println!("| offered rate | records seen | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    println!(
        "| {rate:.0} records/s | {}/{n} | {:.1} ms | {:.1} ms | {:.1} ms |",
        hist.len(),
        hist.value_at_quantile(0.5) as f64 / 1e3,
        hist.value_at_quantile(0.99) as f64 / 1e3,
        hist.max() as f64 / 1e3
    );
    b.shutdown().await;
    println!(
        "\n(total bench time {:.0} s)",
        total.elapsed().as_secs_f64()
    );
}
