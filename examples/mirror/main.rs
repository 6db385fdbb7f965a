//! A MirrorMaker-style app on sharestream: copies topics (by list or
//! regex) record by record, keys, values, headers and timestamps as they
//! are, to the same partition when the target has enough partitions,
//! under a rename policy (MirrorMaker 2's `<alias>.<topic>` by default, or
//! identity).
//!
//! The copy is exactly-once by default (`--guarantee exactly-once`), within
//! one cluster and from another one (`--source-bootstrap-server`). The
//! runtime picks the mechanism (`--mechanism auto`): KIP-1289 where the
//! share group and the outputs share a cluster that offers it (our
//! embedded broker), else the intent ledger, which works on any Kafka with
//! share groups (4.2+) and across two clusters (docs/EXACTLY-ONCE.md). The
//! app prints which one it uses and why. `--guarantee at-least-once` skips
//! the transactions.
//!
//! Without `--bootstrap-server` it runs a self-contained demo: it starts
//! the embedded broker, creates a source topic, produces sample records,
//! mirrors them, verifies that every record arrived exactly once and
//! prints a summary.
//!
//! ```sh
//! cargo run --release --example mirror
//! cargo run --release --example mirror -- --records 200000 --workers 8
//! cargo run --release --example mirror -- --bootstrap-server 127.0.0.1:9092 --topics orders,payments
//! ```

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use kafka_protocol::messages::MetadataRequest;
use sharestream::broker::{Broker, BrokerConfig};
use sharestream::client::admin::{AdminClient, AlterConfigOp, NewTopic};
use sharestream::client::{ConnectionConfig, Metadata, Producer, ProducerConfig, ProducerRecord};
use sharestream::protocol::records::RecordHeader;
use sharestream::runtime::verify::{CommittedRecord, read_committed};
use sharestream::runtime::{
    ExactlyOnceMechanism, ProcessingGuarantee, Runtime, RuntimeConfig, RuntimeMetrics,
};
use sharestream::topology::{Serdes, SinkRecord, StreamsBuilder, Topology};

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

/// Mirror topics with sharestream.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// Target cluster (and source, unless --source-bootstrap-server). Without
    /// it: the embedded demo.
    #[arg(long)]
    bootstrap_server: Option<String>,
    /// Source cluster, when it is another one.
    #[arg(long)]
    source_bootstrap_server: Option<String>,
    /// `exactly-once` (the default) or `at-least-once`.
    #[arg(long, default_value = "exactly-once")]
    guarantee: String,
    /// How exactly-once is carried out: `auto` (the default), `kip1289` or
    /// `ledger` (exactly.once.mechanism).
    #[arg(long, default_value = "auto")]
    mechanism: String,
    /// Topics to mirror, comma-separated.
    #[arg(long, value_delimiter = ',')]
    topics: Vec<String>,
    /// Mirror every topic whose name matches this regex.
    #[arg(long)]
    topic_regex: Option<String>,
    /// Rename policy: `alias` (<alias>.<topic>, MirrorMaker 2's default) or
    /// `identity`.
    #[arg(long, default_value = "alias")]
    rename: String,
    /// The source cluster's alias for the `alias` policy.
    #[arg(long, default_value = "source")]
    alias: String,
    /// Workers (share group members) in this process.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// commit.interval.ms
    #[arg(long, default_value_t = 100)]
    commit_interval_ms: u64,
    /// Share group of the mirror.
    #[arg(long, default_value = "mirror")]
    group: String,
    /// Demo: records to produce.
    #[arg(long, default_value_t = 50_000)]
    records: usize,
    /// Demo: value size in bytes.
    #[arg(long, default_value_t = 256)]
    record_size: usize,
    /// Demo: partitions of the source topic.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Serve Prometheus metrics here (e.g. 127.0.0.1:9464).
    #[arg(long)]
    metrics_listen: Option<std::net::SocketAddr>,
    /// application.instance.id: a stable identity of this process (a pod
    /// name), so that a restart fences the transactions its predecessor
    /// left open at once. Unset: a fresh identity per process (start the
    /// same command again to scale out).
    #[arg(long)]
    instance_id: Option<String>,
}

fn target_name(args: &Args, topic: &str) -> String {
    if args.rename == "identity" {
        topic.to_string()
    } else {
        format!("{}.{topic}", args.alias)
    }
}

