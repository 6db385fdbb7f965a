//! Scale-out benchmark (issue #15): one application as 1, 2 and 4
//! processes with the same total number of workers, and the recovery time
//! after a SIGKILL with and without `--instance-id`.
//!
//! Everything runs as separate processes, as users deploy it: the
//! standalone broker (`sharestream broker`, a temporary data directory,
//! `--fsync never`) and the `mirror` example as the application.
//!
//! ```sh
//! cargo build --release -p sharestream-cli -p sharestream-mirror && cargo build --release --example scaleout_bench
//! cargo run --release --example scaleout_bench -- --records 200000 --rounds 3
//! ```
//!
//! **Throughput.** Rounds of 1, 2 and 4 processes (by default; `--processes`),
//! interleaved (1p, 2p, 4p, 1p, ...), each on a fresh share group and fresh
//! source and target topics. The total number of workers (`--workers`) is
//! split evenly over the processes. Every process is started, the bench
//! waits until each serves `sharestream_runtime_records_in_total` on its
//! `--metrics-listen` endpoint and then `--settle-ms` more (so that every
//! member has joined and the assignment has settled: the heartbeat
//! interval is 5 s), then produces the N records and measures from the
//! first produced record until the processes' summed
//! `sharestream_runtime_records_committed_total` reaches N. The target is
//! then read back read_committed: every record exactly once.
//!
//! **Recovery.** Two processes mirror a stream produced at a fixed rate;
//! once the victim has committed records and the stream has run
//! `--kill-after-ms`, the victim is killed with SIGKILL, the producer stops
//! and the victim is restarted at once: with `--instance-id` the same one,
//! without it none (a fresh identity, as a supervisor starting the same
//! command again). The recovery time runs from the kill until the target
//! holds, read_committed, every record produced (the dead process's open
//! transaction and acquired records done by a live process).
//!
//! Exits with status 1 on any exactly-once violation (a duplicate or a
//! missing record in a target) or a run that does not finish in time.

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use sharestream::client::admin::{AdminClient, AlterConfigOp, NewTopic};
use sharestream::client::{ConnectionConfig, Metadata, Producer, ProducerConfig, ProducerRecord};
use sharestream::runtime::verify::{CommittedReader, CommittedRecord, read_committed};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Scale-out benchmark of sharestream (issue #15).
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// The broker binary.
    #[arg(long, default_value = "target/release/sharestream")]
    broker_bin: PathBuf,
    /// The mirror binary (package `sharestream-mirror`).
    #[arg(long, default_value = "target/release/mirror")]
    mirror_bin: PathBuf,
    /// Throughput: records per round.
    #[arg(long, default_value_t = 200_000)]
    records: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// Partitions of every source (and target) topic.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Throughput: total workers, split evenly over the processes.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Throughput: process counts compared, in round order.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    processes: Vec<usize>,
    /// Throughput: rounds (each runs every process count once).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Wait after every process serves its metrics, before producing.
    #[arg(long, default_value_t = 6_000)]
    settle_ms: u64,
    /// The mirror's --commit-interval-ms.
    #[arg(long, default_value_t = 100)]
    commit_interval_ms: u64,
    /// Broker --share-max-record-locks (in-flight records per share
    /// partition; exactly-once needs Kafka's maximum for throughput).
    #[arg(long, default_value_t = 10_000)]
    max_record_locks: i32,
    /// Broker --share-record-lock-duration-ms (unset: Kafka's 30 s).
    #[arg(long)]
    record_lock_ms: Option<i32>,
    /// Broker --share-session-timeout-ms (unset: Kafka's 45 s).
    #[arg(long)]
    session_timeout_ms: Option<i32>,
    /// Recovery: runs per mode (with and without --instance-id).
    #[arg(long, default_value_t = 3)]
    recovery_runs: usize,
    /// Recovery: workers per process (two processes).
    #[arg(long, default_value_t = 2)]
    recovery_workers: usize,
    /// Recovery: records per second of the input stream.
    #[arg(long, default_value_t = 5_000)]
    recovery_rate: u64,
    /// Recovery: kill the victim after the stream ran this long (and it
    /// committed something).
    #[arg(long, default_value_t = 4_000)]
    kill_after_ms: u64,
    /// Give up on a run after this long.
    #[arg(long, default_value_t = 180)]
    run_timeout_secs: u64,
    /// Skip the throughput rounds.
    #[arg(long)]
    skip_throughput: bool,
    /// Skip the recovery runs.
    #[arg(long)]
    skip_recovery: bool,
    /// Keep the logs of the broker and the mirror processes here (default:
    /// a temporary directory, removed at the end).
    #[arg(long)]
    log_dir: Option<PathBuf>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local address")
        .port()
}

