//! One application as several processes (issue #15): the mirror example
//! started two and three times with the same arguments against one
//! embedded broker, as users scale out. Every record arrives exactly once
//! (read back read_committed), no process fences another (no
//! PRODUCER_FENCED, no fatal error in any log), every process does part of
//! the work (its own metrics), and a graceful SIGTERM ends each cleanly.
//!
//! The processes are the `mirror` binary (package `sharestream-mirror`),
//! which `scripts/test.sh` builds before the tests.

use crate::rt;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rt::*;
use sharestream::broker::{Broker, BrokerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const RECORDS: usize = 20_000;

fn mirror_binary() -> PathBuf {
    // target/<profile>/deps/scale_out-<hash> -> target/<profile>/mirror
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let bin = dir.join("mirror");
    assert!(
        bin.exists(),
        "{} is missing: build the mirror package before the tests \
         (`cargo build -p sharestream-mirror`, as scripts/test.sh does)",
        bin.display()
    );
    bin
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Process {
    child: Child,
    metrics: std::net::SocketAddr,
    log: PathBuf,
}

impl Drop for Process {
    /// A failing test must not leave its processes running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(bootstrap: &str, group: &str, log_dir: &std::path::Path, i: usize) -> Process {
    let metrics: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let log = log_dir.join(format!("mirror-{i}.log"));
    let child = Command::new(mirror_binary())
        .args([
            "--bootstrap-server",
            bootstrap,
            "--topics",
            "orders",
            "--group",
            group,
            "--workers",
            "2",
            "--metrics-listen",
            &metrics.to_string(),
        ])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn the mirror example");
    Process {
        child,
        metrics,
        log,
    }
}

/// `name`'s value in the Prometheus text at `addr`, if it answers.
async fn scrape(addr: std::net::SocketAddr, name: &str) -> Option<u64> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).await.ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

async fn scale_out(processes: usize) {
    let b = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let group = format!("scale-{processes}");
    setup(&b, &group, &[("orders", 4), ("source.orders", 4)]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut ps: Vec<Process> = (0..processes)
        .map(|i| spawn(&b.bootstrap_servers(), &group, dir.path(), i))
        .collect();
    // Every process is up (serves its metrics) before the input arrives.
    for p in &ps {
        wait_until_async(60, "a mirror process to start", || async {
            scrape(p.metrics, "sharestream_runtime_records_in_total")
                .await
                .is_some()
        })
        .await;
    }
    produce_inputs(&b, "orders", 4, RECORDS).await;
    wait_output_for(&b, "source.orders", RECORDS, Duration::from_secs(120)).await;
    let mut shares = Vec::new();
    for p in &ps {
        shares.push(
            scrape(p.metrics, "sharestream_runtime_records_committed_total")
                .await
                .unwrap_or(0),
        );
        // No live instance fenced another: no worker had to re-create its
        // producer.
        assert_eq!(
            scrape(p.metrics, "sharestream_runtime_producer_recoveries_total").await,
            Some(0),
            "a process was fenced; see {}",
            p.log.display()
        );
    }
    for p in &mut ps {
        unsafe { libc::kill(p.child.id() as i32, libc::SIGTERM) };
    }
    for p in &mut ps {
        let status = p.child.wait().unwrap();
        let log = std::fs::read_to_string(&p.log).unwrap();
        assert!(status.success(), "{status}: {log}");
        let lower = log.to_lowercase();
        for bad in ["fenced", "invalid_producer_epoch", "error:", " error "] {
            assert!(!lower.contains(bad), "{bad} in {}:\n{log}", p.log.display());
        }
    }
    let out = committed(&b, "source.orders").await;
    let counts: BTreeMap<String, usize> = value_counts(&out);
    assert_eq!(out.len(), RECORDS, "every record once, none twice");
    assert_eq!(counts.len(), RECORDS);
    assert!(counts.values().all(|&c| c == 1));
    eprintln!("{processes} processes: records committed per process {shares:?}");
    assert_eq!(shares.iter().sum::<u64>(), RECORDS as u64);
    assert!(
        shares.iter().all(|&n| n > 0),
        "every process did part of the work: {shares:?}"
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_of_one_application_mirror_exactly_once() {
    scale_out(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_of_one_application_mirror_exactly_once() {
    scale_out(3).await;
}
