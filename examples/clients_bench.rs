//! Side-by-side client benchmark (issue #20): sharestream's Rust clients
//! against krafka's, each client in a process of its own, on the embedded
//! broker (`target/release/sharestream broker`) and, with `--kafka`, on
//! Apache Kafka too (started by scripts/kafka/start.sh).
//!
//! ```sh
//! cargo build --release -p sharestream-cli
//! cargo build --release --example clients_bench --example share_perf \
//!   --example produce_perf --example krafka_perf
//! target/release/examples/clients_bench            # embedded broker only
//! target/release/examples/clients_bench --kafka    # and Apache Kafka 4.4
//! ```
//!
//! Phases (each a fresh share group, topic or transactional id per run):
//!
//! - share consume, 100 B and 1 KiB records, topics of 1 and 4 partitions,
//!   loaded before the runs; one share consumer, explicit ACCEPT of every
//!   record, max.poll.records 500, share.acquire.mode record_limit
//!   (`--acquire-mode`) (`share_perf --explicit` against
//!   `krafka_perf share-consume`);
//! - produce, 100 B and 1 KiB, one partition; acks=all, idempotence,
//!   linger 5 ms, batch 16 KiB (`produce_perf` against `krafka_perf
//!   produce`);
//! - transactions of 1000 records of 100 B, committed one after the other;
//! - replay (phase `replay`): no client at all but a load generator for
//!   comparing the brokers (issue #20, item 4), `produce_perf --replay`:
//!   one pre-encoded 16 KiB batch of 100 B or 1 KiB records sent again and
//!   again (acks=all, 5 requests in flight), `--replay-factor` times the
//!   produce phase's records. It spends a small fraction of a broker's CPU
//!   per record, so its records/s are the broker's, not the load's.
//!
//! With `--java`, the share consume and produce phases also run Apache
//! Kafka's own Java tools (`ShareConsumerPerformance` at its defaults,
//! `ProducerPerformance` with the settings above) through
//! scripts/java_perf.sh; their CPU per record and peak RSS cover the whole
//! JVM, start-up included, and the table adds the ratio sharestream / java.
//! The transactions phase has no Java row (ProducerPerformance commits by
//! time, not by a record count).
//!
//! Each phase runs `--reps` rounds; within a round the clients run one
//! after the other, the order alternating between rounds. Per run: the
//! child's RESULT line (records/s, its CPU per record over the measured part
//! from getrusage, its peak RSS from VmHWM) and the broker's CPU over the
//! whole child run (utime + stime from /proc/<pid>/stat, 10 ms ticks)
//! divided by the records. The table holds medians and the ratio
//! sharestream / krafka; the load average is printed before and after each
//! phase. When both brokers ran, a second table puts them side by side:
//! for each phase and load, our broker's records/s and broker CPU per
//! record against Kafka's, and the ratios. The tables go to stdout and,
//! with `--out FILE`, to FILE.

// The bench leaves transparent huge pages as the kernel has them: the
// setting is inherited, and the Kafka it starts must run as it would alone
// (the clients and the embedded broker decide for themselves).
#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc =
    sharestream::alloc::GuardedAlloc::new().with_transparent_huge_pages();

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use sharestream::client::admin::{AdminClient, NewTopic};
use sharestream::client::{ConnectionConfig, Producer, ProducerConfig, ProducerRecord};