/// The mirror topology: every record to its renamed topic, same partition
/// when the target has it, headers and timestamp kept (the sink's
/// defaults), a null key stays null.
fn topology(args: &Args, sources: &[String], target_partitions: HashMap<String, i32>) -> Topology {
    let b = StreamsBuilder::new(args.group.clone());
    let renames: HashMap<String, String> = sources
        .iter()
        .map(|t| (t.clone(), target_name(args, t)))
        .collect();
    b.stream::<Option<Bytes>, Option<Bytes>>(
        sources.to_vec(),
        Serdes::optional(Serdes::bytes()),
        Serdes::optional(Serdes::bytes()),
    )
    .to_dynamic(
        Serdes::optional(Serdes::bytes()),
        Serdes::optional(Serdes::bytes()),
        move |r| {
            let src = r.source();
            let target = renames[&src.topic].clone();
            let mut sink = SinkRecord::topic(target.clone());
            if src.partition < target_partitions.get(&target).copied().unwrap_or(0) {
                sink = sink.partition(src.partition);
            }
            if r.key.is_none() {
                sink = sink.null_key();
            }
            sink
        },
    );
    b.build().expect("the mirror topology is valid")
}

async fn all_topics(md: &Metadata) -> Vec<String> {
    let resp = md
        .send_any(&MetadataRequest::default().with_topics(None))
        .await
        .expect("metadata");
    resp.topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .filter(|n| !n.starts_with("__"))
        .collect()
}

/// Resolves the topic list, creates missing targets with the source's
/// partition count, returns sources and target partition counts.
async fn prepare(args: &Args, source: &str, target: &str) -> (Vec<String>, HashMap<String, i32>) {
    let smd = Metadata::new(vec![source.to_string()], ConnectionConfig::default());
    let mut sources: Vec<String> = args.topics.clone();
    if let Some(re) = &args.topic_regex {
        let re = regex::Regex::new(&format!("^(?:{re})$")).expect("--topic-regex");
        sources.extend(
            all_topics(&smd)
                .await
                .into_iter()
                // Never the mirror's own ledger (exactly.once.ledger.topic).
                .filter(|t| re.is_match(t) && *t != format!("{}-eos-ledger", args.group)),
        );
    }
    sources.sort();
    sources.dedup();
    if sources.is_empty() {
        eprintln!("nothing to mirror: pass --topics or --topic-regex");
        std::process::exit(2);
    }
    let tmd = Metadata::new(vec![target.to_string()], ConnectionConfig::default());
    let admin = AdminClient::new(vec![target.to_string()], ConnectionConfig::default());
    let mut counts = HashMap::new();
    for s in &sources {
        let partitions = smd
            .wait_for_topic(s, Duration::from_secs(10))
            .await
            .expect("source topic")
            .partition_count();
        let t = target_name(args, s);
        let _ = admin
            .create_topic(NewTopic::new(t.clone(), partitions))
            .await;
        let tp = tmd
            .wait_for_topic(&t, Duration::from_secs(10))
            .await
            .expect("target topic")
            .partition_count();
        counts.insert(t, tp);
    }
    (sources, counts)
}

fn spawn_progress(
    metrics: Arc<RuntimeMetrics>,
    total: Option<usize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let start = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let done = metrics.records_committed.load(Ordering::Relaxed);
            let rate = done as f64 / start.elapsed().as_secs_f64();
            let of = total.map(|t| format!("/{t}")).unwrap_or_default();
            eprint!(
                "\r  mirrored {done}{of} records  {rate:>9.0} rec/s  transactions {}  aborted {}   ",
                metrics.transactions_committed.load(Ordering::Relaxed),
                metrics.transactions_aborted.load(Ordering::Relaxed),
            );
            let _ = std::io::stderr().flush();
        }
    })
}

#[tokio::main]
async fn main() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,sharestream::runtime::worker=warn,sharestream::runtime=info,sharestream::client::connection=error".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let args = Args::parse();
    match args.bootstrap_server.clone() {
        Some(target) => run(args, target).await,
        None => demo(args).await,
    }
}

/// `--guarantee` and `--mechanism`, or an error naming the flag.
fn guarantee(args: &Args) -> (ProcessingGuarantee, ExactlyOnceMechanism) {
    let g = match args.guarantee.as_str() {
        "exactly-once" | "exactly_once" => ProcessingGuarantee::ExactlyOnce,
        "at-least-once" | "at_least_once" => ProcessingGuarantee::AtLeastOnce,
        other => {
            eprintln!("error: --guarantee {other:?}: expected exactly-once or at-least-once");
            std::process::exit(2)
        }
    };
    let m = ExactlyOnceMechanism::parse(&args.mechanism).unwrap_or_else(|| {
        eprintln!(
            "error: --mechanism {:?}: expected auto, kip1289 or ledger",
            args.mechanism
        );
        std::process::exit(2)
    });
    (g, m)
}

