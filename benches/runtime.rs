//! Runtime benchmarks on the embedded broker (one process, loopback),
//! bounded to about two minutes:
//!
//! 1. exactly-once vs at-least-once throughput, values of 100 B and 1 KiB,
//!    4 partitions, 4 workers, commit interval 100 ms;
//! 2. parallelism beyond the partition count: one partition, 5 ms of
//!    async work per record (`map_async`), 1..32 workers: records/s and %
//!    of linear (the 1-worker rate times the workers);
//! 3. end-to-end latency, produce -> visible to a read_committed reader,
//!    p50/p99, at half the exactly-once 100 B throughput;
//! 4. at_least_once beside exactly_once through the intent ledger, on one
//!    cluster and across two (two embedded brokers, or clusters named by
//!    `SHARESTREAM_BENCH_TARGET` and `SHARESTREAM_BENCH_SOURCE`, e.g. two
//!    Apache Kafka nodes of scripts/kafka/start.sh; see
//!    `ledger_on_clusters`).
//!
//! `cargo bench --bench runtime`. Figures: docs/BENCHMARKS.md.
//!
//! Knobs (environment): `SHARESTREAM_BENCH_SECTIONS=2,3` (sections to
//! run), `SHARESTREAM_BENCH_WORKERS=1,16,32` (section 2),
//! `SHARESTREAM_BENCH_PAR_BATCH=524288,2048` (section 2's input
//! `batch.size`, bytes, one table per value),
//! `SHARESTREAM_BENCH_PAR_MODES=batch_optimized,record_limit` (section 2's
//! `share.acquire.mode`, one table per value; default both),
//! `SHARESTREAM_BENCH_LATENCY_RATE=10000` (section 3's offered rate;
//! default half of section 1's exactly-once 100 B rate, or 100/s),
//! `SHARESTREAM_BENCH_LATENCY_VARIANTS=default,commit.aligned=false`
//! (section 3 once per variant, `name=value` joined by `+`),
//! `SHARESTREAM_BENCH_PROPS=name=value+...` (runtime properties for every
//! run; `SHARESTREAM_BENCH_LEDGER_PROPS` for section 4's exactly_once
//! runs only), `SHARESTREAM_BENCH_RECORD_LOCKS=2000` (the broker's
//! `group.share.partition.max.record.locks`),
//! `SHARESTREAM_BENCH_GROUP_RECORD_LOCKS=4000` (the groups'
//! `share.partition.max.record.locks`, e.g. on Apache Kafka),
//! `SHARESTREAM_BENCH_BROKER_THREADS=2` (the broker on a tokio runtime of
//! its own with that many threads; default 0, the bench's runtime).
//! `SHARESTREAM_BENCH_LATENCY_TARGET=host:port` runs section 3 on that
//! cluster instead of the embedded broker. `SHARESTREAM_BENCH_EXT_SIZES=1024`
//! runs section 4 at that value size only.
//! `SHARESTREAM_BENCH_WARMUP=3` (section 4's rounds run first and not
//! counted; default 3 on an external target, else 0: a fresh Kafka JVM
//! still spends 27-37 % of its CPU in its JIT compiler in the second round
//! of a million records, and the exactly_once runs take code paths the
//! at_least_once runs do not warm; docs/BENCHMARKS.md, session 32),
//! `SHARESTREAM_BENCH_BROKER_PIDS=PID[,PID]` (the external brokers' process
//! ids, e.g. Kafka's JVMs) adds their CPU per record to section 4's rows.
//! `SHARESTREAM_BENCH_FLOOR=1`, in a build with `--features failpoints`,
//! adds section 4's floor row: the ledger mode without intents or
//! arbitration (not exactly-once; the price of Kafka's transactions
//! alone, docs/DESIGN.md D53).
//! `SHARESTREAM_BENCH_DROP_CACHES=1` (section 4; root on Linux) writes
//! dirty pages back and empties the page cache before each run's set-up,
//! so that no run pays for the writeback or the reclaim of the runs before
//! it; each run's stderr line gives the kernel's page reclaim in its
//! steady window either way. `SHARESTREAM_BENCH_SPEED_PROBE=1` (section 4)
//! times a fixed piece of work on a thread of its own throughout each run
//! (about 3 % of a core, counted in the bench process's CPU).
//! Section 3 also prints the input producer's send -> acknowledged
//! latency (every 64th record) and, on stderr, the broker's handling time
//! per API.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sharestream::broker::{Broker, BrokerConfig, BrokerHandle};
use sharestream::client::admin::{AdminClient, AlterConfigOp, NewTopic};
use sharestream::client::{ConnectionConfig, Metadata, Producer, ProducerConfig, ProducerRecord};
use sharestream::runtime::verify::CommittedReader;
use sharestream::runtime::{ProcessingGuarantee, Runtime, RuntimeConfig};
use sharestream::topology::{Serdes, StreamsBuilder, Topology};

/// Where a bench talks to: the embedded broker, or a cluster named by its
/// bootstrap address.
trait Bootstrap {
    fn bootstrap(&self) -> String;
}

impl Bootstrap for BrokerHandle {
    fn bootstrap(&self) -> String {
        self.bootstrap_servers()
    }
}

impl Bootstrap for String {
    fn bootstrap(&self) -> String {
        self.clone()
    }
}

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

async fn setup(b: &impl Bootstrap, group: &str, input: &str, output: &str, partitions: i32) {
    let a = AdminClient::new(vec![b.bootstrap()], ConnectionConfig::default());
    a.create_topic(NewTopic::new(input, partitions))
        .await
        .unwrap();
    a.create_topic(NewTopic::new(output, partitions))
        .await
        .unwrap();
    let mut configs = vec![(
        "share.auto.offset.reset",
        AlterConfigOp::Set("earliest".into()),
    )];
    // SHARESTREAM_BENCH_GROUP_RECORD_LOCKS=N: the group's
    // share.partition.max.record.locks (KIP-1240), for clusters whose
    // broker setting cannot be changed without a restart (Kafka's).
    if let Ok(n) = std::env::var("SHARESTREAM_BENCH_GROUP_RECORD_LOCKS") {
        configs.push(("share.partition.max.record.locks", AlterConfigOp::Set(n)));
    }
    a.incremental_alter_group_config(group, &configs)
        .await
        .unwrap();
}

async fn producer_batching(b: &impl Bootstrap, batch_size: usize) -> Producer {
    producer_with(b, batch_size, Duration::from_millis(5)).await
}

/// The latency section's input producer: 1 ms linger, so that the
/// producer's own batching adds at most 1 ms.
async fn producer_lingering(b: &impl Bootstrap, linger: Duration) -> Producer {
    producer_with(b, 512 * 1024, linger).await
}