fn log_file(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sigterm(child: &Child) {
    // SAFETY: kill(2) on the id of a child this process spawned and has not
    // reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

/// SIGTERM, then SIGKILL after `grace`; reaps the child.
async fn stop_child(child: &mut Child, grace: Duration) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    sigterm(child);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
}

struct BrokerProcess {
    child: Child,
    bootstrap: String,
}

async fn start_broker(args: &Args, data_dir: &Path, log_dir: &Path) -> BrokerProcess {
    let port = free_port();
    let bootstrap = format!("127.0.0.1:{port}");
    let mut cmd = Command::new(&args.broker_bin);
    cmd.args(["broker", "--listen", &bootstrap, "--data-dir"])
        .arg(data_dir)
        .args(["--fsync", "never", "--share-max-record-locks"])
        .arg(args.max_record_locks.to_string());
    if let Some(ms) = args.record_lock_ms {
        cmd.arg("--share-record-lock-duration-ms")
            .arg(ms.to_string());
    }
    if let Some(ms) = args.session_timeout_ms {
        cmd.arg("--share-session-timeout-ms").arg(ms.to_string());
    }
    let log = log_dir.join("broker.log");
    let child = cmd
        .env("RUST_LOG", "warn")
        .stdout(log_file(&log))
        .stderr(log_file(&log))
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("cannot start {}: {e}", args.broker_bin.display());
            std::process::exit(2)
        });
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(&bootstrap).await.is_err() {
        if Instant::now() > deadline {
            eprintln!(
                "the broker did not listen on {bootstrap}; see {}",
                log.display()
            );
            std::process::exit(2);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    BrokerProcess { child, bootstrap }
}

/// One mirror process.
struct Mirror {
    child: Child,
    metrics: SocketAddr,
}

struct MirrorSpec<'a> {
    bootstrap: &'a str,
    topic: &'a str,
    group: &'a str,
    workers: usize,
    instance_id: Option<&'a str>,
    log: PathBuf,
}

fn spawn_mirror(args: &Args, spec: &MirrorSpec<'_>) -> Mirror {
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("socket address");
    let mut cmd = Command::new(&args.mirror_bin);
    cmd.args([
        "--bootstrap-server",
        spec.bootstrap,
        "--topics",
        spec.topic,
        "--group",
        spec.group,
        "--workers",
        &spec.workers.to_string(),
        "--commit-interval-ms",
        &args.commit_interval_ms.to_string(),
        "--metrics-listen",
        &metrics.to_string(),
    ]);
    if let Some(id) = spec.instance_id {
        cmd.args(["--instance-id", id]);
    }
    let child = cmd
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log_file(&spec.log))
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("cannot start {}: {e}", args.mirror_bin.display());
            std::process::exit(2)
        });
    Mirror { child, metrics }
}

/// `name`'s value in the Prometheus text at `addr`, if it answers.
async fn scrape(addr: SocketAddr, name: &str) -> Option<u64> {
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n")
            .await
            .ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).await.ok()?;
        body.lines().find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(' ')?
                .trim()
                .parse::<f64>()
                .ok()
                .map(|v| v as u64)
        })
    };
    tokio::time::timeout(Duration::from_secs(2), fetch)
        .await
        .ok()
        .flatten()
}

