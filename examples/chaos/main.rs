//! Exactly-once under faults: the copier chaos test.
//!
//! `cargo run --release --example chaos -- run --broker-bin target/release/sharestream` (build the binary first: `cargo build --release -p sharestream-cli`)
//! (what `scripts/chaos.sh` does) starts the standalone broker on a fresh
//! data directory (`--fsync every-batch`), seeds the input topic
//! ([`seed`]), starts several copier processes in one share group
//! ([`copier`], this same binary's `copy` command: all of them instances of
//! ONE application, same id and configuration), and for a bounded time
//! SIGKILLs copiers (at random moments, and inside the kill windows the
//! copiers announce), pauses them (SIGSTOP ... SIGCONT, below and beyond
//! the lock duration, the session timeout and the transaction timeout) and
//! SIGKILLs the broker (restarted on the same data directory), restarting
//! each killed process. `--scenario elastic` instead scales the copiers
//! from 1 to 4 and back to 1 while records flow (no other fault), and
//! reports each process's share of the work. Then it waits until the output holds every
//! input record (or a drain deadline passes), stops the copiers (SIGTERM)
//! and the broker, and runs the independent checker ([`check`]). The
//! report is JSON (stdout and `--report`); the exit code is 1 when the
//! guarantee's promise broke.
//!
//! See docs/RELIABILITY.md.

mod check;
mod copier;
mod kafka_state;
mod payload;
mod seed;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use sharestream::client::admin::{AlterConfigOp, NewTopic};
use sharestream::client::{AdminClient, ConnectionConfig, Metadata};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use copier::{CopyArgs, Guarantee};

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

#[derive(Parser)]
#[command(about = "copier chaos test: seeder, copiers, chaos driver, checker")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// One copier process (started by `run`).
    Copy(CopyArgs),
    /// The whole test: broker, seeder, copiers, chaos, checker.
    Run(RunArgs),
}

/// What `run` does between seeding and checking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
enum Scenario {
    /// Copier kills, copier pauses and broker kills.
    Chaos,
    /// 1 -> 4 -> 1 copiers (SIGTERM and SIGKILL), no other fault.
    Elastic,
}

#[derive(Debug, Clone, clap::Args)]
struct RunArgs {
    /// The `sharestream` binary (the standalone broker).
    #[arg(long, default_value = "target/release/sharestream")]
    broker_bin: PathBuf,
    /// Working directory (data directory and logs); emptied first.
    #[arg(long, default_value = "/tmp/sharestream-chaos")]
    workdir: PathBuf,
    /// Broker port.
    #[arg(long, default_value_t = 19092)]
    port: u16,
    /// Partitions of the input and output topics.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Committed input records.
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Distinct keys.
    #[arg(long, default_value_t = 1000)]
    keys: u32,
    /// Records per seeder transaction.
    #[arg(long, default_value_t = 1000)]
    txn_size: u64,
    /// One aborted seeder transaction after this many committed ones.
    #[arg(long, default_value_t = 10)]
    abort_every: u64,
    /// Copier processes.
    #[arg(long, default_value_t = 3)]
    copiers: u32,
    /// Chaos (faults) or elastic (scaling).
    #[arg(long, value_enum, default_value = "chaos")]
    scenario: Scenario,
    /// Copier SIGSTOP/SIGCONT pauses during the chaos period (their
    /// lengths cycle through the pause kinds, see docs/RELIABILITY.md).
    #[arg(long, default_value_t = 4)]
    copier_pauses: u32,
    /// The broker's acquisition lock duration (share groups), ms.
    #[arg(long, default_value_t = 8000)]
    lock_ms: u64,
    /// The broker's share-group member session timeout, ms.
    #[arg(long, default_value_t = 10_000)]
    session_ms: u64,
    /// The copiers' transaction.timeout.ms.
    #[arg(long, default_value_t = 10_000)]
    txn_timeout_ms: u64,
    /// The copiers' `exactly.once.ledger.trim.interval.ms` (the ledger is
    /// trimmed during the run; 0: never).
    #[arg(long, default_value_t = 1000)]
    ledger_trim_interval_ms: u64,
    /// The copiers' `exactly.once.ledger.max.batch.age.ms`: below most
    /// pause lengths, so that paused copiers resume with batches too old
    /// to commit.
    #[arg(long, default_value_t = 6000)]
    ledger_max_batch_age_ms: u64,
    /// The copiers' `exactly.once.ledger.trim.margin.ms`.
    #[arg(long, default_value_t = 1000)]
    ledger_trim_margin_ms: u64,
    /// Copier SIGKILLs during the chaos period.
    #[arg(long, default_value_t = 10)]
    copier_kills: u32,
    /// Broker SIGKILLs during the chaos period.
    #[arg(long, default_value_t = 2)]
    broker_kills: u32,
    /// Length of the chaos period, seconds.
    #[arg(long, default_value_t = 60)]
    chaos_secs: u64,
    /// After the chaos period, how long to wait for the output to be
    /// complete, seconds.
    #[arg(long, default_value_t = 150)]
    drain_secs: u64,
    /// Copier guarantee.
    #[arg(long, value_enum, default_value = "exactly-once")]
    guarantee: Guarantee,
    /// The copiers' `exactly.once.mechanism` (auto, kip1289, ledger).
    #[arg(long, default_value = "auto")]
    mechanism: String,
    /// Run Apache Kafka instead of the embedded broker: the folder of
    /// `scripts/kafka` (start.sh, stop.sh). The nodes are started, SIGKILLed
    /// and restarted like the embedded broker.
    #[arg(long)]
    kafka_scripts: Option<PathBuf>,
    /// Two clusters: the input and the share group on a source cluster
    /// (port + 10), the outputs (and the exactly-once ledger) on the target
    /// cluster (port). Broker kills alternate between them.
    #[arg(long)]
    two_clusters: bool,
    /// Pause of the copiers in each kill window, ms.
    #[arg(long, default_value_t = 20)]
    window_pause_ms: u64,
    /// EndTxn(commit)s without an answer in each copier process (exactly
    /// once only; see the copier's flag of that name).
    #[arg(long, default_value_t = 2)]
    unanswered_commits: u64,
    /// max.poll.records of the copiers.
    #[arg(long, default_value_t = 500)]
    max_poll_records: usize,
    /// Random seed of the kill schedule.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the JSON report here too.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Keep the work directory (default: removed when the run passes).
    #[arg(long)]
    keep: bool,
}

/// Kills, pauses and restarts survived.
#[derive(Debug, Default, Clone, Serialize)]
struct Faults {
    copier_kills: u32,
    copier_kills_after_send: u32,
    copier_kills_after_stage: u32,
    copier_kills_random: u32,
    copier_restarts: u32,
    /// Copiers that exited on their own (not killed, not stopped).
    copier_crash_exits: u32,
    /// Of those, the ones that did not follow a broker kill within 30 s,
    /// or whose process had been paused: a paused copier must go back to
    /// work by itself after SIGCONT.
    copier_crash_exits_unexplained: u32,
    /// Of those, the copiers that had been paused.
    copier_exits_after_pause: u32,
    copier_pauses: u32,
    broker_kills: u32,
    broker_restarts: u32,
    /// Each pause: kind, length, victim, moment.
    pauses: Vec<PauseRecord>,
}

/// One SIGSTOP ... SIGCONT.
#[derive(Debug, Clone, Serialize)]
struct PauseRecord {
    kind: &'static str,
    secs: f64,
    victim: String,
    /// random, after_send or after_stage (the window the pause landed in).
    moment: &'static str,
    at_s: f64,
}