/// Prints the guarantee and mechanism the runtime settled on.
fn say_guarantee(config: &RuntimeConfig, cross: bool) {
    let clusters = if cross { "two clusters" } else { "one cluster" };
    match config.processing_guarantee {
        ProcessingGuarantee::AtLeastOnce => {
            println!("mirroring AT-LEAST-ONCE ({clusters}; --guarantee at-least-once)")
        }
        ProcessingGuarantee::ExactlyOnce => {
            let how = match config.exactly_once_mechanism {
                ExactlyOnceMechanism::Ledger => format!(
                    "through the intent ledger, topic '{}' on the target",
                    config.ledger_topic_name()
                ),
                _ => "through KIP-1289 transactions".to_string(),
            };
            println!("mirroring EXACTLY-ONCE ({clusters}) {how}")
        }
    }
}

async fn run(args: Args, target: String) {
    let source = args
        .source_bootstrap_server
        .clone()
        .unwrap_or(target.clone());
    let cross = source != target;
    let (guarantee, mechanism) = guarantee(&args);
    let (sources, counts) = prepare(&args, &source, &target).await;
    for s in &sources {
        println!("  {s} -> {}", target_name(&args, s));
    }
    let config = RuntimeConfig {
        application_id: args.group.clone(),
        bootstrap_servers: vec![target.clone()],
        source_bootstrap_servers: cross.then(|| vec![source.clone()]),
        num_workers: args.workers,
        processing_guarantee: guarantee,
        exactly_once_mechanism: mechanism,
        commit_interval: Duration::from_millis(args.commit_interval_ms),
        metrics_listen: args.metrics_listen,
        application_instance_id: args.instance_id.clone(),
        ..RuntimeConfig::default()
    };
    let handle = Runtime::builder(topology(&args, &sources, counts))
        .config(config)
        .handle_signals(true)
        .start()
        .await
        .unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1)
        });
    say_guarantee(handle.config(), cross);
    let progress = spawn_progress(handle.metrics().clone(), None);
    let result = handle.wait().await;
    progress.abort();
    eprintln!();
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Identity of a record for the verification: everything that must be
/// preserved.
type Fingerprint = (
    i32,
    Option<Bytes>,
    Option<Bytes>,
    Vec<(String, Option<Bytes>)>,
    i64,
);

fn fingerprint(r: &CommittedRecord) -> Fingerprint {
    (
        r.partition,
        r.key.clone(),
        r.value.clone(),
        r.headers
            .iter()
            .map(|h| (h.key.clone(), h.value.clone()))
            .collect(),
        r.timestamp,
    )
}