/// Side-by-side benchmark of sharestream's and krafka's clients.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// The `sharestream` binary (the embedded broker).
    #[arg(long, default_value = "target/release/sharestream")]
    broker_bin: PathBuf,
    /// Where share_perf, produce_perf and krafka_perf are.
    #[arg(long, default_value = "target/release/examples")]
    bin_dir: PathBuf,
    /// Rounds per phase (the table holds medians).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Records per share-consume and produce run at 100 B.
    #[arg(long, default_value_t = 500_000)]
    records_100: u64,
    /// Records per share-consume and produce run at 1 KiB.
    #[arg(long, default_value_t = 200_000)]
    records_1k: u64,
    /// Transactions per transactions run (of 1000 x 100 B each).
    #[arg(long, default_value_t = 100)]
    transactions: u64,
    /// share.acquire.mode of both share consumers: record_limit (at most
    /// max.poll.records per fetch, the mode of the issue's measurements) or
    /// batch_optimized.
    #[arg(long, default_value = "record_limit")]
    acquire_mode: String,
    /// Phases to run (comma separated: share, produce, txn, replay).
    #[arg(long, default_value = "share,produce,txn,replay")]
    phases: String,
    /// The replay phase sends this many times the produce phase's records
    /// (its runs are otherwise a few hundred milliseconds long).
    #[arg(long, default_value_t = 5)]
    replay_factor: u64,
    /// Keep the embedded broker's data in memory instead of a temporary
    /// `--data-dir` with `--fsync never`.
    #[arg(long)]
    memory: bool,
    /// Also run every phase against Apache Kafka (scripts/kafka/start.sh;
    /// also when BENCH_KAFKA=1).
    #[arg(long)]
    kafka: bool,
    /// Skip the embedded broker (with --kafka: Kafka only).
    #[arg(long)]
    no_embedded: bool,
    /// Write the markdown table here too.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Before each producing run, write dirty pages back and drop the page cache
    /// (`sync; echo 3 > /proc/sys/vm/drop_caches`, needs root; host-wide).
    /// On a virtual machine whose page cache keeps growing into memory the
    /// guest never touched, every write of a broker's log then costs a
    /// first touch of that memory (the kernel's copy into the page cache
    /// took 40-55 % of our broker's CPU at 1 KiB, 4-5x its CPU per record
    /// when the cache was dropped); dropping the cache before each run
    /// gives both brokers memory that is already backed.
    #[arg(long)]
    drop_caches: bool,
    /// Also run Apache Kafka's own Java tools in the share consume and
    /// produce phases (ShareConsumerPerformance, ProducerPerformance),
    /// through `--java-script`; their CPU and peak RSS cover the whole JVM.
    #[arg(long)]
    java: bool,
    /// The wrapper that runs a Java tool and prints a RESULT line.
    #[arg(long, default_value = "scripts/java_perf.sh")]
    java_script: PathBuf,
}

/// `--drop-caches` before one run; says so once if it cannot.
fn drop_caches() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static WARNED: AtomicBool = AtomicBool::new(false);
    let _ = Command::new("sync").status();
    if let Err(e) = std::fs::write("/proc/sys/vm/drop_caches", "3\n")
        && !WARNED.swap(true, Ordering::Relaxed)
    {
        eprintln!(
            "--drop-caches: cannot write /proc/sys/vm/drop_caches ({e}); runs go on without it"
        );
    }
}

/// The embedded broker's name in the tables.
const EMBEDDED: &str = "sharestream broker";

/// A broker under test.
struct Broker {
    name: &'static str,
    bootstrap: String,
    pid: u32,
    child: Option<Child>,
    kafka_dir: Option<String>,
    _data: Option<tempfile::TempDir>,
}