/// What the copier logs (stderr) say; the checker does not rely on them for
/// the records, only for errors.
#[derive(Debug, Default, Clone, Serialize)]
struct LogScan {
    /// Lines naming PRODUCER_FENCED or INVALID_PRODUCER_EPOCH.
    producer_fenced_lines: u64,
    /// Producer recoveries logged (a zombie re-initialized its producer).
    producer_recoveries_logged: u64,
    /// Of those, after a transaction whose end was unknown (D45).
    outcome_unknown_recoveries_logged: u64,
    /// Records released on their last delivery (the broker archives them).
    released_at_delivery_limit: u64,
    /// Runtime stops with an error (the process exits 3).
    fatal_errors: u64,
    /// Of those, fences (a live instance taking over another's id).
    fatal_fences: u64,
    /// A few of the fatal lines.
    fatal_samples: Vec<String>,
}

/// Records the broker archived at the delivery count limit.
#[derive(Debug, Default, Clone, Serialize)]
struct ArchivedReport {
    /// `sharestream_share_partition_archived_at_delivery_limit_total`
    /// for the group, scraped from the broker's metrics and summed over
    /// the broker's lives (the counter restarts with the process).
    archived_at_delivery_limit: u64,
    /// The same, from the broker log's warnings (offset ranges).
    archived_at_delivery_limit_logged: u64,
    /// Records the copiers logged as RELEASEd on their last delivery (the
    /// broker archives them; on Apache Kafka the only count this test
    /// sees).
    released_at_delivery_limit_by_copiers: u64,
    /// Metric scrapes that failed.
    scrape_failures: u32,
}

