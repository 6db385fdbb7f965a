//! Exactly-once under faults: the copier chaos test.
//!
//! `cargo run --release --example chaos -- run --broker-bin target/release/sharestream`
//! (what `scripts/chaos.sh` does) starts the standalone broker on a fresh
//! data directory (`--fsync every-batch`), seeds the input topic
//! ([`seed`]), starts several copier processes in one share group
//! ([`copier`], this same binary's `copy` command), and for a bounded time
//! SIGKILLs copiers (at random moments, and inside the kill windows the
//! copiers announce) and the broker (restarted on the same data
//! directory), restarting each. Then it waits until the output holds every
//! input record (or a drain deadline passes), stops the copiers (SIGTERM)
//! and the broker, and runs the independent checker ([`check`]). The
//! report is JSON (stdout and `--report`); the exit code is 1 when the
//! guarantee's promise broke.
//!
//! See docs/RELIABILITY.md.

mod check;
mod copier;
mod payload;
mod seed;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use sharestream::client::admin::{AlterConfigOp, NewTopic};
use sharestream::client::{AdminClient, ConnectionConfig, Metadata};
use tokio::io::{AsyncBufReadExt, BufReader};
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
    /// Pause of the copiers in each kill window, ms.
    #[arg(long, default_value_t = 20)]
    window_pause_ms: u64,
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

/// Kills and restarts survived.
#[derive(Debug, Default, Clone, Serialize)]
struct Faults {
    copier_kills: u32,
    copier_kills_after_send: u32,
    copier_kills_after_stage: u32,
    copier_kills_random: u32,
    copier_restarts: u32,
    copier_crash_exits: u32,
    broker_kills: u32,
    broker_restarts: u32,
}

#[derive(Debug, Serialize)]
struct Report {
    guarantee: &'static str,
    passed: bool,
    failures: Vec<String>,
    records: u64,
    seeded: seed::SeedReport,
    input_committed_records: u64,
    copiers: u32,
    partitions: i32,
    complete_before_deadline: bool,
    seconds_to_complete: f64,
    seconds_total: f64,
    faults: Faults,
    output: check::OutputReport,
    share_state: check::ShareStateReport,
    notes: Vec<&'static str>,
}

struct Broker {
    child: Child,
    args: RunArgs,
}

fn log_file(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open a log file")
}