async fn demo(mut args: Args) {
    println!("sharestream mirror demo: embedded broker");
    // Exactly-once keeps records acquired until their transaction commits,
    // so the in-flight cap per share partition bounds throughput (about N
    // records per commit interval): use Kafka's maximum, not its default
    // of 2000 (docs/BENCHMARKS.md, Runtime section 1).
    let mut broker_config = BrokerConfig::in_memory();
    broker_config.share_groups.partition_max_record_locks = 10_000;
    broker_config.share_groups.max_partition_max_record_locks = 10_000;
    let broker = Broker::start(broker_config).await.expect("embedded broker");
    let servers = broker.bootstrap_servers();
    println!("  embedded broker on {servers}");
    let topic = "orders";
    args.topics = vec![topic.to_string()];
    let admin = AdminClient::new(vec![servers.clone()], ConnectionConfig::default());
    admin
        .create_topic(NewTopic::new(topic, args.partitions))
        .await
        .expect("create topic");
    admin
        .incremental_alter_group_config(
            &args.group,
            &[(
                "share.auto.offset.reset",
                AlterConfigOp::Set("earliest".into()),
            )],
        )
        .await
        .expect("group config");

    // Sample records: keys, values, headers, timestamps, one in ten with a
    // null key.
    print!(
        "  producing {} records of {} B to '{topic}' ({} partitions)... ",
        args.records, args.record_size, args.partitions
    );
    let _ = std::io::stdout().flush();
    let producer = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(&servers)
            .linger(Duration::from_millis(5))
            .batch_size(256 * 1024)
            .build()
            .expect("producer config"),
    )
    .await
    .expect("producer");
    let pad = "x".repeat(args.record_size.saturating_sub(16));
    let mut pending = Vec::with_capacity(args.records);
    for i in 0..args.records {
        let mut r = ProducerRecord::new(topic, format!("{i:>12}{pad}"))
            .with_partition(i as i32 % args.partitions);
        if i % 10 != 0 {
            r.key = Some(Bytes::from(format!("customer-{}", i % 997)));
        }
        r.headers = vec![
            RecordHeader::new("seq", Some(Bytes::from(i.to_string()))),
            RecordHeader::new("origin", Some(Bytes::from_static(b"demo"))),
        ];
        r.timestamp = Some(1_700_000_000_000 + i as i64);
        pending.push(producer.send(r).await);
    }
    for f in pending {
        f.await.expect("produce");
    }
    producer.close().await;
    println!("done");

    let (sources, counts) = prepare(&args, &servers, &servers).await;
    println!(
        "  mirroring {} -> {} with {} workers (share group '{}')",
        sources[0],
        target_name(&args, &sources[0]),
        args.workers,
        args.group
    );
    let (guarantee, mechanism) = guarantee(&args);
    let config = RuntimeConfig {
        application_id: args.group.clone(),
        bootstrap_servers: vec![servers.clone()],
        processing_guarantee: guarantee,
        exactly_once_mechanism: mechanism,
        num_workers: args.workers,
        commit_interval: Duration::from_millis(args.commit_interval_ms),
        metrics_listen: args.metrics_listen,
        ..RuntimeConfig::default()
    };
    let started = Instant::now();
    let handle = Runtime::builder(topology(&args, &sources, counts))
        .config(config)
        .handle_signals(true)
        .start()
        .await
        .unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1)
        });
    say_guarantee(handle.config(), false);
    let metrics = handle.metrics().clone();
    let progress = spawn_progress(metrics.clone(), Some(args.records));
    while metrics.records_committed.load(Ordering::Relaxed) < args.records as u64
        && !handle.is_stopping()
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed();
    progress.abort();
    eprintln!();
    if let Err(e) = handle.stop().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }

    // Verify: the target holds every source record exactly once, with the
    // same partition, key, value, headers and timestamp.
    let md = Metadata::new(vec![servers.clone()], ConnectionConfig::default());
    let src = read_committed(&md, topic).await.expect("read source");
    let dst = read_committed(&md, &target_name(&args, topic))
        .await
        .expect("read target");
    let mut expected: BTreeMap<Fingerprint, usize> = BTreeMap::new();
    for r in &src {
        *expected.entry(fingerprint(r)).or_default() += 1;
    }
    let mut seen: BTreeMap<Fingerprint, usize> = BTreeMap::new();
    for r in &dst {
        *seen.entry(fingerprint(r)).or_default() += 1;
    }
    let missing = expected
        .iter()
        .filter(|(k, n)| seen.get(*k).copied().unwrap_or(0) < **n)
        .count();
    let duplicated = seen
        .iter()
        .filter(|(k, n)| expected.get(*k).copied().unwrap_or(0) < **n)
        .count();
    // Ctrl-C stops the demo early: the transactions in flight are
    // committed, and what was mirrored must still be there exactly once.
    let interrupted = dst.len() < src.len() && missing == src.len() - dst.len();
    let ok = duplicated == 0 && (missing == 0 || interrupted);

    let rate = dst.len() as f64 / elapsed.as_secs_f64();
    println!();
    println!("  records mirrored     {} -> {}", src.len(), dst.len());
    println!("  time                 {:.2} s", elapsed.as_secs_f64());
    println!(
        "  throughput           {rate:.0} records/s ({:.1} MB/s)",
        rate * args.record_size as f64 / 1e6
    );
    println!(
        "  transactions         {} committed, {} aborted, {:.0} records each on average",
        metrics.transactions_committed.load(Ordering::Relaxed),
        metrics.transactions_aborted.load(Ordering::Relaxed),
        metrics.mean_batch_size()
    );
    println!(
        "  commit latency       p50 {:.1} ms, p99 {:.1} ms (stage acknowledgements + flush + EndTxn)",
        metrics.commit_latency_quantile(0.5).as_secs_f64() * 1e3,
        metrics.commit_latency_quantile(0.99).as_secs_f64() * 1e3
    );
    println!(
        "  verification         {}",
        if ok && !interrupted {
            "OK: every record arrived exactly once (partition, key, value, headers, timestamp preserved)".to_string()
        } else if ok {
            format!(
                "interrupted after {} of {} records: each mirrored record arrived exactly once, none duplicated",
                dst.len(),
                src.len()
            )
        } else {
            format!("FAILED: {missing} missing, {duplicated} duplicated")
        }
    );
    broker.shutdown().await;
    if !ok {
        std::process::exit(1);
    }
}