/// One copier process of the elastic scenario.
#[derive(Debug, Clone, Serialize)]
struct ProcessShare {
    name: String,
    started_at_s: f64,
    stopped_at_s: f64,
    /// sigterm, sigkill, or end (SIGTERM after the output was complete).
    stopped_by: &'static str,
    /// `sharestream_runtime_records_committed_total` at its last scrape
    /// before the stop.
    records_committed: u64,
    share_percent: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    guarantee: &'static str,
    /// The copiers' `exactly.once.mechanism` setting.
    mechanism: String,
    passed: bool,
    failures: Vec<String>,
    records: u64,
    seeded: seed::SeedReport,
    input_committed_records: u64,
    copiers: u32,
    partitions: i32,
    complete_before_deadline: bool,
    seconds_to_complete: f64,
    /// Through the intent ledger: its partitions' log start offsets at the
    /// end (records trimmed), as the target cluster reports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    ledger_log_start: Option<Vec<i64>>,
    seconds_total: f64,
    scenario: Scenario,
    /// Broker and copier settings the faults are measured against.
    settings: Settings,
    faults: Faults,
    output: check::OutputReport,
    /// Missing outputs explained by records archived at the limit.
    archived: ArchivedReport,
    /// Missing outputs not explained by archived records.
    lost: u64,
    share_state: check::ShareStateReport,
    copier_logs: LogScan,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    processes: Vec<ProcessShare>,
    /// What the broker did wrong that is not the copiers' doing, with the
    /// evidence from its log (Apache Kafka only; on our broker such a
    /// finding is a failure).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    broker_anomalies: Vec<String>,
    notes: Vec<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
struct Settings {
    lock_ms: u64,
    session_ms: u64,
    txn_timeout_ms: u64,
    ledger_trim_interval_ms: u64,
    ledger_max_batch_age_ms: u64,
    ledger_trim_margin_ms: u64,
    application_id: &'static str,
}

/// The cluster(s) under test: one node, or a target and a source node.
struct Broker {
    nodes: Vec<Node>,
    args: RunArgs,
    kills: usize,
}

/// One broker process: the embedded broker or an Apache Kafka node.
struct Node {
    port: u16,
    /// The embedded broker's data folder, or the Kafka node's folder.
    dir: PathBuf,
    child: Option<Child>,
    kafka_pid: Option<i32>,
}

fn log_file(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open a log file")
}

/// The outputs' (and ledger's) cluster.
fn target_bootstrap(args: &RunArgs) -> String {
    format!("127.0.0.1:{}", args.port)
}

/// The log start offsets of the exactly-once ledger's partitions, if the
/// copiers used one.
async fn ledger_log_start(args: &RunArgs) -> Option<Vec<i64>> {
    let topic = format!("{GROUP}-eos-ledger");
    let md = Metadata::new(vec![target_bootstrap(args)], ConnectionConfig::default());
    md.refresh(&[topic.as_str()]).await.ok()?;
    let n = md.topic(&topic)?.partition_count() as i32;
    let admin = AdminClient::new(vec![target_bootstrap(args)], ConnectionConfig::default());
    let asked: Vec<(String, i32)> = (0..n).map(|p| (topic.clone(), p)).collect();
    let starts = admin.list_start_offsets(&asked).await.ok()?;
    starts.into_values().map(|r| r.ok()).collect()
}

/// The input's and share group's cluster.
fn source_port(args: &RunArgs) -> u16 {
    if args.two_clusters {
        args.port + 10
    } else {
        args.port
    }
}

fn source_bootstrap(args: &RunArgs) -> String {
    format!("127.0.0.1:{}", source_port(args))
}

/// Broker settings a Kafka node needs for the chaos timings: group-level
/// session timeouts and locks below Kafka's default minimums.
const KAFKA_EXTRA_PROPERTIES: &str = "group.share.min.session.timeout.ms=1000\n\
group.share.min.heartbeat.interval.ms=100\n\
group.share.min.record.lock.duration.ms=1000\n";

impl Node {
    async fn start(args: &RunArgs, port: u16, dir: PathBuf, name: &str) -> Result<Node, String> {
        if let Some(scripts) = &args.kafka_scripts {
            let out = Command::new(scripts.join("start.sh"))
                .arg("--dir")
                .arg(&dir)
                .arg("--port")
                .arg(port.to_string())
                .arg("--wait")
                .arg("180")
                .env("KAFKA_EXTRA_PROPERTIES", KAFKA_EXTRA_PROPERTIES)
                .stdin(Stdio::null())
                .stderr(log_file(
                    &args.workdir.join(format!("kafka-{name}-start.log")),
                ))
                .output()
                .await
                .map_err(|e| format!("cannot run {}/start.sh: {e}", scripts.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "Kafka node {name} did not start (see {}/kafka-{name}-start.log)",
                    args.workdir.display()
                ));
            }
            let pid = std::fs::read_to_string(dir.join("kafka.pid"))
                .map_err(|e| format!("kafka.pid: {e}"))?
                .trim()
                .parse::<i32>()
                .map_err(|e| format!("kafka.pid: {e}"))?;
            return Ok(Node {
                port,
                dir,
                child: None,
                kafka_pid: Some(pid),
            });
        }
        let child = Command::new(&args.broker_bin)
            .arg("broker")
            .arg("--data-dir")
            .arg(&dir)
            .arg("--fsync")
            .arg("every-batch")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{}", port + 1))
            .arg("--share-record-lock-duration-ms")
            .arg(args.lock_ms.to_string())
            .arg("--share-session-timeout-ms")
            .arg(args.session_ms.to_string())
            .stdout(Stdio::null())
            .stderr(log_file(&args.workdir.join(if name == "source" {
                "broker.log".to_string()
            } else {
                format!("broker-{name}.log")
            })))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", args.broker_bin.display()))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(Node {
                    port,
                    dir,
                    child: Some(child),
                    kafka_pid: None,
                });
            }
            if Instant::now() > deadline {
                return Err("the broker did not listen within 30 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn kill(&mut self) {
        if let Some(pid) = self.kafka_pid {
            // SAFETY: signalling the Kafka node we started (its own
            // process group, by setsid in start.sh).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let deadline = Instant::now() + Duration::from_secs(20);
            // SAFETY: signal 0 only asks whether the process exists.
            while unsafe { libc::kill(pid, 0) } == 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    async fn stop(&mut self, args: &RunArgs) {
        if let Some(scripts) = &args.kafka_scripts {
            let _ = Command::new(scripts.join("stop.sh"))
                .arg(&self.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .await;
            return;
        }
        if let Some(child) = &mut self.child {
            if let Some(pid) = child.id() {
                // SAFETY: signalling a child process we own.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
            if tokio::time::timeout(Duration::from_secs(20), child.wait())
                .await
                .is_err()
            {
                self.kill().await;
            }
        }
    }
}

impl Broker {
    async fn start(args: &RunArgs) -> Result<Broker, String> {
        let kafka = args.kafka_scripts.is_some();
        let dir = |name: &str| {
            if kafka {
                args.workdir.join(format!("kafka-{name}"))
            } else if name == "source" {
                args.workdir.join("data")
            } else {
                args.workdir.join(format!("data-{name}"))
            }
        };
        let mut nodes = vec![Node::start(args, source_port(args), dir("source"), "source").await?];
        if args.two_clusters {
            nodes.push(Node::start(args, args.port, dir("target"), "target").await?);
        }
        Ok(Broker {
            nodes,
            args: args.clone(),
            kills: 0,
        })
    }

    /// SIGKILLs the next node in turn (they alternate with two clusters).
    async fn kill(&mut self) {
        let i = self.kills % self.nodes.len();
        self.nodes[i].kill().await;
    }

    /// Restarts the node the last kill took down.
    async fn restart(&mut self) -> Result<(), String> {
        let i = self.kills % self.nodes.len();
        self.kills += 1;
        let name = if i == 0 { "source" } else { "target" };
        let (port, dir) = (self.nodes[i].port, self.nodes[i].dir.clone());
        self.nodes[i] = Node::start(&self.args, port, dir, name).await?;
        Ok(())
    }

    async fn stop(&mut self) {
        for n in &mut self.nodes {
            n.stop(&self.args).await;
        }
    }
}

struct Copier {
    slot: u32,
    generation: u32,
    child: Option<Child>,
    restart_at: Option<Instant>,
    /// SIGSTOPped until then (SIGCONT is due).
    paused_until: Option<Instant>,
    /// This process was paused at some point.
    was_paused: bool,
    /// Elastic: the port of its runtime metrics, its last scrape.
    metrics_port: Option<u16>,
    committed: u64,
}

type Line = (u32, u32, String);

fn signal(child: &Child, sig: i32) {
    if let Some(pid) = child.id() {
        // SAFETY: signalling a child process we own.
        unsafe { libc::kill(pid as i32, sig) };
    }
}

fn spawn_copier(
    args: &RunArgs,
    slot: u32,
    generation: u32,
    metrics_port: Option<u16>,
    lines: &mpsc::UnboundedSender<Line>,
) -> Child {
    use std::io::Write as _;
    let exe = std::env::current_exe().expect("current exe");
    let log_path = args.workdir.join(format!("copier-{slot}.log"));
    let mut log = log_file(&log_path);
    let _ = writeln!(log, "=== chaos: copier-{slot} generation {generation}");
    // Every copier the same application and configuration: the slot is
    // only the driver's bookkeeping (log file, metrics port).
    let mut cmd = Command::new(exe);
    cmd.arg("copy")
        .arg("--bootstrap")
        .arg(target_bootstrap(args))
        .arg("--guarantee")
        .arg(match args.guarantee {
            Guarantee::ExactlyOnce => "exactly-once",
            Guarantee::AtLeastOnce => "at-least-once",
        })
        .arg("--mechanism")
        .arg(&args.mechanism)
        .args(
            args.two_clusters
                .then(|| ["--source-bootstrap".to_string(), source_bootstrap(args)])
                .into_iter()
                .flatten(),
        )
        .arg("--window-pause-ms")
        .arg(args.window_pause_ms.to_string())
        .arg("--unanswered-commits")
        .arg(match args.guarantee {
            Guarantee::ExactlyOnce => args.unanswered_commits.to_string(),
            Guarantee::AtLeastOnce => "0".to_string(),
        })
        .arg("--max-poll-records")
        .arg(args.max_poll_records.to_string())
        .arg("--transaction-timeout-ms")
        .arg(args.txn_timeout_ms.to_string())
        .arg("--ledger-trim-interval-ms")
        .arg(args.ledger_trim_interval_ms.to_string())
        .arg("--ledger-max-batch-age-ms")
        .arg(args.ledger_max_batch_age_ms.to_string())
        .arg("--ledger-trim-margin-ms")
        .arg(args.ledger_trim_margin_ms.to_string());
    if let Some(port) = metrics_port {
        cmd.arg("--metrics-listen").arg(format!("127.0.0.1:{port}"));
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn a copier");
    let stdout = child.stdout.take().expect("piped stdout");
    let tx = lines.clone();
    tokio::spawn(async move {
        let mut r = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = r.next_line().await {
            if tx.send((slot, generation, line)).is_err() {
                break;
            }
        }
    });
    child
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillMode {
    Random,
    AfterSend,
    AfterStage,
}

impl KillMode {
    fn name(self) -> &'static str {
        match self {
            KillMode::Random => "random",
            KillMode::AfterSend => "after_send",
            KillMode::AfterStage => "after_stage",
        }
    }
    fn line(self) -> &'static str {
        if self == KillMode::AfterSend {
            "window sent"
        } else {
            "window staged"
        }
    }
}

/// The pause kinds, measured against the settings: (name, length).
fn pause_kinds(args: &RunArgs) -> Vec<(&'static str, Duration)> {
    let lock = Duration::from_millis(args.lock_ms);
    let longest = Duration::from_millis(args.session_ms.max(args.txn_timeout_ms));
    let shortest = Duration::from_millis(args.session_ms.min(args.txn_timeout_ms));
    let mut kinds = vec![("below_lock", lock.mul_f64(0.4))];
    if lock + Duration::from_secs(1) < shortest {
        kinds.push(("above_lock", lock + Duration::from_secs(1)));
    }
    kinds.push((
        "above_session_and_txn_timeout",
        longest + Duration::from_secs(2),
    ));
    kinds.push(("twice_session_and_txn_timeout", longest * 2));
    kinds
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    CopierKill,
    BrokerKill,
    /// Index into [`pause_kinds`].
    Pause(usize),
}

#[derive(Debug, Clone, Copy)]
enum Action {
    Kill,
    Pause(usize),
}

async fn setup(args: &RunArgs) -> Result<uuid::Uuid, String> {
    let bootstrap = source_bootstrap(args);
    let admin = AdminClient::new(vec![bootstrap.clone()], ConnectionConfig::default());
    let target = AdminClient::new(vec![target_bootstrap(args)], ConnectionConfig::default());
    for (t, a) in [("chaos-in", &admin), ("chaos-out", &target)] {
        a.create_topic(NewTopic::new(t, args.partitions))
            .await
            .map_err(|e| format!("create {t}: {e}"))?;
    }
    admin
        .incremental_alter_group_config(
            GROUP,
            &[
                (
                    "share.auto.offset.reset",
                    AlterConfigOp::Set("earliest".into()),
                ),
                (
                    "share.isolation.level",
                    AlterConfigOp::Set("read_committed".into()),
                ),
                (
                    "share.delivery.count.limit",
                    AlterConfigOp::Set("10".into()),
                ),
                (
                    "share.record.lock.duration.ms",
                    AlterConfigOp::Set(args.lock_ms.to_string()),
                ),
                (
                    "share.session.timeout.ms",
                    AlterConfigOp::Set(args.session_ms.to_string()),
                ),
            ],
        )
        .await
        .map_err(|e| format!("group config: {e}"))?;
    let md = Metadata::new(vec![bootstrap], ConnectionConfig::default());
    let t = md
        .wait_for_topic("chaos-in", Duration::from_secs(10))
        .await
        .map_err(|e| format!("metadata: {e}"))?;
    Ok(t.topic_id)
}

/// The share group, also the copiers' application id.
const GROUP: &str = "chaos-copier";

/// GET http://127.0.0.1:PORT/metrics, the body.
async fn scrape(port: u16) -> Result<String, String> {
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        match text.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
            _ => Err(format!(
                "bad answer: {:?}",
                text.lines().next().unwrap_or("")
            )),
        }
    };
    tokio::time::timeout(Duration::from_secs(3), fetch)
        .await
        .map_err(|_| "no answer within 3 s".to_string())?
}

/// The sum of the samples of `metric` whose labels contain `label` (all of
/// them when empty).
fn metric_sum(text: &str, metric: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(metric)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|l| label.is_empty() || l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

const ARCHIVED_METRIC: &str = "sharestream_share_partition_archived_at_delivery_limit_total";
const COMMITTED_METRIC: &str = "sharestream_runtime_records_committed_total";

/// The broker's archived-at-limit counter over its lives: the counter
/// starts again at 0 with each broker process, so the last value seen of
/// each life is added up (scraped every 2 s and just before each kill).
#[derive(Debug, Default)]
struct ArchivedTracker {
    previous_lives: u64,
    current_life: u64,
    failures: u32,
}

impl ArchivedTracker {
    async fn scrape(&mut self, broker_metrics_port: u16) {
        match scrape(broker_metrics_port).await {
            Ok(text) => {
                let v = metric_sum(&text, ARCHIVED_METRIC, &format!("group=\"{GROUP}\"")) as u64;
                self.current_life = self.current_life.max(v);
            }
            Err(e) => {
                self.failures += 1;
                eprintln!("chaos: broker metrics: {e}");
            }
        }
    }
    fn broker_died(&mut self) {
        self.previous_lives += self.current_life;
        self.current_life = 0;
    }
    fn total(&self) -> u64 {
        self.previous_lives + self.current_life
    }
}

/// The records the broker log reports archived at the limit (its warnings
/// carry `first_offset=A last_offset=B`).
fn archived_logged(workdir: &Path) -> u64 {
    let Ok(text) = std::fs::read_to_string(workdir.join("broker.log")) else {
        return 0;
    };
    let field = |l: &str, name: &str| -> Option<i64> {
        let i = l.find(name)? + name.len();
        let rest = &l[i..];
        let end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '-')
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    text.lines()
        .filter(|l| l.contains("archived at the delivery count limit"))
        .filter_map(|l| Some(field(l, "last_offset=")? - field(l, "first_offset=")? + 1))
        .map(|n| n.max(0) as u64)
        .sum()
}

/// Reads every copier log of the work directory.
fn scan_copier_logs(workdir: &Path) -> LogScan {
    let mut r = LogScan::default();
    let Ok(dir) = std::fs::read_dir(workdir) else {
        return r;
    };
    let mut paths: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("copier-") && n.ends_with(".log"))
        })
        .collect();
    paths.sort();
    for p in paths {
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        for l in text.lines() {
            let fenced = l.contains("PRODUCER_FENCED") || l.contains("INVALID_PRODUCER_EPOCH");
            if fenced {
                r.producer_fenced_lines += 1;
            }
            if l.contains("released on its last delivery") {
                r.released_at_delivery_limit += 1;
            }
            if l.contains("re-initializing the producer") {
                r.producer_recoveries_logged += 1;
                if l.contains("end is unknown") {
                    r.outcome_unknown_recoveries_logged += 1;
                }
            }
            let fatal = l.starts_with("copier: runtime:")
                || l.starts_with("copier: start:")
                || l.starts_with("copier: topology:")
                || l.contains("keeps being taken over")
                || l.contains("panicked");
            if fatal {
                r.fatal_errors += 1;
                if fenced || l.contains("keeps being taken over") {
                    r.fatal_fences += 1;
                }
                if r.fatal_samples.len() < 8 {
                    let cut: String = l.chars().take(300).collect();
                    r.fatal_samples.push(format!("{name}: {cut}"));
                }
            }
        }
    }
    r
}