impl Broker {
    async fn start(args: &RunArgs) -> Result<Broker, String> {
        let data = args.workdir.join("data");
        let child = Command::new(&args.broker_bin)
            .arg("broker")
            .arg("--data-dir")
            .arg(&data)
            .arg("--fsync")
            .arg("every-batch")
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", args.port))
            .stdout(Stdio::null())
            .stderr(log_file(&args.workdir.join("broker.log")))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", args.broker_bin.display()))?;
        let b = Broker {
            child,
            args: args.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", args.port))
                .await
                .is_ok()
            {
                return Ok(b);
            }
            if Instant::now() > deadline {
                return Err("the broker did not listen within 30 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    async fn restart(&mut self) -> Result<(), String> {
        *self = Broker::start(&self.args).await?;
        Ok(())
    }

    async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: signalling a child process we own.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .is_err()
        {
            self.kill().await;
        }
    }
}

struct Copier {
    slot: u32,
    generation: u32,
    child: Option<Child>,
    restart_at: Option<Instant>,
}

type Line = (u32, u32, String);

fn spawn_copier(
    args: &RunArgs,
    slot: u32,
    generation: u32,
    lines: &mpsc::UnboundedSender<Line>,
) -> Child {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .arg("copy")
        .arg("--bootstrap")
        .arg(format!("127.0.0.1:{}", args.port))
        .arg("--id")
        .arg(slot.to_string())
        .arg("--guarantee")
        .arg(match args.guarantee {
            Guarantee::ExactlyOnce => "exactly-once",
            Guarantee::AtLeastOnce => "at-least-once",
        })
        .arg("--window-pause-ms")
        .arg(args.window_pause_ms.to_string())
        .arg("--max-poll-records")
        .arg(args.max_poll_records.to_string())
        .stdout(Stdio::piped())
        .stderr(log_file(&args.workdir.join(format!("copier-{slot}.log"))))
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

async fn setup(bootstrap: &str, partitions: i32) -> Result<uuid::Uuid, String> {
    let admin = AdminClient::new(vec![bootstrap.to_string()], ConnectionConfig::default());
    for t in ["chaos-in", "chaos-out"] {
        admin
            .create_topic(NewTopic::new(t, partitions))
            .await
            .map_err(|e| format!("create {t}: {e}"))?;
    }
    admin
        .incremental_alter_group_config(
            "chaos-copier",
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
                    AlterConfigOp::Set("15000".into()),
                ),
            ],
        )
        .await
        .map_err(|e| format!("group config: {e}"))?;
    let md = Metadata::new(vec![bootstrap.to_string()], ConnectionConfig::default());
    let t = md
        .wait_for_topic("chaos-in", Duration::from_secs(10))
        .await
        .map_err(|e| format!("metadata: {e}"))?;
    Ok(t.topic_id)
}

async fn run(args: RunArgs) -> Result<bool, String> {
    let started = Instant::now();
    let _ = std::fs::remove_dir_all(&args.workdir);
    std::fs::create_dir_all(&args.workdir).map_err(|e| e.to_string())?;
    let bootstrap = format!("127.0.0.1:{}", args.port);
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut broker = Broker::start(&args).await?;
    let topic_id = setup(&bootstrap, args.partitions).await?;
    // The seeder writes while the copiers copy and the faults happen,
    // spread over most of the chaos period.
    let chaos = Duration::from_secs(args.chaos_secs);
    let seed_args = seed::SeedArgs {
        bootstrap: bootstrap.clone(),
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
    let expected = args.records;

    // The kill schedule.
    let mut events: Vec<(Duration, bool)> = Vec::new();
    for _ in 0..args.copier_kills {
        events.push((chaos.mul_f64(rng.random_range(0.05..0.85)), false));
    }
    for i in 0..args.broker_kills {
        let span = 0.7 / f64::from(args.broker_kills.max(1));
        let at = 0.2 + span * f64::from(i) + rng.random_range(0.0..span);
        events.push((chaos.mul_f64(at), true));
    }
    events.sort_by_key(|e| e.0);
    events.reverse();

    let (tx, mut rx) = mpsc::unbounded_channel::<Line>();
    let mut copiers: Vec<Copier> = (0..args.copiers)
        .map(|slot| Copier {
            slot,
            generation: 0,
            child: Some(spawn_copier(&args, slot, 0, &tx)),
            restart_at: None,
        })
        .collect();
    let mut faults = Faults::default();
    let mut reader = check::CommittedReader::new(&bootstrap, "chaos-out", args.partitions);
    let chaos_start = Instant::now();
    let drain_deadline = chaos_start + chaos + Duration::from_secs(args.drain_secs);
    let mut pending_kill: Option<(u32, KillMode, Instant)> = None;
    let mut next_progress = Instant::now();
    let mut complete_at: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        let now = Instant::now();
        // Scheduled events.
        if pending_kill.is_none()
            && let Some(&(at, is_broker)) = events.last()
            && now >= chaos_start + at
        {
            events.pop();
            if is_broker {
                eprintln!(
                    "chaos: SIGKILL broker at {:.1} s",
                    chaos_start.elapsed().as_secs_f64()
                );
                broker.kill().await;
                faults.broker_kills += 1;
                tokio::time::sleep(Duration::from_millis(rng.random_range(200..2000))).await;
                broker.restart().await?;
                faults.broker_restarts += 1;
                eprintln!("chaos: broker restarted");
            } else {
                // The victim is a running copier; when none runs (all
                // restarting), the kill waits a little.
                let running: Vec<u32> = copiers
                    .iter()
                    .filter(|c| c.child.is_some())
                    .map(|c| c.slot)
                    .collect();
                if running.is_empty() {
                    events.push((now - chaos_start + Duration::from_millis(300), false));
                    continue;
                }
                let slot = running[rng.random_range(0..running.len())];
                let mode = match (args.guarantee, rng.random_range(0..3)) {
                    (_, 0) => KillMode::Random,
                    (Guarantee::ExactlyOnce, 2) => KillMode::AfterStage,
                    _ => KillMode::AfterSend,
                };
                while rx.try_recv().is_ok() {}
                pending_kill = Some((slot, mode, now + Duration::from_secs(10)));
            }
        }
        // A kill waiting for its moment.
        if let Some((slot, mode, deadline)) = pending_kill {
            let c = &mut copiers[slot as usize];
            let mut fire = mode == KillMode::Random || now >= deadline;
            if !fire {
                while let Ok((s, g, line)) = rx.try_recv() {
                    let want = if mode == KillMode::AfterSend {
                        "window sent"
                    } else {
                        "window staged"
                    };
                    if s == slot && g == c.generation && line == want {
                        fire = true;
                        break;
                    }
                }
            }
            if fire {
                if let Some(mut child) = c.child.take() {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    faults.copier_kills += 1;
                    match (mode, now >= deadline) {
                        (KillMode::AfterSend, false) => faults.copier_kills_after_send += 1,
                        (KillMode::AfterStage, false) => faults.copier_kills_after_stage += 1,
                        _ => faults.copier_kills_random += 1,
                    }
                    eprintln!(
                        "chaos: SIGKILL copier {slot} ({mode:?}) at {:.1} s",
                        chaos_start.elapsed().as_secs_f64()
                    );
                    c.restart_at =
                        Some(Instant::now() + Duration::from_millis(rng.random_range(100..1500)));
                } else {
                    // The victim exited on its own meanwhile: kill another
                    // one a little later, so every scheduled kill happens.
                    events.push((
                        Instant::now() - chaos_start + Duration::from_millis(300),
                        false,
                    ));
                }
                pending_kill = None;
            }
        }
        // Copiers that exited on their own, and restarts.
        for c in copiers.iter_mut() {
            if let Some(child) = c.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                eprintln!("chaos: copier {} exited ({status}); restarting", c.slot);
                faults.copier_crash_exits += 1;
                c.child = None;
                c.restart_at = Some(Instant::now() + Duration::from_secs(1));
            }
            if c.child.is_none() && c.restart_at.is_some_and(|t| Instant::now() >= t) {
                c.generation += 1;
                c.child = Some(spawn_copier(&args, c.slot, c.generation, &tx));
                c.restart_at = None;
                faults.copier_restarts += 1;
            }
        }
        // Progress.
        if Instant::now() >= next_progress {
            next_progress = Instant::now() + Duration::from_secs(2);
            match reader.read_more().await {
                Ok(()) => {
                    let r = check::analyse(&reader.records, expected);
                    eprintln!(
                        "chaos: {:.0} s: output {} records, {} distinct of {}",
                        chaos_start.elapsed().as_secs_f64(),
                        r.output_records,
                        r.distinct,
                        expected
                    );
                    if r.distinct >= expected && complete_at.is_none() {
                        complete_at = Some(Instant::now());
                    }
                }
                Err(e) => eprintln!("chaos: progress: {e}"),
            }
        }
        let chaos_over = events.is_empty() && pending_kill.is_none();
        if chaos_over && (complete_at.is_some() || Instant::now() >= drain_deadline) {
            break;
        }
        tokio::select! {
            _ = tick.tick() => {}
            Some(line) = rx.recv(), if pending_kill.is_some() => {
                // Put it back in front of the checks above by handling it now.
                if let Some((slot, mode, _)) = pending_kill {
                    let want = if mode == KillMode::AfterSend { "window sent" } else { "window staged" };
                    let c = &mut copiers[slot as usize];
                    if line.0 == slot && line.1 == c.generation && line.2 == want
                        && let Some(mut child) = c.child.take()
                    {
                        let _ = child.start_kill();
                        let _ = child.wait().await;
                        faults.copier_kills += 1;
                        if mode == KillMode::AfterSend {
                            faults.copier_kills_after_send += 1;
                        } else {
                            faults.copier_kills_after_stage += 1;
                        }
                        eprintln!(
                            "chaos: SIGKILL copier {slot} ({mode:?}) at {:.1} s",
                            chaos_start.elapsed().as_secs_f64()
                        );
                        c.restart_at = Some(Instant::now() + Duration::from_millis(rng.random_range(100..1500)));
                        pending_kill = None;
                    }
                }
            }
        }
    }
    let seeded = match seeder.await {
        Ok(r) => r?,
        Err(e) => return Err(format!("the seeder panicked: {e}")),
    };
    eprintln!("chaos: seeded {seeded:?}");
    let seconds_to_complete = complete_at.map_or(-1.0, |t| (t - chaos_start).as_secs_f64());