impl Broker {
    fn embedded(args: &Args) -> Self {
        let data = (!args.memory).then(|| tempfile::tempdir().expect("temporary data dir"));
        let mut cmd = Command::new(&args.broker_bin);
        cmd.args(["broker", "--listen", "127.0.0.1:0"]);
        match &data {
            Some(d) => {
                cmd.arg("--data-dir")
                    .arg(d.path())
                    .args(["--fsync", "never"]);
            }
            None => {
                cmd.arg("--memory");
            }
        }
        let mut child = cmd
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", args.broker_bin.display()));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("the broker's first line");
        let addr = line
            .trim()
            .strip_prefix("sharestream broker listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from the broker: {line:?}"))
            .to_string();
        Self {
            name: EMBEDDED,
            bootstrap: addr,
            pid: child.id(),
            child: Some(child),
            kafka_dir: None,
            _data: data,
        }
    }

    fn kafka() -> Self {
        let out = Command::new("scripts/kafka/start.sh")
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/kafka/start.sh (from the repository root)");
        assert!(out.status.success(), "scripts/kafka/start.sh failed");
        let text = String::from_utf8_lossy(&out.stdout);
        let get = |name: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .map(|v| v.trim_matches(['"', '\'']).to_string())
                .unwrap_or_else(|| panic!("start.sh printed no {name}: {text}"))
        };
        Self {
            name: "Apache Kafka 4.4",
            bootstrap: get("KAFKA_BOOTSTRAP"),
            pid: get("KAFKA_PID").parse().expect("KAFKA_PID"),
            child: None,
            kafka_dir: Some(get("KAFKA_DIR")),
            _data: None,
        }
    }

    /// utime + stime of the broker in seconds.
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // Fields after the command name (which may hold spaces): state is
        // field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| {
            f.get(i - 3)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        (ticks(14) + ticks(15)) / hz
    }

    fn status_mib(&self, field: &str) -> f64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<f64>().ok())
            })
            .unwrap_or(0.0)
            / 1024.0
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // --clean: the node's data (gigabytes after a run) goes with it.
        if let Some(dir) = &self.kafka_dir {
            let _ = Command::new("scripts/kafka/stop.sh")
                .arg(dir)
                .arg("--clean")
                .status();
        }
    }
}

/// One client run's figures.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    records_per_s: f64,
    cpu_us_per_record: f64,
    peak_rss_mib: f64,
    broker_cpu_us_per_record: f64,
}

fn field(line: &str, name: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
}

/// Runs one child to completion and measures it.
fn run_child(broker: &Broker, bin: &Path, args: &[String]) -> Option<Run> {
    let before = broker.cpu_seconds();
    let out = Command::new(bin)
        .args(args)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    let broker_cpu = broker.cpu_seconds() - before;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with("RESULT"));
    let Some(line) = line.filter(|l| !l.contains("error=")) else {
        eprintln!(
            "  {} {:?} failed ({}): {}",
            bin.display(),
            args,
            out.status,
            text.trim()
        );
        return None;
    };
    let records = field(line, "records")?;
    Some(Run {
        records_per_s: field(line, "records_per_s")?,
        cpu_us_per_record: field(line, "cpu_us_per_record")?,
        peak_rss_mib: field(line, "peak_rss_mib")?,
        broker_cpu_us_per_record: broker_cpu * 1e6 / records.max(1.0),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Loads `n` records of `size` bytes into a new topic of `partitions`
/// partitions with our producer (before any measured run).
async fn load_topic(bootstrap: &str, topic: &str, partitions: i32, n: u64, size: usize) {
    let admin = AdminClient::new(vec![bootstrap.to_string()], ConnectionConfig::default());
    admin
        .create_topic(NewTopic::new(topic, partitions))
        .await
        .unwrap_or_else(|e| panic!("create {topic}: {e}"));
    let config = ProducerConfig::from_properties([
        ("bootstrap.servers", bootstrap),
        ("linger.ms", "5"),
        ("batch.size", "16384"),
        // Setup, not measured. With idempotence, loading a topic Apache
        // Kafka had just created failed once with OUT_OF_ORDER_SEQUENCE_NUMBER
        // (4 partitions, explicit partitions); not investigated here.
        ("enable.idempotence", "false"),
    ])
    .expect("producer config");
    let producer = Producer::new(config).await.expect("producer");
    let value = Bytes::from(vec![b'x'; size]);
    let mut deliveries = Vec::new();
    for i in 0..n {
        let record = ProducerRecord::new(topic, value.clone())
            .with_partition((i % partitions as u64) as i32);
        deliveries.push(producer.send(record).await);
        if deliveries.len() >= 50_000 {
            for d in deliveries.drain(..) {
                d.await.expect("load delivery");
            }
        }
    }
    for d in deliveries {
        d.await.expect("load delivery");
    }
    producer.close().await;
}

/// One row of the table.
struct Row {
    broker: &'static str,
    phase: String,
    clients: &'static [&'static str],
    runs: BTreeMap<&'static str, Vec<Run>>,
    load: String,
}

const CLIENTS: &[&str] = &["sharestream", "krafka"];
/// The same with Kafka's Java tool (`--java`), where one applies.
const CLIENTS_JAVA: &[&str] = &["sharestream", "krafka", "java"];
/// The replay phase's only load (not a client).
const REPLAY: &[&str] = &["replay"];

fn run_phase(
    args: &Args,
    broker: &Broker,
    phase: String,
    clients: &'static [&'static str],
    mut command: impl FnMut(&'static str, usize) -> (PathBuf, Vec<String>),
) -> Row {
    let load_before = loadavg();
    eprintln!("{} / {phase} (load {load_before})", broker.name);
    let mut runs: BTreeMap<&'static str, Vec<Run>> = BTreeMap::new();
    for rep in 0..args.reps {
        let order: Vec<&'static str> = if rep % 2 == 0 {
            clients.to_vec()
        } else {
            clients.iter().rev().copied().collect()
        };
        for client in order {
            let (bin, cargs) = command(client, rep);
            // The share phases read what was loaded before them: their
            // cache is kept.
            if args.drop_caches && !phase.starts_with("share") {
                drop_caches();
            }
            if let Some(r) = run_child(broker, &bin, &cargs) {
                eprintln!(
                    "  {client:<11} {:>10.0} rec/s  {:>6.2} us/rec  {:>6.1} MiB  broker {:>6.2} us/rec",
                    r.records_per_s,
                    r.cpu_us_per_record,
                    r.peak_rss_mib,
                    r.broker_cpu_us_per_record
                );
                runs.entry(client).or_default().push(r);
            }
        }
    }
    Row {
        broker: broker.name,
        phase,
        clients,
        runs,
        load: format!("{load_before} → {}", loadavg()),
    }
}

fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str(
        "| broker | phase | client | records/s | client CPU µs/record | peak RSS MiB | broker CPU µs/record | runs | load avg (1/5/15 min) before → after |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let med = |c: &str, f: fn(&Run) -> f64| {
            median(
                row.runs
                    .get(c)
                    .map_or(Vec::new(), |v| v.iter().map(f).collect()),
            )
        };
        for &c in row.clients {
            let n = row.runs.get(c).map_or(0, Vec::len);
            s.push_str(&format!(
                "| {} | {} | {c} | {:.0} | {:.2} | {:.1} | {:.2} | {n} | {} |\n",
                row.broker,
                row.phase,
                med(c, |r| r.records_per_s),
                med(c, |r| r.cpu_us_per_record),
                med(c, |r| r.peak_rss_mib),
                med(c, |r| r.broker_cpu_us_per_record),
                row.load
            ));
        }
        if !row.clients.contains(&"krafka") {
            continue;
        }
        for other in row.clients.iter().filter(|c| **c != "sharestream") {
            let ratio = |f: fn(&Run) -> f64| med("sharestream", f) / med(other, f);
            s.push_str(&format!(
                "| {} | {} | **ratio sharestream / {other}** | **{:.2}** | **{:.2}** | **{:.2}** | {:.2} | | |\n",
                row.broker,
                row.phase,
                ratio(|r| r.records_per_s),
                ratio(|r| r.cpu_us_per_record),
                ratio(|r| r.peak_rss_mib),
                ratio(|r| r.broker_cpu_us_per_record),
            ));
        }
    }
    s
}

