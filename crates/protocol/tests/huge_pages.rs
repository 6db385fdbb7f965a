//! `GuardedAlloc::new()` turns transparent huge pages off for its process
//! at the first allocation (the kernel reports the setting in
//! /proc/PID/status, `THP_enabled`, Linux 5.0+).
//!
//! The setting is inherited, so the test clears it in this process first,
//! then starts two children: this test binary (whose allocator is the guard)
//! and `cat`, which allocates with the C library. Only the first may report
//! huge pages off; `cat` shows that the child started with them on.
#![cfg(target_os = "linux")]

use std::process::Command;

#[global_allocator]
static GLOBAL: sharestream_protocol::alloc::GuardedAlloc =
    sharestream_protocol::alloc::GuardedAlloc::new();

fn thp_enabled(status: &str) -> bool {
    sharestream_protocol::alloc::huge_pages_enabled_in_status(status)
        .expect("THP_enabled in /proc/PID/status (Linux 5.0 or later)")
}

/// Run as a child by the test below: prints this process's status.
#[test]
fn child_prints_its_status() {
    if std::env::var_os("SHARESTREAM_THP_CHILD").is_none() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").expect("read status");
    println!("CHILD {}", thp_enabled(&status));
}

#[test]
fn the_guard_turns_transparent_huge_pages_off_at_the_first_allocation() {
    assert_eq!(
        sharestream_protocol::alloc::turned_huge_pages_off(),
        Some(true),
        "the guard did not turn huge pages off in this process"
    );
    // SAFETY: integer arguments only; clears a flag of this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0) };
    assert_eq!(rc, 0, "prctl(PR_SET_THP_DISABLE, 0)");

    let cat = Command::new("cat")
        .arg("/proc/self/status")
        .output()
        .expect("run cat");
    assert!(
        thp_enabled(&String::from_utf8_lossy(&cat.stdout)),
        "a child that does not use the guard starts with huge pages on"
    );

    let child = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "child_prints_its_status", "--nocapture"])
        .env("SHARESTREAM_THP_CHILD", "1")
        .output()
        .expect("run this test binary as a child");
    let out = String::from_utf8_lossy(&child.stdout);
    let got = out
        .lines()
        .find_map(|l| l.strip_prefix("CHILD "))
        .unwrap_or_else(|| panic!("the child printed no status: {out}"));
    assert_eq!(
        got, "false",
        "THP_enabled of a process whose allocator is the guard"
    );
}

#[test]
fn the_guard_can_leave_huge_pages_alone() {
    use sharestream_protocol::alloc::GuardedAlloc;
    assert!(GuardedAlloc::new().turns_huge_pages_off());
    assert!(
        !GuardedAlloc::new()
            .with_transparent_huge_pages()
            .turns_huge_pages_off()
    );
    assert!(GuardedAlloc::with_threshold(1 << 20).turns_huge_pages_off());
}