    // Stop the copiers (they finish their transaction), then read.
    for c in copiers.iter_mut() {
        if let Some(child) = c.child.as_ref()
            && let Some(pid) = child.id()
        {
            // SAFETY: signalling a child process we own.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
    }
    for c in copiers.iter_mut() {
        if let Some(mut child) = c.child.take()
            && tokio::time::timeout(Duration::from_secs(30), child.wait())
                .await
                .is_err()
        {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
    let mut final_reader = check::CommittedReader::new(&bootstrap, "chaos-out", args.partitions);
    final_reader.read_more().await?;
    let mut input = check::CommittedReader::new(&bootstrap, "chaos-in", args.partitions);
    input.read_more().await?;
    let log_ends: Vec<i64> = input.ends.iter().map(|e| e.0).collect();
    let mut notes = vec![
        "out_of_order_per_key is reported, never a failure: share groups do not promise order",
    ];
    if final_reader.ends.iter().any(|(hw, lso)| hw != lso) {
        notes.push("an output partition still had an open transaction at the end (LSO < HW)");
    }
    broker.stop().await;
    let share_state = check::offline_share_state(
        &args.workdir.join("data"),
        "chaos-copier",
        topic_id,
        &log_ends,
    )?;
    let output = check::analyse(&final_reader.records, seeded.committed);

    let mut failures = Vec::new();
    if output.lost > 0 {
        failures.push(format!(
            "{} records lost (e.g. seq {:?})",
            output.lost, output.lost_sample
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
            "{} input records not in a terminal state",
            share_state.non_terminal
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
    let input_committed_records = input.records.len() as u64;
    if input_committed_records != seeded.committed {
        failures.push(format!(
            "the input holds {input_committed_records} committed records, the seeder wrote {}",
            seeded.committed
        ));
    }
    let report = Report {
        guarantee: args.guarantee.name(),
        passed: failures.is_empty(),
        failures,
        records: args.records,
        seeded,
        input_committed_records,
        copiers: args.copiers,
        partitions: args.partitions,
        complete_before_deadline: complete_at.is_some(),
        seconds_to_complete,
        seconds_total: started.elapsed().as_secs_f64(),
        faults,
        output,
        share_state,
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