/// Our broker beside Kafka: for each phase both ran and each load, the
/// records/s and the broker's CPU per record, and their ratios (records/s
/// ours / Kafka's; Kafka's CPU per record / ours, so that above 1 means ours
/// costs less). Empty when only one broker ran.
fn broker_table(rows: &[Row]) -> String {
    let mut s = String::new();
    for ours in rows.iter().filter(|r| r.broker == EMBEDDED) {
        let Some(kafka) = rows
            .iter()
            .find(|r| r.broker != EMBEDDED && r.phase == ours.phase)
        else {
            continue;
        };
        if s.is_empty() {
            s.push_str(
                "| phase | load | records/s ours | records/s Kafka | **ours / Kafka** | broker CPU µs/record ours | Kafka | **Kafka / ours** | load CPU µs/record ours / Kafka |\n\
                 |---|---|---|---|---|---|---|---|---|\n",
            );
        }
        for &c in ours.clients {
            let med = |row: &Row, f: fn(&Run) -> f64| {
                median(
                    row.runs
                        .get(c)
                        .map_or(Vec::new(), |v| v.iter().map(f).collect()),
                )
            };
            let (ro, rk) = (
                med(ours, |r| r.records_per_s),
                med(kafka, |r| r.records_per_s),
            );
            let (co, ck) = (
                med(ours, |r| r.broker_cpu_us_per_record),
                med(kafka, |r| r.broker_cpu_us_per_record),
            );
            s.push_str(&format!(
                "| {} | {c} | {ro:.0} | {rk:.0} | **{:.2}** | {co:.2} | {ck:.2} | **{:.2}** | {:.2} / {:.2} |\n",
                ours.phase,
                ro / rk,
                ck / co,
                med(ours, |r| r.cpu_us_per_record),
                med(kafka, |r| r.cpu_us_per_record),
            ));
        }
    }
    s
}

