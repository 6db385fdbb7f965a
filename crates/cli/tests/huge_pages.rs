//! The broker process runs without transparent huge pages unless
//! `--transparent-huge-pages` asks for them (the kernel reports the
//! process's setting in /proc/PID/status, `THP_enabled`, Linux 5.0+).
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Starts `sharestream broker --memory` with `extra` arguments and waits
/// for its first line, so that it is past start-up.
fn start(extra: &[&str]) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sharestream"))
        .args(["broker", "--memory", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the broker");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("the broker's first line");
    assert!(
        line.starts_with("sharestream broker listening on "),
        "unexpected first line: {line:?}"
    );
    child
}

fn thp_enabled(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    sharestream_protocol::alloc::huge_pages_enabled_in_status(&status)
        .expect("THP_enabled in /proc/PID/status (Linux 5.0 or later)")
}

#[test]
fn the_broker_runs_without_transparent_huge_pages_unless_asked() {
    for (extra, want) in [(&[][..], false), (&["--transparent-huge-pages"][..], true)] {
        let mut broker = start(extra);
        let got = thp_enabled(broker.id());
        broker.kill().expect("stop the broker");
        let _ = broker.wait();
        assert_eq!(got, want, "THP_enabled with arguments {extra:?}");
    }
}