/// Starts the broker, creates the topics and the group, starts the seeder.
struct Started {
    started: Instant,
    bootstrap: String,
    broker: Broker,
    topic_id: uuid::Uuid,
    seeder: tokio::task::JoinHandle<Result<seed::SeedReport, String>>,
}

async fn start(args: &RunArgs) -> Result<Started, String> {
    let started = Instant::now();
    let _ = std::fs::remove_dir_all(&args.workdir);
    std::fs::create_dir_all(&args.workdir).map_err(|e| e.to_string())?;
    let bootstrap = target_bootstrap(args);
    let broker = Broker::start(args).await?;
    let topic_id = setup(args).await?;
    // The seeder writes while the copiers copy and the faults happen,
    // spread over most of the chaos period.
    let chaos = Duration::from_secs(args.chaos_secs);
    let seed_args = seed::SeedArgs {
        bootstrap: source_bootstrap(args),
        topic: "chaos-in".into(),
        partitions: args.partitions,
        records: args.records,
        keys: args.keys,
        txn_size: args.txn_size,
        abort_every: args.abort_every,
    };
    // Its own runtime on a blocking thread: the producer's futures are not
    // `Send` for every lifetime, so they cannot be `tokio::spawn`ed.
    let seeder = tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("seeder runtime")
            .block_on(seed::seed(&seed_args, chaos.mul_f64(0.85)))
    });
    Ok(Started {
        started,
        bootstrap,
        broker,
        topic_id,
        seeder,
    })
}

/// Progress: reads the output further; true when it holds every seq.
async fn progress(reader: &mut check::CommittedReader, expected: u64, since: Instant) -> bool {
    match reader.read_more().await {
        Ok(()) => {
            let r = check::analyse(&reader.records, expected, &BTreeSet::new());
            eprintln!(
                "chaos: {:.0} s: output {} records, {} distinct of {}",
                since.elapsed().as_secs_f64(),
                r.output_records,
                r.distinct,
                expected
            );
            r.distinct >= expected
        }
        Err(e) => {
            eprintln!("chaos: progress: {e}");
            false
        }
    }
}

async fn run(args: RunArgs) -> Result<bool, String> {
    match args.scenario {
        Scenario::Chaos => run_chaos(args).await,
        Scenario::Elastic => run_elastic(args).await,
    }
}