async fn producer_with(b: &impl Bootstrap, batch_size: usize, linger: Duration) -> Producer {
    Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(b.bootstrap())
            .linger(linger)
            .batch_size(batch_size)
            .build()
            .unwrap(),
    )
    .await
    .unwrap()
}

async fn produce(b: &impl Bootstrap, topic: &str, n: usize, size: usize) {
    produce_batching(b, topic, n, size, 512 * 1024).await
}

async fn produce_batching(b: &impl Bootstrap, topic: &str, n: usize, size: usize, batch: usize) {
    let p = producer_batching(b, batch).await;
    let value = Bytes::from(vec![b'x'; size]);
    let mut f = Vec::with_capacity(n);
    for i in 0..n {
        f.push(
            p.send(ProducerRecord::new(topic, value.clone()).with_key(format!("k{i}")))
                .await,
        );
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

/// `SHARESTREAM_BENCH_PROPS=name=value+name=value`: runtime properties
/// applied to every run (e.g. `commit.aligned=false`).
fn config(b: &impl Bootstrap, app: &str, workers: usize, g: ProcessingGuarantee) -> RuntimeConfig {
    let mut c = base_config(b, app, workers, g);
    if let Ok(props) = std::env::var("SHARESTREAM_BENCH_PROPS") {
        for kv in props.split('+').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').expect("name=value");
            c.set(k, v).unwrap();
        }
    }
    c
}

fn base_config(
    b: &impl Bootstrap,
    app: &str,
    workers: usize,
    g: ProcessingGuarantee,
) -> RuntimeConfig {
    RuntimeConfig {
        application_id: app.into(),
        bootstrap_servers: vec![b.bootstrap()],
        num_workers: workers,
        processing_guarantee: g,
        // The runtime's defaults otherwise (max.records.per.transaction
        // 1000, max.poll.records 500): what a user gets. Until session 4
        // this set 2000 records per transaction, which with 4 workers on
        // 4 partitions holds every lock Kafka's default cap allows
        // (docs/BENCHMARKS.md, "what bounds exactly-once").
        commit_interval: Duration::from_millis(100),
        ..RuntimeConfig::default()
    }
}

/// Seconds since the Unix epoch: names topics uniquely per invocation, as
/// an external cluster keeps them.
fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Section 4: at_least_once beside exactly_once through the intent
/// ledger, on one cluster and across two. The clusters:
/// `SHARESTREAM_BENCH_TARGET=host:port` (outputs and ledger; default the
/// bench's embedded broker) and `SHARESTREAM_BENCH_SOURCE=host:port` (input
/// and share group for the two-cluster rows; default a second embedded
/// broker in this process when the target is the embedded one, else no
/// two-cluster rows). `SHARESTREAM_BENCH_EXT_RECORDS=100B,1KiB` record
/// counts (default 200000,50000 on the embedded broker, 1000000,1000000 on an
/// external target). 4 partitions, 4 workers, interleaved,
/// medians of 3.
async fn ledger_on_clusters(embedded: &BrokerHandle) {
    use sharestream::runtime::ExactlyOnceMechanism as M;
    let target = std::env::var("SHARESTREAM_BENCH_TARGET").ok();
    let mut second = None;
    let source = match (std::env::var("SHARESTREAM_BENCH_SOURCE").ok(), &target) {
        (Some(s), _) => Some(s),
        (None, Some(_)) => None,
        (None, None) => {
            let h = Broker::start(BrokerConfig::in_memory()).await.unwrap();
            let addr = h.bootstrap_servers();
            second = Some(h);
            Some(addr)
        }
    };
    // A fresh external cluster's JVM runs its first round well below the
    // later ones (session 31: at_least_once at 0.5-0.8 of its median), so
    // one round there warms it up and is not counted
    // (`SHARESTREAM_BENCH_WARMUP=N` rounds; default 1 on an external
    // target, 0 on the embedded broker).
    let warmup: usize = std::env::var("SHARESTREAM_BENCH_WARMUP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if target.is_some() { 3 } else { 0 });
    let target = target.unwrap_or_else(|| embedded.bootstrap_servers());
    let counts: Vec<usize> = std::env::var("SHARESTREAM_BENCH_EXT_RECORDS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        // On an external cluster a run of 300 000 records at 1 KiB lasts
        // about a second and a half: too short for a steady window.
        .unwrap_or_else(|| {
            if std::env::var("SHARESTREAM_BENCH_TARGET").is_ok() {
                vec![1_000_000, 1_000_000]
            } else {
                vec![200_000, 50_000]
            }
        });
    println!(
        "\n## 4. exactly_once through the intent ledger beside at_least_once (target {target}, source {}; {REPS} counted rounds after {warmup} warm-up round(s), medians)\n",
        source.as_deref().unwrap_or("-")
    );
    println!(
        "| value | clusters | guarantee | records | records/s from start | steady records/s | % of at_least_once (steady) | ratio to at_least_once per round, median (range) | commit p50 | commit p99 | CPU % (bench process) | bench process CPU µs/record | broker CPU µs/record | bench process CPU µs/record, steady | broker CPU µs/record, steady |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let layouts: Vec<(&str, String)> = std::iter::once(("one", target.clone()))
        .chain(source.clone().map(|s| ("two", s)))
        .collect();
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let stamp = unix_secs();
    // SHARESTREAM_BENCH_EXT_SIZES=1024 runs that value size only.
    let sizes: Vec<usize> = std::env::var("SHARESTREAM_BENCH_EXT_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1024]);
    // With SHARESTREAM_BENCH_FLOOR=1 in a build with the
    // `failpoints` feature, a fourth row: transactions of outputs
    // with no intent and no arbitration (failpoint
    // `runtime.ledger_floor`; not exactly-once), the price of
    // Kafka's transactions alone.
    let drop_caches = std::env::var("SHARESTREAM_BENCH_DROP_CACHES").is_ok_and(|v| v == "1");
    let asked = std::env::var("SHARESTREAM_BENCH_FLOOR").is_ok_and(|v| v == "1");
    let floor = asked && cfg!(feature = "failpoints");
    if asked && !floor {
        eprintln!(
            "SHARESTREAM_BENCH_FLOOR=1 ignored: the floor row needs a bench built with \
             `--features failpoints` (cargo bench --features failpoints --bench runtime)"
        );
    }
    for (&size, &n) in [100usize, 1024].iter().zip(&counts) {
        if !sizes.contains(&size) {
            continue;
        }
        for (layout, src) in &layouts {
            // The ledger waiting for each commit (the default), and
            // polling during it (D37).
            let mut configs = vec![
                (ProcessingGuarantee::AtLeastOnce, false, false),
                (ProcessingGuarantee::ExactlyOnce, false, false),
                (ProcessingGuarantee::ExactlyOnce, true, false),
            ];
            if floor {
                configs.push((ProcessingGuarantee::ExactlyOnce, false, true));
            }
            let mut runs: Vec<Vec<Run>> = configs.iter().map(|_| Vec::new()).collect();
            for rep in 0..warmup + REPS {
                let counted = rep >= warmup;
                for (i, &(g, overlap, floor)) in configs.iter().enumerate() {
                    let tag = format!(
                        "x{stamp}-{layout}-{}-{overlap}-{floor}-{size}-{rep}",
                        g.name()
                    );
                    let (input, output) = (format!("in-{tag}"), format!("out-{tag}"));
                    if drop_caches {
                        drop_page_cache();
                    }
                    setup(src, &tag, &input, &output, 4).await;
                    if src != &target {
                        AdminClient::new(vec![target.clone()], ConnectionConfig::default())
                            .create_topic(NewTopic::new(&output, 4))
                            .await
                            .unwrap();
                    }
                    produce(src, &input, n, size).await;
                    let mut cfg = config(&target, &tag, 4, g);
                    cfg.exactly_once_mechanism = M::Ledger;
                    cfg.poll_during_commit = overlap;
                    // SHARESTREAM_BENCH_LEDGER_PROPS=name=value+...: runtime
                    // properties for the exactly_once runs only, at_least_once
                    // kept as the reference.
                    if g == ProcessingGuarantee::ExactlyOnce
                        && let Ok(props) = std::env::var("SHARESTREAM_BENCH_LEDGER_PROPS")
                    {
                        for kv in props.split('+').filter(|s| !s.is_empty()) {
                            let (k, v) = kv.split_once('=').expect("name=value");
                            cfg.set(k, v).unwrap();
                        }
                    }
                    if src != &target {
                        cfg.source_bootstrap_servers = Some(vec![src.clone()]);
                    }
                    #[cfg(feature = "failpoints")]
                    if floor {
                        sharestream::failpoints::arm("runtime.ledger_floor", None);
                    }
                    let probe = host_probe();
                    let r = run_until(forward(&tag, &input, &output), cfg, n as u64).await;
                    #[cfg(feature = "failpoints")]
                    sharestream::failpoints::disarm("runtime.ledger_floor");
                    // The workers' time by phase (stderr, beside the table).
                    eprintln!(
                        "{}{size} B {layout} {}{} overlap={overlap}: host probe {probe:.1} ms, during the steady window {} CPU ms per round; steady {:.0}/s; bench CPU {:.1} µs/record ({:.1} steady); broker CPU {} µs/record ({} steady); context switches per 1000 records, steady: bench {:.0}, broker {}; CPU migrations per 1000 records, steady: bench {:.1}, broker {}; broker read+write calls per 1000 records, steady: {}; {}; steady window {:.3}-{:.3} (Unix s); {}",
                        if counted {
                            ""
                        } else {
                            "warm-up, not counted: "
                        },
                        g.name(),
                        if floor { " floor" } else { "" },
                        r.speed.map_or("-".into(), |ms| format!("{ms:.2}")),
                        r.steady,
                        r.cpu_us,
                        r.steady_cpu_us,
                        r.broker_us.map_or("-".into(), |u| format!("{u:.1}")),
                        r.steady_broker_us.map_or("-".into(), |u| format!("{u:.1}")),
                        r.steady_switches.0,
                        r.steady_switches
                            .1
                            .map_or("-".into(), |u| format!("{u:.0}")),
                        r.steady_migrations.0,
                        r.steady_migrations
                            .1
                            .map_or("-".into(), |u| format!("{u:.1}")),
                        r.steady_syscalls
                            .map_or("-".into(), |(r, w)| format!("{r:.0}+{w:.0}")),
                        r.reclaim,
                        r.window.0,
                        r.window.1,
                        r.phases
                    );
                    if counted {
                        runs[i].push(r);
                    }
                }
            }
            let alos = median(runs[0].iter().map(|r| r.steady).collect());
            // The rounds are interleaved, so a row's ratio to at_least_once
            // within each round is paired: the round's own conditions
            // cancel out. Its median, and the lowest and highest.
            let paired = |i: usize| {
                let mut v: Vec<f64> = runs[i]
                    .iter()
                    .zip(&runs[0])
                    .map(|(r, a)| r.steady / a.steady)
                    .collect();
                v.sort_by(|a, b| a.total_cmp(b));
                format!("{:.2} ({:.2}-{:.2})", v[v.len() / 2], v[0], v[v.len() - 1])
            };
            for (i, (g, overlap, floor)) in configs.iter().enumerate() {
                let name = match (g, overlap, floor) {
                    (_, _, true) => {
                        "floor: transactions without intents (failpoint; not exactly-once)"
                    }
                    (ProcessingGuarantee::ExactlyOnce, false, _) => "exactly_once, intent ledger",
                    (ProcessingGuarantee::ExactlyOnce, true, _) => {
                        "exactly_once, intent ledger, poll.during.commit=true"
                    }
                    _ => "at_least_once",
                };
                let steady = median(runs[i].iter().map(|r| r.steady).collect());
                let of = |f: fn(&Run) -> Option<f64>| {
                    let v: Vec<f64> = runs[i].iter().filter_map(f).collect();
                    if v.is_empty() {
                        "-".to_string()
                    } else {
                        format!("{:.1}", median(v))
                    }
                };
                let broker = of(|r| r.broker_us);
                let steady_broker = of(|r| r.steady_broker_us);
                println!(
                    "| {size} B | {layout} | {name} | {n} | {:.0} | {steady:.0} | {:.0}% | {} | {:.1} ms | {:.1} ms | {:.0}% | {:.1} | {broker} | {:.1} | {steady_broker} |",
                    median(runs[i].iter().map(|r| r.rate).collect()),
                    100.0 * steady / alos,
                    paired(i),
                    median(runs[i].iter().map(|r| r.p50).collect()),
                    median(runs[i].iter().map(|r| r.p99).collect()),
                    median(runs[i].iter().map(|r| r.cpu).collect()),
                    median(runs[i].iter().map(|r| r.cpu_us).collect()),
                    median(runs[i].iter().map(|r| r.steady_cpu_us).collect()),
                );
            }
        }
    }
    if let Some(h) = second {
        h.shutdown().await;
    }
}

/// How long a fixed piece of work takes on this host just before a run,
/// in ms of wall time (65-75 ms on the 2-core bench host of
/// docs/BENCHMARKS.md, Kafka idle between runs): arithmetic
/// and reads scattered over 8 MiB, more than the caches hold. The rounds'
/// spread in section 4 is large (the same configuration's CPU per record
/// has varied by half between rounds of one invocation); a slow probe
/// beside a slow run says the host, not the code, was slower then.
fn host_probe() -> f64 {
    let mut buf = vec![0u64; 1 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let start = Instant::now();
    for round in 0..24u64 {
        x = probe_round(&mut buf, x, round);
    }
    std::hint::black_box(x);
    std::hint::black_box(&buf);
    start.elapsed().as_secs_f64() * 1e3
}

/// One round of the host probe's fixed work: arithmetic over 8 MiB, then
/// dependent reads at random places (memory latency).
fn probe_round(buf: &mut [u64], mut x: u64, round: u64) -> u64 {
    for slot in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *slot = slot.wrapping_add(x ^ round);
    }
    let mut at = (x as usize) & (buf.len() - 1);
    for _ in 0..(1 << 16) {
        at = (buf[at] as usize ^ at.rotate_left(7)) & (buf.len() - 1);
    }
    x.wrapping_add(at as u64)
}

/// This thread's time on a CPU so far, ns (Linux: /proc/thread-self/schedstat).
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The host's speed *during* a run (`SHARESTREAM_BENCH_SPEED_PROBE=1`): a
/// thread of its own does one round of the probe's fixed work every 100 ms
/// and keeps the CPU time each round took, measured on the thread's own
/// clock, so that waiting for a core does not count, and a slower core
/// does. The rounds inside the steady window, median, say whether the
/// host ran slower in that window (a busy SMT sibling, a lower clock) than
/// in another one. Off by default: the thread takes about 3 % of a core,
/// which the bench process's CPU figures would then include.
struct SpeedProbe {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(Instant, f64)>>,
}

impl SpeedProbe {
    fn start() -> SpeedProbe {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u64; 1 << 20];
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut samples = Vec::new();
            let mut round = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let before = thread_cpu_ns();
                x = probe_round(&mut buf, x, round);
                if let (Some(a), Some(b)) = (before, thread_cpu_ns()) {
                    samples.push((Instant::now(), (b.saturating_sub(a)) as f64 / 1e6));
                }
                round += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            std::hint::black_box(x);
            samples
        });
        SpeedProbe { stop, thread }
    }

    /// The median CPU ms of the rounds that ended between `from` and `to`.
    fn finish(self, from: Instant, to: Instant) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.join().ok()?;
        let mut inside: Vec<f64> = samples
            .into_iter()
            .filter(|(t, _)| *t >= from && *t <= to)
            .map(|(_, ms)| ms)
            .collect();
        inside.sort_by(|a, b| a.total_cmp(b));
        inside.get(inside.len() / 2).copied()
    }
}

/// What one run measured.
struct Run {
    /// records/s from start (start-up and group join included).
    rate: f64,
    /// records/s between 10% and 90% of the records committed (steady
    /// state: start-up, join and the last transactions left out).
    steady: f64,
    p50: f64,
    p99: f64,
    /// CPU of the whole process (runtime + broker + bench), % of one core.
    cpu: f64,
    /// The same over the whole run, µs per record.
    cpu_us: f64,
    /// CPU of the external brokers (`SHARESTREAM_BENCH_BROKER_PIDS`) over
    /// the whole run, µs per record.
    broker_us: Option<f64>,
    /// This process's CPU between 10% and 90% of the records committed,
    /// µs per record committed in that window.
    steady_cpu_us: f64,
    /// The external brokers' CPU over the same window.
    steady_broker_us: Option<f64>,
    /// Worker time by phase, seconds summed over workers.
    phases: String,
    /// The steady window in wall-clock time, seconds since the Unix epoch
    /// (to line a profile of the brokers up with it).
    window: (f64, f64),
    /// Context switches (voluntary and not) per 1000 records committed in
    /// the steady window: this process's threads, the external brokers'.
    steady_switches: (f64, Option<f64>),
    /// CPU migrations per 1000 records committed in the steady window, as
    /// `steady_switches`.
    steady_migrations: (f64, Option<f64>),
    /// The kernel's page reclaim in the steady window (see [`Reclaim`]).
    reclaim: String,
    /// The external brokers' read and write system calls per 1000 records
    /// committed in the steady window ([`broker_syscalls`]).
    steady_syscalls: Option<(f64, f64)>,
    /// CPU ms of one round of the probe's work inside the steady window,
    /// median ([`SpeedProbe`]).
    speed: Option<f64>,
}

/// The host's page reclaim so far (Linux; zeros elsewhere): pages scanned
/// for reclaim by kswapd and by allocating threads themselves (direct
/// reclaim, charged to whoever allocates), direct compaction stalls,
/// kswapd's CPU, and the free memory. A run that starts with the page cache
/// full pays for evicting it as it writes; one that starts after the
/// previous run's writes pays for their writeback.
#[derive(Clone, Copy, Default)]
struct Reclaim {
    scan_kswapd: u64,
    scan_direct: u64,
    compact_stalls: u64,
    kswapd_cpu: f64,
    free_kib: u64,
    dirty_kib: u64,
}

impl Reclaim {
    fn now() -> Reclaim {
        // "name value ..." lines: the value of each name asked for.
        fn read(path: &str, mut put: impl FnMut(&str, u64)) {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for line in text.lines() {
                let mut f = line.split_whitespace();
                if let (Some(k), Some(v)) = (f.next(), f.next().and_then(|v| v.parse().ok())) {
                    put(k, v);
                }
            }
        }
        let mut r = Reclaim::default();
        read("/proc/vmstat", |k, v| match k {
            "pgscan_kswapd" => r.scan_kswapd = v,
            "pgscan_direct" => r.scan_direct = v,
            "compact_stall" => r.compact_stalls = v,
            _ => {}
        });
        read("/proc/meminfo", |k, v| match k {
            "MemFree:" => r.free_kib = v,
            "Dirty:" => r.dirty_kib = v,
            _ => {}
        });
        if let Ok(procs) = std::fs::read_dir("/proc") {
            for p in procs.filter_map(|p| p.ok()) {
                let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
                if comm.starts_with("kswapd") {
                    r.kswapd_cpu += proc_cpu_seconds(&p.file_name().to_string_lossy());
                }
            }
        }
        r
    }

    /// What happened between `self` and `later`, for a stderr line.
    fn since(&self, later: &Reclaim) -> String {
        const PAGE_MIB: f64 = 4096.0 / 1048576.0;
        format!(
            "reclaim in the steady window: kswapd scanned {:.0} MiB ({:.0} ms CPU), direct {:.0} MiB, \
             {} compaction stalls; free {:.1} GiB and dirty {:.0} MiB at its start",
            later.scan_kswapd.saturating_sub(self.scan_kswapd) as f64 * PAGE_MIB,
            (later.kswapd_cpu - self.kswapd_cpu).max(0.0) * 1e3,
            later.scan_direct.saturating_sub(self.scan_direct) as f64 * PAGE_MIB,
            later.compact_stalls.saturating_sub(self.compact_stalls),
            self.free_kib as f64 / 1048576.0,
            self.dirty_kib as f64 / 1024.0,
        )
    }
}

/// `SHARESTREAM_BENCH_DROP_CACHES=1`: writes dirty pages back, then
/// empties the page cache (needs root). Panics with the reason otherwise,
/// since a run asked to start clean must not start dirty unnoticed.
fn drop_page_cache() {
    let synced = std::process::Command::new("sync").status();
    assert!(
        synced.as_ref().is_ok_and(|s| s.success()),
        "SHARESTREAM_BENCH_DROP_CACHES=1: sync failed: {synced:?}"
    );
    if let Err(e) = std::fs::write("/proc/sys/vm/drop_caches", "1") {
        panic!(
            "SHARESTREAM_BENCH_DROP_CACHES=1 needs to write /proc/sys/vm/drop_caches (root on \
             Linux): {e}; unset it to run without"
        );
    }
}

/// Context switches so far, summed over the threads of this process and
/// over those of the external brokers (`SHARESTREAM_BENCH_BROKER_PIDS`).
/// A thread that ends takes its count with it, so a window's difference
/// can be low (never negative: it saturates at zero); the runtime's and
/// Kafka's threads live through a run.
fn switches() -> (u64, Option<u64>) {
    thread_counter("status", "ctxt_switches:")
}

/// Moves of a thread from one CPU to another so far, summed as
/// [`switches`] sums: a thread that moves leaves its caches behind.
fn migrations() -> (u64, Option<u64>) {
    thread_counter("sched", "se.nr_migrations")
}

/// The sum over every thread of this process, and over those of the
/// external brokers, of the numbers that end the lines of
/// /proc/PID/task/TID/`file` that contain `key`.
fn thread_counter(file: &str, key: &str) -> (u64, Option<u64>) {
    let of = |pid: &str| -> u64 {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return 0;
        };
        tasks
            .filter_map(|t| t.ok())
            .filter_map(|t| std::fs::read_to_string(t.path().join(file)).ok())
            .flat_map(|text| {
                text.lines()
                    .filter(|l| l.contains(key))
                    .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    };
    let brokers = broker_pids().map(|pids| pids.iter().map(|p| of(p)).sum());
    (of("self"), brokers)
}

/// The process ids of `SHARESTREAM_BENCH_BROKER_PIDS` (None without it).
fn broker_pids() -> Option<Vec<String>> {
    let pids = std::env::var("SHARESTREAM_BENCH_BROKER_PIDS").ok()?;
    Some(
        pids.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect(),
    )
}

/// Read and write system calls of the external brokers
/// (`SHARESTREAM_BENCH_BROKER_PIDS`) so far, (reads, writes), from
/// /proc/PID/io. Over a window and per record they show how many requests,
/// responses and log writes, and how large, carried the records: the same
/// work split into smaller pieces takes more calls. (Kafka's sockets and
/// files are read and written with read(2)/write(2) and their vector
/// forms, which these count; this process's sockets use send(2)/recv(2),
/// which they do not, so it is left out.)
fn broker_syscalls() -> Option<(u64, u64)> {
    fn of(pid: &str) -> (u64, u64) {
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
        let field = |name: &str| {
            io.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        (field("syscr:"), field("syscw:"))
    }
    broker_pids().map(|pids| {
        pids.iter()
            .map(|p| of(p))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    })
}

/// CPU time (user + system) of this process, seconds.
fn cpu_seconds() -> f64 {
    proc_cpu_seconds("self")
}

/// The external brokers of `SHARESTREAM_BENCH_BROKER_PIDS`, their CPU
/// seconds summed (None without the setting).
fn broker_cpu_seconds() -> Option<f64> {
    Some(broker_pids()?.iter().map(|p| proc_cpu_seconds(p)).sum())
}

/// CPU time (user + system) of process `pid` ("self" for this one),
/// seconds, from /proc (10 ms ticks).
fn proc_cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat (utime, stime), 0-based 11 and 12 after ')'.
    (ticks(11) + ticks(12)) / 100.0
}

/// Runs `topology` until `n` source records are committed.
/// The counters read at each end of a run's steady window.
struct Mark {
    at: Instant,
    committed: u64,
    cpu: f64,
    broker_cpu: Option<f64>,
    switches: (u64, Option<u64>),
    reclaim: Reclaim,
    broker_syscalls: Option<(u64, u64)>,
    migrations: (u64, Option<u64>),
}

impl Mark {
    fn now(committed: u64) -> Mark {
        Mark {
            at: Instant::now(),
            committed,
            cpu: cpu_seconds(),
            broker_cpu: broker_cpu_seconds(),
            switches: switches(),
            reclaim: Reclaim::now(),
            broker_syscalls: broker_syscalls(),
            migrations: migrations(),
        }
    }
}

async fn run_until(topology: Topology, cfg: RuntimeConfig, n: u64) -> Run {
    // SHARESTREAM_BENCH_SPEED_PROBE=1: the host's speed during the run.
    let speed = std::env::var("SHARESTREAM_BENCH_SPEED_PROBE")
        .is_ok_and(|v| v == "1")
        .then(SpeedProbe::start);
    let start = Instant::now();
    let cpu0 = cpu_seconds();
    let broker0 = broker_cpu_seconds();
    let h = Runtime::builder(topology)
        .config(cfg)
        .start()
        .await
        .unwrap();
    let m = h.metrics().clone();
    let (mut t10, mut t90) = (None, None);
    loop {
        let c = m.records_committed.load(Ordering::Relaxed);
        // The CPU of this process and of the brokers at both ends of the
        // steady window too: set-up and join left out.
        if t10.is_none() && c >= n / 10 {
            t10 = Some(Mark::now(c));
        }
        if t90.is_none() && c >= n * 9 / 10 {
            t90 = Some(Mark::now(c));
        }
        if c >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = 100.0 * (cpu_seconds() - cpu0) / secs;
    let cpu_us = (cpu_seconds() - cpu0) * 1e6 / n.max(1) as f64;
    let broker_us = broker0
        .zip(broker_cpu_seconds())
        .map(|(a, b)| (b - a) * 1e6 / n.max(1) as f64);
    let (a, b) = (t10.unwrap(), t90.unwrap());
    let wall = |t: Instant| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            - t.elapsed().as_secs_f64()
    };
    let wall_window = (wall(a.at), wall(b.at));
    let steady =
        (b.committed - a.committed) as f64 / b.at.duration_since(a.at).as_secs_f64().max(1e-3);
    let window = (b.committed - a.committed).max(1) as f64;
    // Per 1000 records of the window; saturating: a thread that ended
    // inside the window takes its count with it.
    let per_k = |x: u64, y: u64| y.saturating_sub(x) as f64 * 1e3 / window;
    let steady_cpu_us = (b.cpu - a.cpu) * 1e6 / window;
    let steady_broker_us = a
        .broker_cpu
        .zip(b.broker_cpu)
        .map(|(x, y)| (y - x) * 1e6 / window);
    let steady_migrations = (
        per_k(a.migrations.0, b.migrations.0),
        a.migrations.1.zip(b.migrations.1).map(|(x, y)| per_k(x, y)),
    );
    let steady_switches = (
        per_k(a.switches.0, b.switches.0),
        a.switches.1.zip(b.switches.1).map(|(x, y)| per_k(x, y)),
    );
    let p50 = m.commit_latency_quantile(0.5).as_secs_f64() * 1e3;
    let p99 = m.commit_latency_quantile(0.99).as_secs_f64() * 1e3;
    let wt = &m.worker_time;
    let mut phases: Vec<String> = wt
        .seconds()
        .iter()
        .map(|(p, s)| format!("{p} {s:.1}"))
        .collect();
    phases.extend(
        wt.commit_parts()
            .iter()
            .map(|(p, s)| format!("({p} {s:.1})")),
    );
    phases.push(format!(
        "polls {}/{} empty",
        wt.polls.load(Ordering::Relaxed),
        wt.empty_polls.load(Ordering::Relaxed)
    ));
    h.stop().await.unwrap();
    Run {
        rate: n as f64 / secs,
        steady,
        p50,
        p99,
        cpu,
        cpu_us,
        broker_us,
        steady_cpu_us,
        steady_broker_us,
        phases: phases.join(", "),
        window: wall_window,
        steady_switches,
        steady_migrations,
        reclaim: a.reclaim.since(&b.reclaim),
        steady_syscalls: a
            .broker_syscalls
            .zip(b.broker_syscalls)
            .map(|(x, y)| (per_k(x.0, y.0), per_k(x.1, y.1))),
        speed: speed.and_then(|p| p.finish(a.at, b.at)),
    }
}

/// `SHARESTREAM_BENCH_SECTIONS=2,3` runs only those sections.
fn section(n: u32) -> bool {
    match std::env::var("SHARESTREAM_BENCH_SECTIONS") {
        Ok(v) => v.split(',').any(|s| s.trim() == n.to_string()),
        Err(_) => true,
    }
}

/// Section 3 for one variant of the runtime's settings: `default`, or
/// `name=value` properties joined by `+`.
async fn latency(embedded: &BrokerHandle, tag: &str, variant: &str, rate: f64) {
    // SHARESTREAM_BENCH_LATENCY_TARGET=host:port runs the section on that
    // cluster (e.g. Apache Kafka) instead of the embedded broker.
    let external = std::env::var("SHARESTREAM_BENCH_LATENCY_TARGET").ok();
    let b = &external.clone().unwrap_or_else(|| embedded.bootstrap());
    let (input, output) = (format!("in-{tag}"), format!("out-{tag}"));
    setup(b, tag, &input, &output, 4).await;
    let mut cfg = config(b, tag, 4, ProcessingGuarantee::ExactlyOnce);
    if variant != "default" {
        for kv in variant.split('+') {
            let (k, v) = kv.split_once('=').expect("name=value");
            cfg.set(k, v).unwrap();
        }
    }
    let base_instant = Instant::now();
    // SHARESTREAM_BENCH_STAMP=1: the topology writes the time it processed
    // each record into bytes 8..16 of its value, and the section prints
    // where the latency goes (send -> processed, processed -> visible).
    let stamp = std::env::var("SHARESTREAM_BENCH_STAMP").is_ok_and(|v| v == "1");
    let topology = if stamp {
        let sb = StreamsBuilder::new(tag);
        sb.stream::<Bytes, Bytes>(input.as_str(), Serdes::bytes(), Serdes::bytes())
            .map_values(move |v: Bytes| {
                let mut m = v.to_vec();
                let now = base_instant.elapsed().as_nanos() as u64;
                m[8..16].copy_from_slice(&now.to_be_bytes());
                Bytes::from(m)
            })
            .to(output.as_str(), Serdes::bytes(), Serdes::bytes());
        sb.build().unwrap()
    } else {
        forward(tag, &input, &output)
    };
    let h = Runtime::builder(topology)
        .config(cfg)
        .start()
        .await
        .unwrap();
    let p = producer_lingering(b, Duration::from_millis(1)).await;
    if external.is_some() {
        // Joining a share group on Apache Kafka takes seconds: a warm-up
        // (values stamped 0, left out of the figures) runs until the
        // runtime has committed it, so that the join is not measured.
        let warm = 2000u64;
        for i in 0..warm {
            let f = p
                .send(ProducerRecord::new(input.as_str(), vec![0u8; 100]).with_key(format!("w{i}")))
                .await;
            drop(f);
            if i % 100 == 99 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        p.flush().await;
        let m = h.metrics().clone();
        let until = Instant::now() + Duration::from_secs(60);
        while m.records_committed.load(Ordering::Relaxed) < warm && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let secs = 6.0;
    let n = (rate * secs) as usize;
    let topic = input.clone();
    // Input produce latency (send -> acknowledged), every 64th record.
    let acks = std::sync::Arc::new(parking_lot::Mutex::new(
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap(),
    ));
    let acks2 = acks.clone();
    let sender = tokio::spawn(async move {
        let interval = Duration::from_secs_f64(1.0 / rate);
        let start = Instant::now();
        let mut pending = Vec::new();
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
            let f = p
                .send(ProducerRecord::new(topic.as_str(), v).with_key(format!("k{i}")))
                .await;
            if i % 64 == 0 {
                let acks = acks2.clone();
                let t = Instant::now();
                pending.push(tokio::spawn(async move {
                    if f.await.is_ok() {
                        let _ = acks.lock().record((t.elapsed().as_micros() as u64).max(1));
                    }
                }));
            } else {
                drop(f);
            }
        }
        p.flush().await;
        for t in pending {
            let _ = t.await;
        }
    });
    let md = Metadata::new(vec![b.bootstrap()], ConnectionConfig::default());
    let mut reader = CommittedReader::new(&md, &output).await.unwrap();
    let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    // With the stamp: (total, send -> processed, processed -> visible), us.
    let mut parts: Vec<(u64, u64, u64)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs_f64(secs + 15.0);
    while (hist.len() as usize) < n && Instant::now() < deadline {
        for r in reader.poll().await.unwrap() {
            let v = r.value.unwrap();
            let sent = u64::from_be_bytes(v[..8].try_into().unwrap());
            if sent == 0 {
                continue; // the warm-up
            }
            let now = base_instant.elapsed().as_nanos() as u64;
            let total = ((now.saturating_sub(sent)) / 1000).max(1);
            let _ = hist.record(total);
            if stamp {
                let processed = u64::from_be_bytes(v[8..16].try_into().unwrap());
                parts.push((
                    total,
                    processed.saturating_sub(sent) / 1000,
                    now.saturating_sub(processed) / 1000,
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    sender.await.unwrap();
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    let acks = acks.lock().clone();
    // On stderr (the table is on stdout): the broker's own handling time
    // per API since it started (a ShareFetch's includes its long-poll wait).
    let apis = [
        (0i16, "Produce"),
        (78, "ShareFetch"),
        (1, "Fetch"),
        (95, "TxnShareAcknowledge"),
        (26, "EndTxn"),
    ];
    let apis = if external.is_none() { &apis[..] } else { &[] };
    for &(key, name) in apis {
        if let Some(a) = embedded.core().metrics().api(key) {
            eprintln!(
                "broker {name}: {} requests, handling p50 {} us, p99 {} us, max {} us",
                a.count, a.p50_us, a.p99_us, a.max_us
            );
        }
    }
    if stamp && !parts.is_empty() {
        latency_breakdown(variant, &mut parts, &m);
    }
    println!(
        "| {variant} | {rate:.0} records/s | {}/{n} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} / {:.1} ms | {:.1} / {:.1} ms | {:.0} |",
        hist.len(),
        hist.value_at_quantile(0.5) as f64 / 1e3,
        hist.value_at_quantile(0.99) as f64 / 1e3,
        hist.max() as f64 / 1e3,
        m.commit_latency_quantile(0.5).as_secs_f64() * 1e3,
        m.commit_latency_quantile(0.99).as_secs_f64() * 1e3,
        acks.value_at_quantile(0.5) as f64 / 1e3,
        acks.value_at_quantile(0.99) as f64 / 1e3,
        m.mean_batch_size()
    );
}

/// Where the latency of section 3 went (on stderr): per record, send ->
/// processed (input produce, waiting in the log, the share fetch, the
/// ledger's check) and processed -> visible (the rest of the transaction's
/// interval, its commit, the last stable offset, the reader's poll), for
/// all records and for those at or above the p99; and the workers' mean
/// time per transaction by part.
fn latency_breakdown(
    variant: &str,
    parts: &mut [(u64, u64, u64)],
    m: &sharestream::runtime::RuntimeMetrics,
) {
    let q = |v: &mut Vec<u64>, f: f64| {
        v.sort_unstable();
        v[((v.len() - 1) as f64 * f) as usize] as f64 / 1e3
    };
    let mut a: Vec<u64> = parts.iter().map(|p| p.1).collect();
    let mut b: Vec<u64> = parts.iter().map(|p| p.2).collect();
    parts.sort_unstable_by_key(|p| p.0);
    let tail = &parts[(parts.len() * 99 / 100).min(parts.len() - 1)..];
    let mean = |f: &dyn Fn(&(u64, u64, u64)) -> u64| {
        tail.iter().map(f).sum::<u64>() as f64 / tail.len() as f64 / 1e3
    };
    eprintln!(
        "breakdown {variant}: send->processed p50 {:.1} p99 {:.1} ms; processed->visible p50 {:.1} p99 {:.1} ms; records >= p99 ({}): mean total {:.1}, send->processed {:.1}, processed->visible {:.1} ms",
        q(&mut a, 0.5),
        q(&mut a, 0.99),
        q(&mut b, 0.5),
        q(&mut b, 0.99),
        tail.len(),
        mean(&|p| p.0),
        mean(&|p| p.1),
        mean(&|p| p.2),
    );
    let txns = m.transactions_committed.load(Ordering::Relaxed).max(1) as f64;
    let wt = &m.worker_time;
    let per_txn: Vec<String> = wt
        .seconds()
        .iter()
        .chain(wt.commit_parts().iter())
        .map(|(p, s)| format!("{p} {:.2}", s * 1e3 / txns))
        .collect();
    eprintln!(
        "breakdown {variant}: workers' ms per transaction ({txns:.0} transactions): {}",
        per_txn.join(", ")
    );
}

/// Repetitions of each section-1 configuration (medians are printed).
const REPS: usize = 3;

#[tokio::main]
async fn main() {
    let total = Instant::now();
    let mut broker_config = BrokerConfig::in_memory();
    // SHARESTREAM_BENCH_RECORD_LOCKS: the broker's
    // group.share.partition.max.record.locks (Kafka's default 2000).
    if let Some(n) = std::env::var("SHARESTREAM_BENCH_RECORD_LOCKS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        broker_config.share_groups.partition_max_record_locks = n;
        // Kafka 4.4 bounds the setting by
        // group.share.max.partition.max.record.locks (4000 by default).
        broker_config.share_groups.max_partition_max_record_locks = n.max(4_000);
    }
    // SHARESTREAM_BENCH_BROKER_THREADS=N: the broker on a tokio runtime of
    // its own with N threads (as a separate broker process would be), not
    // on the bench's runtime with the workers and the load (default 0: shared).
    let broker_threads: usize = std::env::var("SHARESTREAM_BENCH_BROKER_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let b = if broker_threads == 0 {
        Broker::start(broker_config).await.unwrap()
    } else {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(broker_threads)
            .thread_name("broker")
            .enable_all()
            .build()
            .unwrap();
        // Lives as long as the process (a runtime cannot be dropped inside
        // another one's async context).
        let rt: &'static tokio::runtime::Runtime = Box::leak(Box::new(rt));
        rt.spawn(Broker::start(broker_config))
            .await
            .unwrap()
            .unwrap()
    };
    println!(
        "## 1. exactly_once vs at_least_once (4 partitions, 4 workers, commit.interval.ms=100)\n"
    );
    println!(
        "Each configuration runs {REPS} times, interleaved; medians. \"from start\" includes start-up and the group join; \"steady\" is the rate between 10% and 90% of the records committed.\n"
    );
    println!(
        "| value | guarantee | records | records/s from start | steady records/s | steady MB/s | % of at_least_once (steady) | commit p50 | commit p99 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut eos_100 = 0.0;
    let sizes: &[(usize, usize)] = if section(1) {
        &[(100, 400_000), (1024, 100_000)]
    } else {
        &[]
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    for &(size, n) in sizes {
        // exactly_once waiting for each commit (the KIP's loop, the default),
        // exactly_once polling during the commit, at_least_once.
        // ... and exactly_once through the intent ledger (what stock
        // Kafka and two clusters get), forced here on a KIP-1289 broker:
        // waiting for each commit (the default), and polling during it
        // (D37).
        use sharestream::runtime::ExactlyOnceMechanism as M;
        let configs = [
            (ProcessingGuarantee::ExactlyOnce, false, M::Auto),
            (ProcessingGuarantee::ExactlyOnce, true, M::Auto),
            (ProcessingGuarantee::AtLeastOnce, false, M::Auto),
            (ProcessingGuarantee::ExactlyOnce, false, M::Ledger),
            (ProcessingGuarantee::ExactlyOnce, true, M::Ledger),
        ];
        let mut runs: Vec<Vec<Run>> = configs.iter().map(|_| Vec::new()).collect();
        for rep in 0..REPS {
            for (i, &(g, overlap, m)) in configs.iter().enumerate() {
                let tag = format!("{}-{overlap}-{m}-{size}-{rep}", g.name());
                let (input, output) = (format!("in-{tag}"), format!("out-{tag}"));
                setup(&b, &tag, &input, &output, 4).await;
                produce(&b, &input, n, size).await;
                let mut cfg = config(&b, &tag, 4, g);
                cfg.poll_during_commit = overlap;
                cfg.exactly_once_mechanism = m;
                let r = run_until(forward(&tag, &input, &output), cfg, n as u64).await;
                // The workers' time by phase (stderr, beside the table).
                eprintln!(
                    "section 1 {tag}: steady {:.0} records/s, {}",
                    r.steady, r.phases
                );
                runs[i].push(r);
            }
        }
        let alos_steady = median(runs[2].iter().map(|r| r.steady).collect());
        for (i, &(g, overlap, m)) in configs.iter().enumerate() {
            let rate = median(runs[i].iter().map(|r| r.rate).collect());
            let steady = median(runs[i].iter().map(|r| r.steady).collect());
            let p50 = median(runs[i].iter().map(|r| r.p50).collect());
            let p99 = median(runs[i].iter().map(|r| r.p99).collect());
            if size == 100 && g == ProcessingGuarantee::ExactlyOnce && !overlap && m == M::Auto {
                eos_100 = rate;
            }
            let name = match (g, overlap, m) {
                (ProcessingGuarantee::ExactlyOnce, false, M::Ledger) => {
                    "exactly_once, intent ledger"
                }
                (ProcessingGuarantee::ExactlyOnce, true, M::Ledger) => {
                    "exactly_once, intent ledger, poll.during.commit=true"
                }
                (ProcessingGuarantee::ExactlyOnce, false, _) => "exactly_once (default loop)",
                (ProcessingGuarantee::ExactlyOnce, true, _) => {
                    "exactly_once, poll.during.commit=true"
                }
                _ => g.name(),
            };
            println!(
                "| {size} B | {name} | {n} | {rate:.0} | {steady:.0} | {:.1} | {:.0}% | {p50:.1} ms | {p99:.1} ms |",
                steady * size as f64 / 1e6,
                100.0 * steady / alos_steady
            );
        }
    }

    println!(
        "\n## 2. parallelism beyond the partition count (1 partition, 5 ms async work per record, exactly_once)\n"
    );
    println!(
        "| workers | records | records/s from start | % of linear | steady records/s | % of linear | CPU % | worker s: poll, process, stage, commit |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut base_steady = 0.0;
    let mut base;
    let workers: Vec<usize> = match std::env::var("SHARESTREAM_BENCH_WORKERS") {
        Ok(v) => v.split(',').filter_map(|w| w.trim().parse().ok()).collect(),
        Err(_) => vec![1, 2, 4, 8, 16, 32],
    };
    // Input batch size in bytes (SHARESTREAM_BENCH_PAR_BATCH, default
    // 512 KiB: thousands of records per batch).
    let par_batch: Vec<usize> = match std::env::var("SHARESTREAM_BENCH_PAR_BATCH") {
        Ok(v) => v.split(',').filter_map(|w| w.trim().parse().ok()).collect(),
        Err(_) => vec![512 * 1024],
    };
    // share.acquire.mode of the workers (SHARESTREAM_BENCH_PAR_MODES,
    // default both, side by side).
    let par_modes: Vec<String> = match std::env::var("SHARESTREAM_BENCH_PAR_MODES") {
        Ok(v) => v.split(',').map(|m| m.trim().to_string()).collect(),
        Err(_) => vec!["batch_optimized".into(), "record_limit".into()],
    };
    let combos: Vec<(usize, String)> = par_batch
        .iter()
        .flat_map(|&pb| par_modes.iter().map(move |m| (pb, m.clone())))
        .collect();
    for (pb, mode) in combos.iter().filter(|_| section(2)) {
        let pb = *pb;
        println!("| input batch.size {pb} B, share.acquire.mode={mode} |");
        base = 0.0;
        for &w in &workers {
            let tag = format!("par-{w}-{pb}-{mode}");
            let (input, output) = (format!("in-{tag}"), format!("out-{tag}"));
            setup(&b, &tag, &input, &output, 1).await;
            let n = (300 * w).max(400);
            produce_batching(&b, &input, n, 100, pb).await;
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
            cfg.set("share.acquire.mode", mode).unwrap();
            let r = run_until(sb.build().unwrap(), cfg, n as u64).await;
            if base == 0.0 {
                base = r.rate / w as f64;
                base_steady = r.steady / w as f64;
            }
            println!(
                "| {w} | {n} | {:.0} | {:.0}% | {:.0} | {:.0}% | {:.0}% | {} |",
                r.rate,
                100.0 * r.rate / (base * w as f64),
                r.steady,
                100.0 * r.steady / (base_steady * w as f64),
                r.cpu,
                r.phases
            );
        }
    }

    if section(4) {
        ledger_on_clusters(&b).await;
    }

    println!(
        "\n## 3. end-to-end latency, produce -> read_committed visibility (100 B, 4 partitions, 4 workers, exactly_once)\n"
    );
    if !section(3) {
        b.shutdown().await;
        return;
    }
    let rate = std::env::var("SHARESTREAM_BENCH_LATENCY_RATE")
        .ok()
        .and_then(|r| r.parse::<f64>().ok())
        .unwrap_or((eos_100 / 2.0).max(100.0));
    println!(
        "| variant | offered rate | records seen | p50 | p99 | max | commit p50 / p99 | input produce p50 / p99 | records per txn |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let variants: Vec<String> = match std::env::var("SHARESTREAM_BENCH_LATENCY_VARIANTS") {
        Ok(v) => v.split(',').map(|s| s.trim().to_string()).collect(),
        Err(_) => vec!["default".into()],
    };
    for (i, v) in variants.iter().enumerate() {
        // Unique per invocation: an external cluster keeps its topics.
        let stamp = unix_secs();
        latency(&b, &format!("latency-{stamp}-{i}"), v, rate).await;
    }
    b.shutdown().await;
    println!(
        "\n(total bench time {:.0} s)",
        total.elapsed().as_secs_f64()
    );
}