/// Waits until every process serves its metrics; false on timeout or if
/// one exited.
async fn wait_up(ms: &mut [Mirror], timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    for m in ms.iter_mut() {
        while scrape(m.metrics, "sharestream_runtime_records_in_total")
            .await
            .is_none()
        {
            if Instant::now() > deadline || matches!(m.child.try_wait(), Ok(Some(_))) {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    true
}

async fn committed_sum(ms: &[Mirror]) -> u64 {
    let mut sum = 0;
    for m in ms {
        sum += scrape(m.metrics, "sharestream_runtime_records_committed_total")
            .await
            .unwrap_or(0);
    }
    sum
}

/// Creates the source and the target topic of a run and makes its group
/// start at the earliest offset.
async fn prepare(admin: &AdminClient, topic: &str, target: &str, group: &str, partitions: i32) {
    for t in [topic, target] {
        admin
            .create_topic(NewTopic::new(t, partitions))
            .await
            .unwrap_or_else(|e| panic!("create topic {t}: {e}"));
    }
    admin
        .incremental_alter_group_config(
            group,
            &[(
                "share.auto.offset.reset",
                AlterConfigOp::Set("earliest".into()),
            )],
        )
        .await
        .expect("group config");
}

async fn producer(bootstrap: &str) -> Producer {
    Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(bootstrap)
            .linger(Duration::from_millis(5))
            .batch_size(256 * 1024)
            .build()
            .expect("producer config"),
    )
    .await
    .expect("producer")
}

/// Record `i`: its value starts with `i` in 12 characters, padded to the
/// record size; round-robin over the partitions.
fn record(topic: &str, i: u64, partitions: i32, pad: &str) -> ProducerRecord {
    ProducerRecord::new(topic.to_string(), format!("{i:>12}{pad}"))
        .with_key(format!("k{}", i % 1000))
        .with_partition((i % partitions as u64) as i32)
}

fn index_of(r: &CommittedRecord) -> Option<u64> {
    let v = r.value.as_ref()?;
    std::str::from_utf8(v.get(..12)?).ok()?.trim().parse().ok()
}

/// Exactly-once check of a target: every index below `n` once, nothing
/// else.
#[derive(Debug, Default, Clone, Copy)]
struct Check {
    records: usize,
    missing: usize,
    duplicated: usize,
    foreign: usize,
}

impl Check {
    fn of(records: &[CommittedRecord], n: u64) -> Check {
        let mut seen = vec![0u32; n as usize];
        let mut foreign = 0;
        for r in records {
            match index_of(r) {
                Some(i) if i < n => seen[i as usize] += 1,
                _ => foreign += 1,
            }
        }
        Check {
            records: records.len(),
            missing: seen.iter().filter(|&&c| c == 0).count(),
            duplicated: seen.iter().filter(|&&c| c > 1).count(),
            foreign,
        }
    }

    fn ok(&self) -> bool {
        self.missing == 0 && self.duplicated == 0 && self.foreign == 0
    }
}

/// Reads `target` read_committed until it holds `n` records (or `wait`
/// passed) and checks it.
async fn verify(bootstrap: &str, target: &str, n: u64, wait: Duration) -> Check {
    let md = Metadata::new(vec![bootstrap.to_string()], ConnectionConfig::default());
    let deadline = Instant::now() + wait;
    loop {
        let records = read_committed(&md, target).await.expect("read the target");
        if records.len() as u64 >= n || Instant::now() > deadline {
            return Check::of(&records, n);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct ThroughputRun {
    processes: usize,
    round: usize,
    seconds: f64,
    produce_seconds: f64,
    shares: Vec<u64>,
    check: Check,
    finished: bool,
}

async fn throughput_run(
    args: &Args,
    bootstrap: &str,
    admin: &AdminClient,
    log_dir: &Path,
    round: usize,
    processes: usize,
) -> ThroughputRun {
    let name = format!("tp-r{round}-{processes}p");
    let target = format!("source.{name}");
    prepare(admin, &name, &target, &name, args.partitions).await;
    let workers = (args.workers / processes).max(1);
    let mut ms: Vec<Mirror> = (0..processes)
        .map(|i| {
            spawn_mirror(
                args,
                &MirrorSpec {
                    bootstrap,
                    topic: &name,
                    group: &name,
                    workers,
                    instance_id: None,
                    log: log_dir.join(format!("{name}-{i}.log")),
                },
            )
        })
        .collect();
    if !wait_up(&mut ms, Duration::from_secs(60)).await {
        eprintln!(
            "  {name}: a mirror process did not start; see {}",
            log_dir.display()
        );
        std::process::exit(2);
    }
    tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;

    let n = args.records as u64;
    let p = producer(bootstrap).await;
    let pad = "x".repeat(args.record_size.saturating_sub(12));
    let started = Instant::now();
    let mut pending = Vec::with_capacity(args.records);
    for i in 0..n {
        pending.push(p.send(record(&name, i, args.partitions, &pad)).await);
    }
    for f in pending {
        f.await.expect("produce");
    }
    let produce_seconds = started.elapsed().as_secs_f64();
    p.close().await;

    let deadline = started + Duration::from_secs(args.run_timeout_secs);
    let mut finished = true;
    while committed_sum(&ms).await < n {
        if Instant::now() > deadline {
            finished = false;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut shares = Vec::new();
    for m in &ms {
        shares.push(
            scrape(m.metrics, "sharestream_runtime_records_committed_total")
                .await
                .unwrap_or(0),
        );
    }
    for m in &mut ms {
        sigterm(&m.child);
    }
    for m in &mut ms {
        stop_child(&mut m.child, Duration::from_secs(15)).await;
    }
    let check = verify(bootstrap, &target, n, Duration::from_secs(10)).await;
    ThroughputRun {
        processes,
        round,
        seconds,
        produce_seconds,
        shares,
        check,
        finished,
    }
}

struct RecoveryRun {
    with_instance_id: bool,
    run: usize,
    seconds: f64,
    produced: u64,
    behind_at_kill: u64,
    victim_committed: u64,
    check: Check,
    finished: bool,
}

async fn recovery_run(
    args: &Args,
    bootstrap: &str,
    admin: &AdminClient,
    log_dir: &Path,
    with_instance_id: bool,
    run: usize,
) -> RecoveryRun {
    let mode = if with_instance_id { "id" } else { "noid" };
    let name = format!("rc-{mode}-{run}");
    let target = format!("source.{name}");
    prepare(admin, &name, &target, &name, args.partitions).await;
    let ids: Vec<Option<String>> = (0..2)
        .map(|i| with_instance_id.then(|| format!("{name}-p{i}")))
        .collect();
    let spec = |i: usize, restart: bool| MirrorSpec {
        bootstrap,
        topic: &name,
        group: &name,
        workers: args.recovery_workers,
        instance_id: ids[i].as_deref(),
        log: log_dir.join(format!(
            "{name}-{i}{}.log",
            if restart { "-restarted" } else { "" }
        )),
    };
    let mut ms: Vec<Mirror> = (0..2)
        .map(|i| spawn_mirror(args, &spec(i, false)))
        .collect();
    if !wait_up(&mut ms, Duration::from_secs(60)).await {
        eprintln!(
            "  {name}: a mirror process did not start; see {}",
            log_dir.display()
        );
        std::process::exit(2);
    }
    tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;

    // The input stream: `recovery_rate` records per second in 10 ms ticks.
    let produced = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let stream = {
        let p = producer(bootstrap).await;
        let (produced, stop) = (produced.clone(), stop.clone());
        let topic = name.clone();
        let partitions = args.partitions;
        let rate = args.recovery_rate;
        let pad = "x".repeat(args.record_size.saturating_sub(12));
        tokio::spawn(async move {
            let start = Instant::now();
            let mut next = 0u64;
            let mut pending = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                while next < due {
                    pending.push(p.send(record(&topic, next, partitions, &pad)).await);
                    next += 1;
                }
                produced.store(next, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for f in pending {
                f.await.expect("produce");
            }
            p.close().await;
            next
        })
    };
    let stream_start = Instant::now();
    let run_deadline = stream_start + Duration::from_secs(args.run_timeout_secs);
    // Kill once the stream ran long enough and the victim committed some.
    let victim = 0;
    let victim_committed = loop {
        if stream_start.elapsed() >= Duration::from_millis(args.kill_after_ms) {
            let c = scrape(
                ms[victim].metrics,
                "sharestream_runtime_records_committed_total",
            )
            .await
            .unwrap_or(0);
            if c > 0 || Instant::now() > run_deadline {
                break c;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let all_committed_before = committed_sum(&ms).await;
    let produced_at_kill = produced.load(Ordering::SeqCst);
    let _ = ms[victim].child.kill();
    let killed = Instant::now();
    let _ = ms[victim].child.wait();
    stop.store(true, Ordering::SeqCst);
    ms[victim] = spawn_mirror(args, &spec(victim, true));
    let total = stream.await.expect("the producer task");

    // Until every produced record is in the target, read_committed.
    let md = Metadata::new(vec![bootstrap.to_string()], ConnectionConfig::default());
    let mut reader = CommittedReader::new(&md, &target)
        .await
        .expect("read the target");
    let mut seen = vec![0u32; total as usize];
    let mut distinct = 0u64;
    let mut bad = Check::default();
    let mut finished = true;
    while distinct < total {
        if Instant::now() > run_deadline {
            finished = false;
            break;
        }
        for r in reader.poll().await.expect("read the target") {
            match index_of(&r) {
                Some(i) if i < total => {
                    seen[i as usize] += 1;
                    match seen[i as usize] {
                        1 => distinct += 1,
                        2 => bad.duplicated += 1,
                        _ => {}
                    }
                }
                _ => bad.foreign += 1,
            }
        }
        if distinct < total {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let seconds = killed.elapsed().as_secs_f64();
    for m in &mut ms {
        sigterm(&m.child);
    }
    for m in &mut ms {
        stop_child(&mut m.child, Duration::from_secs(15)).await;
    }
    // The whole target once more, after the processes stopped.
    let mut check = verify(bootstrap, &target, total, Duration::from_secs(5)).await;
    check.duplicated = check.duplicated.max(bad.duplicated);
    check.foreign = check.foreign.max(bad.foreign);
    RecoveryRun {
        with_instance_id,
        run,
        seconds,
        produced: total,
        behind_at_kill: produced_at_kill.saturating_sub(all_committed_before),
        victim_committed,
        check,
        finished,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn check_text(c: &Check) -> String {
    if c.ok() {
        format!("OK ({} exactly once)", c.records)
    } else {
        format!(
            "VIOLATION: {} missing, {} duplicated, {} foreign ({} records)",
            c.missing, c.duplicated, c.foreign, c.records
        )
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if args.processes.contains(&0) || args.workers == 0 {
        eprintln!("--processes and --workers must be positive");
        std::process::exit(2);
    }
    let tmp = tempfile::tempdir().expect("temporary directory");
    let log_dir = args
        .log_dir
        .clone()
        .unwrap_or_else(|| tmp.path().join("logs"));
    std::fs::create_dir_all(&log_dir).expect("log directory");
    let data_dir = tmp.path().join("data");
    let mut broker = start_broker(&args, &data_dir, &log_dir).await;
    let bootstrap = broker.bootstrap.clone();
    let admin = AdminClient::new(vec![bootstrap.clone()], ConnectionConfig::default());
    println!(
        "sharestream scale-out bench: broker {} on {bootstrap} (data dir, --fsync never, \
         --share-max-record-locks {}), mirror {}",
        args.broker_bin.display(),
        args.max_record_locks,
        args.mirror_bin.display()
    );
    let mut violations = 0;

    let mut tp = Vec::new();
    if !args.skip_throughput {
        println!(
            "throughput: {} records of {} B, {} partitions, {} workers in total, \
             processes {:?}, {} interleaved rounds",
            args.records,
            args.record_size,
            args.partitions,
            args.workers,
            args.processes,
            args.rounds
        );
        for round in 1..=args.rounds {
            for &np in &args.processes {
                let r = throughput_run(&args, &bootstrap, &admin, &log_dir, round, np).await;
                println!(
                    "  round {} {}p x {}w: {:6.2} s  {:>8.0} rec/s  (produced in {:.2} s)  \
                     per process {:?}  {}{}",
                    r.round,
                    r.processes,
                    (args.workers / np).max(1),
                    r.seconds,
                    args.records as f64 / r.seconds,
                    r.produce_seconds,
                    r.shares,
                    check_text(&r.check),
                    if r.finished { "" } else { "  TIMED OUT" }
                );
                if !r.check.ok() || !r.finished {
                    violations += 1;
                }
                tp.push(r);
            }
        }
    }

    let mut rc = Vec::new();
    if !args.skip_recovery {
        println!(
            "recovery: 2 processes x {} workers, {} rec/s stream, SIGKILL one after {} ms, \
             restart it at once (same --instance-id / none)",
            args.recovery_workers, args.recovery_rate, args.kill_after_ms
        );
        for run in 1..=args.recovery_runs {
            for with_id in [true, false] {
                let r = recovery_run(&args, &bootstrap, &admin, &log_dir, with_id, run).await;
                println!(
                    "  run {} {}: {:6.2} s from the kill to all {} records committed \
                     (victim had committed {}, {} behind at the kill)  {}{}",
                    r.run,
                    if r.with_instance_id {
                        "with --instance-id   "
                    } else {
                        "without --instance-id"
                    },
                    r.seconds,
                    r.produced,
                    r.victim_committed,
                    r.behind_at_kill,
                    check_text(&r.check),
                    if r.finished { "" } else { "  TIMED OUT" }
                );
                if !r.check.ok() || !r.finished {
                    violations += 1;
                }
                rc.push(r);
            }
        }
    }

    stop_child(&mut broker.child, Duration::from_secs(10)).await;

    println!();
    println!("| scenario | runs | median | rec/s (median) | ratio to 1p |");
    println!("|---|---|---|---|---|");
    let base = median(
        tp.iter()
            .filter(|r| r.processes == 1)
            .map(|r| r.seconds)
            .collect(),
    );
    for &np in &args.processes {
        let secs: Vec<f64> = tp
            .iter()
            .filter(|r| r.processes == np)
            .map(|r| r.seconds)
            .collect();
        if secs.is_empty() {
            continue;
        }
        let runs = secs.len();
        let m = median(secs);
        let ratio = if base.is_finite() {
            // Throughput ratio: >1 is faster than one process.
            format!("{:.2}", base / m)
        } else {
            "-".into()
        };
        println!(
            "| throughput {np}p x {}w | {runs} | {m:.2} s | {:.0} | {ratio} |",
            (args.workers / np).max(1),
            args.records as f64 / m,
        );
    }
    for with_id in [true, false] {
        let secs: Vec<f64> = rc
            .iter()
            .filter(|r| r.with_instance_id == with_id)
            .map(|r| r.seconds)
            .collect();
        if secs.is_empty() {
            continue;
        }
        let runs = secs.len();
        let all: Vec<String> = secs.iter().map(|s| format!("{s:.1}")).collect();
        println!(
            "| recovery {} --instance-id | {runs} | {:.2} s | runs: {} s | - |",
            if with_id { "with" } else { "without" },
            median(secs),
            all.join(", ")
        );
    }
    if args.log_dir.is_none() && violations > 0 {
        // Keep the logs of a failed run.
        let kept = std::env::temp_dir().join(format!("scaleout-bench-logs-{}", std::process::id()));
        let _ = std::fs::rename(&log_dir, &kept);
        eprintln!("logs kept in {}", kept.display());
    }
    if violations > 0 {
        eprintln!("{violations} run(s) violated exactly-once or did not finish");
        std::process::exit(1);
    }
}