async fn run_chaos(args: RunArgs) -> Result<bool, String> {
    let Started {
        started,
        bootstrap,
        mut broker,
        topic_id,
        seeder,
    } = start(&args).await?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let chaos = Duration::from_secs(args.chaos_secs);
    let expected = args.records;
    let kinds = pause_kinds(&args);

    // The fault schedule, deterministic from the seed.
    let mut events: Vec<(Duration, Event)> = Vec::new();
    for _ in 0..args.copier_kills {
        events.push((
            chaos.mul_f64(rng.random_range(0.05..0.85)),
            Event::CopierKill,
        ));
    }
    for i in 0..args.broker_kills {
        let span = 0.7 / f64::from(args.broker_kills.max(1));
        let at = 0.2 + span * f64::from(i) + rng.random_range(0.0..span);
        events.push((chaos.mul_f64(at), Event::BrokerKill));
    }
    for i in 0..args.copier_pauses as usize {
        let (_, len) = kinds[i % kinds.len()];
        // Over by the end of the chaos period.
        let latest = chaos
            .saturating_sub(len + Duration::from_secs(2))
            .max(chaos.mul_f64(0.1));
        let at = rng.random_range(chaos.mul_f64(0.05).min(latest)..=latest);
        events.push((at, Event::Pause(i % kinds.len())));
    }
    events.sort_by_key(|e| e.0);
    events.reverse();

    let (tx, mut rx) = mpsc::unbounded_channel::<Line>();
    let mut copiers: Vec<Copier> = (0..args.copiers)
        .map(|slot| Copier {
            slot,
            generation: 0,
            child: Some(spawn_copier(&args, slot, 0, None, &tx)),
            restart_at: None,
            paused_until: None,
            was_paused: false,
            metrics_port: None,
            committed: 0,
        })
        .collect();
    let mut faults = Faults::default();
    let mut archived = ArchivedTracker::default();
    let broker_metrics = source_port(&args) + 1;
    let mut last_broker_kill: Option<Instant> = None;
    let mut reader = check::CommittedReader::new(&bootstrap, "chaos-out", args.partitions);
    let chaos_start = Instant::now();
    let drain_deadline = chaos_start + chaos + Duration::from_secs(args.drain_secs);
    let mut pending: Option<(u32, KillMode, Instant, Action)> = None;
    let mut matched_window = false;
    let mut next_progress = Instant::now();
    let mut complete_at: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        let now = Instant::now();
        // Scheduled events.
        if pending.is_none()
            && let Some(&(at, event)) = events.last()
            && now >= chaos_start + at
        {
            events.pop();
            match event {
                Event::BrokerKill => {
                    eprintln!(
                        "chaos: SIGKILL broker at {:.1} s",
                        chaos_start.elapsed().as_secs_f64()
                    );
                    archived.scrape(broker_metrics).await;
                    broker.kill().await;
                    archived.broker_died();
                    last_broker_kill = Some(Instant::now());
                    faults.broker_kills += 1;
                    tokio::time::sleep(Duration::from_millis(rng.random_range(200..2000))).await;
                    broker.restart().await?;
                    faults.broker_restarts += 1;
                    eprintln!("chaos: broker restarted");
                }
                Event::CopierKill | Event::Pause(_) => {
                    let is_pause = matches!(event, Event::Pause(_));
                    // The victim is a running copier that is not paused; a
                    // pause leaves at least one copier working. When none
                    // fits, the event waits a little.
                    let running: Vec<u32> = copiers
                        .iter()
                        .filter(|c| c.child.is_some() && c.paused_until.is_none())
                        .map(|c| c.slot)
                        .collect();
                    if running.is_empty() || (is_pause && running.len() < 2) {
                        events.push((now - chaos_start + Duration::from_millis(300), event));
                        continue;
                    }
                    let slot = running[rng.random_range(0..running.len())];
                    let mode = match (args.guarantee, rng.random_range(0..3)) {
                        (_, 0) => KillMode::Random,
                        (Guarantee::ExactlyOnce, 2) => KillMode::AfterStage,
                        _ => KillMode::AfterSend,
                    };
                    while rx.try_recv().is_ok() {}
                    matched_window = false;
                    let action = match event {
                        Event::Pause(k) => Action::Pause(k),
                        _ => Action::Kill,
                    };
                    pending = Some((slot, mode, now + Duration::from_secs(10), action));
                }
            }
        }
        // A kill or pause waiting for its moment.
        if let Some((slot, mode, deadline, action)) = pending {
            let c = &mut copiers[slot as usize];
            let timed_out = now >= deadline;
            let mut matched = std::mem::take(&mut matched_window);
            if !matched && mode != KillMode::Random && !timed_out {
                while let Ok((s, g, line)) = rx.try_recv() {
                    if s == slot && g == c.generation && line == mode.line() {
                        matched = true;
                        break;
                    }
                }
            }
            if mode == KillMode::Random || timed_out || matched {
                let moment = if mode == KillMode::Random || matched {
                    mode
                } else {
                    KillMode::Random
                };
                let at_s = chaos_start.elapsed().as_secs_f64();
                match (action, c.child.as_mut()) {
                    (Action::Kill, Some(_)) => {
                        let mut child = c.child.take().expect("running");
                        let _ = child.start_kill();
                        let _ = child.wait().await;
                        faults.copier_kills += 1;
                        match moment {
                            KillMode::AfterSend => faults.copier_kills_after_send += 1,
                            KillMode::AfterStage => faults.copier_kills_after_stage += 1,
                            KillMode::Random => faults.copier_kills_random += 1,
                        }
                        eprintln!("chaos: SIGKILL copier {slot} ({mode:?}) at {at_s:.1} s");
                        c.restart_at = Some(
                            Instant::now() + Duration::from_millis(rng.random_range(100..1500)),
                        );
                    }
                    (Action::Pause(k), Some(child)) => {
                        let (kind, len) = kinds[k];
                        signal(child, libc::SIGSTOP);
                        c.paused_until = Some(Instant::now() + len);
                        c.was_paused = true;
                        faults.copier_pauses += 1;
                        faults.pauses.push(PauseRecord {
                            kind,
                            secs: len.as_secs_f64(),
                            victim: format!("copier-{slot} generation {}", c.generation),
                            moment: moment.name(),
                            at_s,
                        });
                        eprintln!(
                            "chaos: SIGSTOP copier {slot} ({kind}, {:.1} s, {mode:?}) at {at_s:.1} s",
                            len.as_secs_f64()
                        );
                    }
                    (_, None) => {
                        // The victim exited on its own meanwhile: act on
                        // another one a little later, so every scheduled
                        // fault happens.
                        let event = match action {
                            Action::Kill => Event::CopierKill,
                            Action::Pause(k) => Event::Pause(k),
                        };
                        events.push((
                            Instant::now() - chaos_start + Duration::from_millis(300),
                            event,
                        ));
                    }
                }
                pending = None;
            }
        }
        // Pauses over, copiers that exited on their own, and restarts.
        for c in copiers.iter_mut() {
            if let (Some(until), Some(child)) = (c.paused_until, c.child.as_ref())
                && Instant::now() >= until
            {
                signal(child, libc::SIGCONT);
                c.paused_until = None;
                eprintln!(
                    "chaos: SIGCONT copier {} at {:.1} s",
                    c.slot,
                    chaos_start.elapsed().as_secs_f64()
                );
            }
            if let Some(child) = c.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let explained = !c.was_paused
                    && last_broker_kill.is_some_and(|t| t.elapsed() < Duration::from_secs(30));
                eprintln!(
                    "chaos: copier {} exited ({status}){}; restarting",
                    c.slot,
                    if c.was_paused {
                        " after a pause: it did not go back to work by itself"
                    } else if explained {
                        " after a broker kill"
                    } else {
                        ", NOT after a broker kill"
                    }
                );
                faults.copier_crash_exits += 1;
                if c.was_paused {
                    faults.copier_exits_after_pause += 1;
                }
                if !explained {
                    faults.copier_crash_exits_unexplained += 1;
                }
                c.child = None;
                c.paused_until = None;
                c.restart_at = Some(Instant::now() + Duration::from_secs(1));
            }
            if c.child.is_none() && c.restart_at.is_some_and(|t| Instant::now() >= t) {
                c.generation += 1;
                c.child = Some(spawn_copier(&args, c.slot, c.generation, None, &tx));
                c.restart_at = None;
                c.was_paused = false;
                faults.copier_restarts += 1;
            }
        }
        // Progress.
        if Instant::now() >= next_progress {
            next_progress = Instant::now() + Duration::from_secs(2);
            archived.scrape(broker_metrics).await;
            if progress(&mut reader, expected, chaos_start).await && complete_at.is_none() {
                complete_at = Some(Instant::now());
            }
        }
        let chaos_over = events.is_empty()
            && pending.is_none()
            && copiers.iter().all(|c| c.paused_until.is_none());
        if chaos_over && (complete_at.is_some() || Instant::now() >= drain_deadline) {
            break;
        }
        tokio::select! {
            _ = tick.tick() => {}
            Some(line) = rx.recv(), if pending.is_some() => {
                if let Some((slot, mode, _, _)) = pending {
                    let c = &copiers[slot as usize];
                    if line.0 == slot && line.1 == c.generation && line.2 == mode.line() {
                        matched_window = true;
                    }
                }
            }
        }
    }
    let mut children: Vec<Child> = copiers.iter_mut().filter_map(|c| c.child.take()).collect();
    let end = End {
        started,
        chaos_start,
        complete_at,
        bootstrap,
        topic_id,
        faults,
        processes: Vec::new(),
    };
    finish(&args, end, broker, archived, &mut children, seeder).await
}