fn bench_broker(args: &Args, broker: &Broker, rt: &tokio::runtime::Runtime) -> Vec<Row> {
    let phases: Vec<&str> = args.phases.split(',').map(str::trim).collect();
    let bin = |name: &str| args.bin_dir.join(name);
    let tag = std::process::id();
    let bs = broker.bootstrap.clone();
    let mut rows = Vec::new();
    let clients = if args.java { CLIENTS_JAVA } else { CLIENTS };
    let sizes = [
        (100usize, args.records_100, "100 B"),
        (1024, args.records_1k, "1 KiB"),
    ];
    if phases.contains(&"share") {
        for (size, n, label) in sizes {
            for parts in [1, 4] {
                let topic = format!("share-{size}-{parts}-{tag}");
                eprintln!("loading {n} x {label} into {topic} ({parts} partitions)");
                rt.block_on(load_topic(&bs, &topic, parts, n, size));
                let phase = format!("share consume {label}, {parts} partition(s), {n} records");
                rows.push(run_phase(args, broker, phase, clients, |client, rep| {
                    let group = format!("g-{client}-{topic}-{rep}");
                    let common = [
                        "--bootstrap-server".to_string(),
                        bs.clone(),
                        "--topic".into(),
                        topic.clone(),
                        "--group".into(),
                        group,
                        "--num-records".into(),
                        n.to_string(),
                        "--max-poll-records".into(),
                        "500".into(),
                    ];
                    match client {
                        "sharestream" => {
                            let mut a = common.to_vec();
                            a.push("--explicit".into());
                            a.push("--consumer-prop".into());
                            a.push(format!("share.acquire.mode={}", args.acquire_mode));
                            (bin("share_perf"), a)
                        }
                        "java" => {
                            // Kafka's tool at its defaults (implicit
                            // acknowledgement, max.poll.records 500).
                            let mut a = vec!["share".to_string()];
                            a.extend(common[..8].iter().cloned());
                            a.extend(["--record-size".into(), size.to_string()]);
                            (args.java_script.clone(), a)
                        }
                        _ => {
                            let mut a = vec!["share-consume".to_string()];
                            a.extend(common);
                            a.push("--acquire-mode".into());
                            a.push(args.acquire_mode.clone());
                            (bin("krafka_perf"), a)
                        }
                    }
                }));
            }
        }
    }
    let produce = |client: &str, topic: String, n: u64, size: usize, txn: Option<String>| {
        let mut a = vec![
            "--bootstrap-server".to_string(),
            bs.clone(),
            "--topic".into(),
            topic,
            "--num-records".into(),
            n.to_string(),
            "--record-size".into(),
            size.to_string(),
        ];
        match client {
            "sharestream" => {
                for p in [
                    "acks=all",
                    "enable.idempotence=true",
                    "linger.ms=5",
                    "batch.size=16384",
                ] {
                    a.push("--producer-prop".into());
                    a.push(p.into());
                }
                if let Some(id) = txn {
                    a.extend([
                        "--transaction-records".into(),
                        "1000".into(),
                        "--producer-prop".into(),
                        format!("transactional.id={id}"),
                    ]);
                }
                (bin("produce_perf"), a)
            }
            "java" => {
                let mut j = vec!["produce".to_string()];
                j.extend(a);
                (args.java_script.clone(), j)
            }
            _ => {
                let mut k = vec!["produce".to_string()];
                k.extend(a);
                if let Some(id) = txn {
                    k.extend([
                        "--transaction-records".into(),
                        "1000".into(),
                        "--transactional-id".into(),
                        id,
                    ]);
                }
                (bin("krafka_perf"), k)
            }
        }
    };
    if phases.contains(&"produce") {
        for (size, n, label) in sizes {
            let phase = format!("produce {label}, 1 partition, {n} records");
            rows.push(run_phase(args, broker, phase, clients, |client, rep| {
                produce(
                    client,
                    format!("produce-{size}-{client}-{rep}-{tag}"),
                    n,
                    size,
                    None,
                )
            }));
        }
    }
    if phases.contains(&"txn") {
        let n = args.transactions * 1000;
        let phase = format!(
            "transactions of 1000 x 100 B, {} transactions",
            args.transactions
        );
        rows.push(run_phase(args, broker, phase, CLIENTS, |client, rep| {
            let id = format!("tx-{client}-{rep}-{tag}");
            produce(
                client,
                format!("txn-{client}-{rep}-{tag}"),
                n,
                100,
                Some(id),
            )
        }));
    }
    if phases.contains(&"replay") {
        for (size, n, label) in sizes {
            let n = n * args.replay_factor;
            let phase =
                format!("produce {label}, 1 partition, replayed 16 KiB batches, {n} records");
            rows.push(run_phase(args, broker, phase, REPLAY, |_, rep| {
                let a = vec![
                    "--bootstrap-server".to_string(),
                    bs.clone(),
                    "--topic".into(),
                    format!("replay-{size}-{rep}-{tag}"),
                    "--num-records".into(),
                    n.to_string(),
                    "--record-size".into(),
                    size.to_string(),
                    "--replay".into(),
                ];
                (bin("produce_perf"), a)
            }));
        }
    }
    eprintln!(
        "{}: RSS now {:.1} MiB, peak {:.1} MiB",
        broker.name,
        broker.status_mib("VmRSS:"),
        broker.status_mib("VmHWM:")
    );
    rows
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    for name in ["share_perf", "produce_perf", "krafka_perf"] {
        let p = args.bin_dir.join(name);
        assert!(
            p.exists(),
            "{} is missing: cargo build --release --example {name}",
            p.display()
        );
    }
    let started = format!("load average at start: {}", loadavg());
    let mut rows = Vec::new();
    if !args.no_embedded {
        let broker = Broker::embedded(&args);
        rows.extend(bench_broker(&args, &broker, &rt));
    }
    if args.kafka || std::env::var("BENCH_KAFKA").is_ok_and(|v| v == "1") {
        let broker = Broker::kafka();
        std::thread::sleep(Duration::from_secs(2));
        rows.extend(bench_broker(&args, &broker, &rt));
    }
    let mut md = format!(
        "{started}; at the end: {}; `nproc` = {}\n\n{}",
        loadavg(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        table(&rows)
    );
    let brokers = broker_table(&rows);
    if !brokers.is_empty() {
        md.push_str("\nOur broker against Kafka, the same load on each:\n\n");
        md.push_str(&brokers);
    }
    println!("{md}");
    if let Some(path) = &args.out {
        std::fs::write(path, &md).expect("write --out");
    }
}