/// The elastic scenario: 1 -> 4 -> 1 copiers while records flow.
async fn run_elastic(args: RunArgs) -> Result<bool, String> {
    let Started {
        started,
        bootstrap,
        broker,
        topic_id,
        seeder,
    } = start(&args).await?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let chaos = Duration::from_secs(args.chaos_secs);
    let expected = args.records;
    // (fraction of the period, +1 copier / -1 by SIGTERM / -1 by SIGKILL)
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Step {
        Add,
        Term,
        Kill,
    }
    let mut steps = vec![
        (0.10, Step::Add),
        (0.20, Step::Add),
        (0.30, Step::Add),
        (0.50, Step::Term),
        (0.60, Step::Kill),
        (0.70, Step::Term),
    ];
    steps.reverse();
    let (tx, _rx) = mpsc::unbounded_channel::<Line>();
    let metrics_port = |slot: u32| args.port + 20 + slot as u16;
    let mut copiers: Vec<Copier> = Vec::new();
    let mut shares: Vec<ProcessShare> = Vec::new();
    let mut started_at: Vec<f64> = Vec::new();
    let chaos_start = Instant::now();
    let add = |copiers: &mut Vec<Copier>, started_at: &mut Vec<f64>| {
        let slot = copiers.len() as u32;
        let port = metrics_port(slot);
        copiers.push(Copier {
            slot,
            generation: 0,
            child: Some(spawn_copier(&args, slot, 0, Some(port), &tx)),
            restart_at: None,
            paused_until: None,
            was_paused: false,
            metrics_port: Some(port),
            committed: 0,
        });
        started_at.push(chaos_start.elapsed().as_secs_f64());
        eprintln!(
            "chaos: elastic: copier {slot} started at {:.1} s",
            chaos_start.elapsed().as_secs_f64()
        );
    };
    add(&mut copiers, &mut started_at);
    let mut faults = Faults::default();
    let mut archived = ArchivedTracker::default();
    let broker_metrics = source_port(&args) + 1;
    let mut reader = check::CommittedReader::new(&bootstrap, "chaos-out", args.partitions);
    let drain_deadline = chaos_start + chaos + Duration::from_secs(args.drain_secs);
    let mut next_progress = Instant::now();
    let mut complete_at: Option<Instant> = None;
    loop {
        if let Some(&(at, step)) = steps.last()
            && chaos_start.elapsed() >= chaos.mul_f64(at)
        {
            steps.pop();
            if step == Step::Add {
                add(&mut copiers, &mut started_at);
            } else {
                let running: Vec<usize> = copiers
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.child.is_some())
                    .map(|(i, _)| i)
                    .collect();
                let i = running[rng.random_range(0..running.len())];
                let c = &mut copiers[i];
                if let Ok(text) = scrape(c.metrics_port.expect("port")).await {
                    c.committed = c
                        .committed
                        .max(metric_sum(&text, COMMITTED_METRIC, "") as u64);
                }
                let mut child = c.child.take().expect("running");
                let at_s = chaos_start.elapsed().as_secs_f64();
                let stopped_by = if step == Step::Kill {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    faults.copier_kills += 1;
                    faults.copier_kills_random += 1;
                    "sigkill"
                } else {
                    signal(&child, libc::SIGTERM);
                    if tokio::time::timeout(Duration::from_secs(30), child.wait())
                        .await
                        .is_err()
                    {
                        let _ = child.start_kill();
                        let _ = child.wait().await;
                    }
                    "sigterm"
                };
                eprintln!(
                    "chaos: elastic: copier {i} stopped ({stopped_by}) at {at_s:.1} s after {} committed",
                    c.committed
                );
                shares.push(ProcessShare {
                    name: format!("copier-{i}"),
                    started_at_s: started_at[i],
                    stopped_at_s: at_s,
                    stopped_by,
                    records_committed: c.committed,
                    share_percent: 0.0,
                });
            }
        }
        for c in copiers.iter_mut() {
            if let Some(child) = c.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                eprintln!("chaos: elastic: copier {} exited ({status})", c.slot);
                faults.copier_crash_exits += 1;
                faults.copier_crash_exits_unexplained += 1;
                c.child = None;
                shares.push(ProcessShare {
                    name: format!("copier-{}", c.slot),
                    started_at_s: started_at[c.slot as usize],
                    stopped_at_s: chaos_start.elapsed().as_secs_f64(),
                    stopped_by: "exited on its own",
                    records_committed: c.committed,
                    share_percent: 0.0,
                });
            }
        }
        if Instant::now() >= next_progress {
            next_progress = Instant::now() + Duration::from_secs(2);
            archived.scrape(broker_metrics).await;
            for c in copiers.iter_mut().filter(|c| c.child.is_some()) {
                if let Ok(text) = scrape(c.metrics_port.expect("port")).await {
                    c.committed = c
                        .committed
                        .max(metric_sum(&text, COMMITTED_METRIC, "") as u64);
                }
            }
            if progress(&mut reader, expected, chaos_start).await && complete_at.is_none() {
                complete_at = Some(Instant::now());
            }
        }
        if steps.is_empty() && (complete_at.is_some() || Instant::now() >= drain_deadline) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The last scrape of the survivors, then the usual end.
    for c in copiers.iter_mut().filter(|c| c.child.is_some()) {
        if let Ok(text) = scrape(c.metrics_port.expect("port")).await {
            c.committed = c
                .committed
                .max(metric_sum(&text, COMMITTED_METRIC, "") as u64);
        }
        shares.push(ProcessShare {
            name: format!("copier-{}", c.slot),
            started_at_s: started_at[c.slot as usize],
            stopped_at_s: chaos_start.elapsed().as_secs_f64(),
            stopped_by: "end",
            records_committed: c.committed,
            share_percent: 0.0,
        });
    }
    let total: u64 = shares.iter().map(|s| s.records_committed).sum();
    for s in shares.iter_mut() {
        s.share_percent = if total == 0 {
            0.0
        } else {
            (1000.0 * s.records_committed as f64 / total as f64).round() / 10.0
        };
    }
    shares.sort_by(|a, b| a.name.cmp(&b.name));
    let mut children: Vec<Child> = copiers.iter_mut().filter_map(|c| c.child.take()).collect();
    let end = End {
        started,
        chaos_start,
        complete_at,
        bootstrap,
        topic_id,
        faults,
        processes: shares,
    };
    finish(&args, end, broker, archived, &mut children, seeder).await
}

/// What the scenario hands to [`finish`].
struct End {
    started: Instant,
    chaos_start: Instant,
    complete_at: Option<Instant>,
    bootstrap: String,
    topic_id: uuid::Uuid,
    faults: Faults,
    processes: Vec<ProcessShare>,
}

/// Kafka's own decoding of the `__share_group_state` segments of the stopped
/// node in `dir` (`scripts/kafka/dump-share-state.sh`).
async fn kafka_share_state_dump(scripts: &Path, dir: &Path) -> Result<String, String> {
    let out = Command::new(scripts.join("dump-share-state.sh"))
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run {}/dump-share-state.sh: {e}", scripts.display()))?;
    if !out.status.success() {
        return Err(format!(
            "dump-share-state.sh {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("dump-share-state.sh: {e}"))
}

/// Stops the copiers (SIGTERM: they finish their transaction) and the
/// broker, runs the checker, writes the report.
async fn finish(
    args: &RunArgs,
    end: End,
    mut broker: Broker,
    mut archived: ArchivedTracker,
    children: &mut Vec<Child>,
    seeder: tokio::task::JoinHandle<Result<seed::SeedReport, String>>,
) -> Result<bool, String> {
    let seeded = match seeder.await {
        Ok(r) => r?,
        Err(e) => return Err(format!("the seeder panicked: {e}")),
    };
    eprintln!("chaos: seeded {seeded:?}");
    let source = source_bootstrap(args);
    let mut input = check::CommittedReader::new(&source, "chaos-in", args.partitions);
    input.read_more().await?;
    let aborted_in_input = check::aborted_in_input(&input.records);
    if !aborted_in_input.is_empty() {
        // Input the copiers must copy too, though the progress loop did
        // not wait for it: give them the time to.
        eprintln!(
            "chaos: the input holds {} records of aborted seeder transactions as committed; \
             waiting up to 60 s for the copiers to copy them",
            aborted_in_input.len()
        );
        let mut reader = check::CommittedReader::new(&end.bootstrap, "chaos-out", args.partitions);
        let deadline = Instant::now() + Duration::from_secs(60);
        // The reader only appends: each pass decodes what the last one
        // had not seen.
        let mut copied = BTreeSet::new();
        let mut scanned = 0;
        while Instant::now() < deadline {
            if reader.read_more().await.is_ok() {
                copied.extend(
                    reader.records[scanned..]
                        .iter()
                        .filter_map(|(_, _, v)| payload::Payload::decode(v))
                        .map(|pl| pl.seq)
                        .filter(|s| aborted_in_input.contains(s)),
                );
                scanned = reader.records.len();
                if copied.len() == aborted_in_input.len() {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let seconds_to_complete = end
        .complete_at
        .map_or(-1.0, |t| (t - end.chaos_start).as_secs_f64());
    for child in children.iter() {
        signal(child, libc::SIGTERM);
    }
    for mut child in children.drain(..) {
        if tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .is_err()
        {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
    let bootstrap = &end.bootstrap;
    let mut final_reader = check::CommittedReader::new(bootstrap, "chaos-out", args.partitions);
    final_reader.read_more().await?;
    // Anything committed since the first read (nothing is expected: the
    // seeder is done).
    input.read_more().await?;
    let log_ends: Vec<i64> = input.ends.iter().map(|e| e.0).collect();
    // Before the broker stops.
    let ledger_log_start = ledger_log_start(args).await;
    let mut notes = vec![
        "out_of_order_per_key is reported, never a failure: share groups do not promise order",
    ];
    if final_reader.ends.iter().any(|(hw, lso)| hw != lso) {
        notes.push("an output partition still had an open transaction at the end (LSO < HW)");
    }
    archived.scrape(source_port(args) + 1).await;
    let share_state = if let Some(scripts) = &args.kafka_scripts {
        // Apache Kafka: the start offsets through its API while it runs,
        // then its persisted share state, read from its data directory.
        let api_starts = check::api_start_offsets(&source, GROUP, log_ends.len()).await?;
        broker.stop().await;
        let dump = kafka_share_state_dump(scripts, &args.workdir.join("kafka-source")).await?;
        let parts = kafka_state::replay(&dump, GROUP, end.topic_id)?;
        let persisted = kafka_state::judge(&parts, &input.records, log_ends.len());
        check::kafka_share_state(&api_starts, &persisted, &log_ends, &input.records)
    } else {
        broker.stop().await;
        check::offline_share_state(&args.workdir.join("data"), GROUP, end.topic_id, &log_ends)?
    };
    let aborted_in_input = check::aborted_in_input(&input.records);
    let output = check::analyse(&final_reader.records, seeded.committed, &aborted_in_input);
    let copier_logs = scan_copier_logs(&args.workdir);
    // On Apache Kafka its persisted state counts the committed input
    // records it archived (on our broker `archived` also counts markers and
    // aborted data, and the broker's counter is the figure).
    let kafka_archived = if args.kafka_scripts.is_some() {
        share_state.archived
    } else {
        0
    };
    let archived = ArchivedReport {
        archived_at_delivery_limit: archived.total(),
        archived_at_delivery_limit_logged: archived_logged(&args.workdir),
        released_at_delivery_limit_by_copiers: copier_logs.released_at_delivery_limit,
        scrape_failures: archived.failures,
    };
    // The counts overlap (one record can be in all three): the largest.
    let archived_count = archived
        .archived_at_delivery_limit
        .max(archived.archived_at_delivery_limit_logged)
        .max(archived.released_at_delivery_limit_by_copiers)
        .max(kafka_archived);
    let lost = output.lost.saturating_sub(archived_count);
    let faults = end.faults;

    let mut failures = Vec::new();
    if lost > 0 {
        failures.push(format!(
            "{lost} records lost (missing {}, archived at the delivery limit {archived_count}; e.g. seq {:?})",
            output.lost, output.lost_sample
        ));
    }
    if archived_count > 0 {
        // No record should reach the limit here (limit 10, a few faults per
        // record at most): each one is a delivery gone wrong ten times.
        failures.push(format!(
            "{archived_count} records archived at the delivery limit (of them {} missing from the output); \
             the bounded run expects none: see the broker log's warnings",
            output.lost.min(archived_count)
        ));
    }
    if output.aborted_seen > 0 {
        failures.push(format!(
            "{} records of aborted transactions in the output",
            output.aborted_seen
        ));
    }
    if output.unparsable > 0 {
        failures.push(format!("{} unparsable output records", output.unparsable));
    }
    if share_state.non_terminal > 0 {
        failures.push(format!(
            "{} input records not in a terminal state (e.g. {:?})",
            share_state.non_terminal, share_state.non_terminal_sample
        ));
    }
    let disagree: Vec<usize> = (0..share_state.api_start_offsets.len())
        .filter(|&p| {
            let api = share_state.api_start_offsets[p];
            let persisted = share_state
                .persisted_start_offsets
                .get(p)
                .copied()
                .unwrap_or(-1);
            api >= 0 && api != persisted
        })
        .collect();
    if !disagree.is_empty() {
        failures.push(format!(
            "the share state read from Kafka's __share_group_state disagrees with its API on the \
             start offset of input partitions {disagree:?} (persisted {:?}, API {:?}): the checker misreads Kafka",
            share_state.persisted_start_offsets, share_state.api_start_offsets
        ));
    }
    if share_state.tx_pending > 0 {
        failures.push(format!(
            "{} records left TX_PENDING",
            share_state.tx_pending
        ));
    }
    if args.guarantee == Guarantee::ExactlyOnce && output.duplicated > 0 {
        failures.push(format!(
            "{} duplicated records (e.g. seq {:?})",
            output.duplicated, output.duplicated_sample
        ));
    }
    if copier_logs.fatal_fences > 0 {
        failures.push(format!(
            "{} fatal fences in the copier logs (one live instance took over another's transactional id)",
            copier_logs.fatal_fences
        ));
    }
    if faults.copier_crash_exits_unexplained > 0 {
        failures.push(format!(
            "{} copiers stopped on their own, not after a broker kill, {} of them after a pause \
             (fatal errors: {:?})",
            faults.copier_crash_exits_unexplained,
            faults.copier_exits_after_pause,
            copier_logs.fatal_samples
        ));
    }
    if args.guarantee == Guarantee::ExactlyOnce
        && args.unanswered_commits > 0
        && copier_logs.outcome_unknown_recoveries_logged == 0
    {
        failures.push(
            "no copier logged a recovery from an unanswered commit \
             (--unanswered-commits): the fault was not exercised"
                .to_string(),
        );
    }
    let input_committed_records = input.records.len() as u64;
    let seeder_committed_in_input = input_committed_records - aborted_in_input.len() as u64;
    if seeder_committed_in_input != seeded.committed {
        failures.push(format!(
            "the input holds {seeder_committed_in_input} records of committed seeder transactions, \
             the seeder wrote {}",
            seeded.committed
        ));
    }
    let mut broker_anomalies = Vec::new();
    if !aborted_in_input.is_empty() {
        let evidence = match &args.kafka_scripts {
            Some(_) => kafka_marker_drops(&broker.nodes[0].dir, seed::TRANSACTIONAL_ID),
            None => Vec::new(),
        };
        match judge_aborted_in_input(
            aborted_in_input.len() as u64,
            args.kafka_scripts.is_some(),
            &evidence,
        ) {
            Ok(anomaly) => broker_anomalies.push(anomaly),
            Err(failure) => failures.push(failure),
        }
    }
    let report = Report {
        guarantee: args.guarantee.name(),
        mechanism: args.mechanism.clone(),
        passed: failures.is_empty(),
        failures,
        records: args.records,
        seeded,
        input_committed_records,
        copiers: args.copiers,
        partitions: args.partitions,
        complete_before_deadline: end.complete_at.is_some(),
        seconds_to_complete,
        ledger_log_start,
        seconds_total: end.started.elapsed().as_secs_f64(),
        scenario: args.scenario,
        settings: Settings {
            lock_ms: args.lock_ms,
            session_ms: args.session_ms,
            txn_timeout_ms: args.txn_timeout_ms,
            ledger_trim_interval_ms: args.ledger_trim_interval_ms,
            ledger_max_batch_age_ms: args.ledger_max_batch_age_ms,
            ledger_trim_margin_ms: args.ledger_trim_margin_ms,
            application_id: GROUP,
        },
        faults,
        output,
        archived,
        lost,
        share_state,
        copier_logs,
        processes: end.processes,
        broker_anomalies,
        notes,
    };
    let json = serde_json::to_string_pretty(&report).expect("report encodes");
    println!("{json}");
    if let Some(path) = &args.report {
        std::fs::write(path, &json).map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    if report.passed && !args.keep {
        let _ = std::fs::remove_dir_all(&args.workdir);
    }
    Ok(report.passed)
}

/// The lines of an Apache Kafka node's logs (`kafka.log` and the earlier
/// lives' `kafka.log.N`, see `scripts/kafka/start.sh`) where its
/// transaction coordinator skipped the markers of `transactional_id`
/// because it found no leader for the partitions.
fn kafka_marker_drops(dir: &Path, transactional_id: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "kafka.log" || n.starts_with("kafka.log."))
        })
        .collect();
    // Oldest life first: kafka.log.1, kafka.log.2, ..., kafka.log.10, then
    // the current kafka.log.
    paths.sort_by_key(|p| {
        p.extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    });
    let mut lines = Vec::new();
    for p in paths {
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        lines.extend(
            text.lines()
                .filter(|l| {
                    l.contains("Couldn't find leader endpoint for partitions")
                        && l.contains(transactional_id)
                })
                .map(str::to_string),
        );
    }
    lines
}

/// What the seeder's aborted records in the committed input mean: a
/// broker anomaly (the text for the report) when Apache Kafka's log shows
/// that it skipped the abort markers, else a failure. On our broker it is
/// always a failure: our broker must never do it.
fn judge_aborted_in_input(
    records: u64,
    kafka: bool,
    evidence: &[String],
) -> Result<String, String> {
    let what = format!(
        "the input holds {records} records of transactions the seeder aborted (its EndTxn(abort) \
         succeeded) as committed"
    );
    if !kafka {
        return Err(format!(
            "{what}: our broker did not write the abort markers"
        ));
    }
    let Some(first) = evidence.first() else {
        return Err(format!(
            "{what}, and Kafka's log does not say it skipped the markers: \
             the checker cannot tell whose fault it is"
        ));
    };
    Ok(format!(
        "{what}. Apache Kafka skipped the abort markers while the partitions had no leader after \
         its restart, so a later commit marker of the same producer committed them; the copiers \
         copied them as the input they had become. Kafka logged it {} time(s), first: {first}",
        evidence.len()
    ))
}

fn main() {
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    match cli.command {
        Cmd::Copy(a) => rt.block_on(copier::run(a)),
        Cmd::Run(a) => match rt.block_on(run(a)) {
            Ok(true) => {}
            Ok(false) => std::process::exit(1),
            Err(e) => {
                eprintln!("chaos: error: {e}");
                std::process::exit(2);
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aborted_records_in_the_input_fail_the_run_unless_kafka_logged_the_skipped_markers() {
        let line = "[2026-12-06 17:40:01,123] INFO [Transaction Marker Channel Manager 1]: \
                    Couldn't find leader endpoint for partitions Set(chaos-in-0) while trying to \
                    send transaction markers for chaos-seeder, these partitions are likely \
                    deleted already and hence can be skipped"
            .to_string();
        assert!(judge_aborted_in_input(1000, false, &[]).is_err());
        assert!(judge_aborted_in_input(1000, false, std::slice::from_ref(&line)).is_err());
        assert!(judge_aborted_in_input(1000, true, &[]).is_err());
        let anomaly = judge_aborted_in_input(1000, true, std::slice::from_ref(&line)).unwrap();
        assert!(anomaly.contains("1000 records") && anomaly.contains(&line));
    }

    #[test]
    fn the_marker_drops_are_found_in_every_life_of_the_kafka_log() {
        let dir = std::env::temp_dir().join(format!("chaos-marker-drops-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let drop = |id: &str| {
            format!(
                "INFO Couldn't find leader endpoint for partitions Set(chaos-in-1) while trying \
                 to send transaction markers for {id}, these partitions are likely deleted"
            )
        };
        std::fs::write(
            dir.join("kafka.log.1"),
            format!("start\n{}\nend\n", drop("chaos-seeder")),
        )
        .unwrap();
        std::fs::write(dir.join("kafka.log.2"), format!("{}\n", drop("other"))).unwrap();
        std::fs::write(
            dir.join("kafka.log.10"),
            format!("{} life10\n", drop("chaos-seeder")),
        )
        .unwrap();
        std::fs::write(
            dir.join("kafka.log"),
            format!("{} now\n", drop("chaos-seeder")),
        )
        .unwrap();
        std::fs::write(dir.join("format.log"), drop("chaos-seeder")).unwrap();
        let found = kafka_marker_drops(&dir, "chaos-seeder");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(found.len(), 3, "{found:?}");
        // Oldest life first, the running one last.
        assert!(found[0].ends_with("deleted"), "{found:?}");
        assert!(found[1].ends_with("life10"), "{found:?}");
        assert!(found[2].ends_with("now"), "{found:?}");
    }
}
