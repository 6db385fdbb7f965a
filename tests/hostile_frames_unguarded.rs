//! Reproduces the hole `sharestream::alloc::GuardedAlloc` closes: without
//! the guard, one tiny frame announcing 2^32-2 topics aborts the process.
//!
//! The test re-runs itself as a child process (the abort would take the test
//! harness down otherwise) and checks that the child died of SIGABRT with
//! Rust's "memory allocation failed" message. This binary deliberately keeps
//! the system allocator.

#[path = "support/hostile.rs"]
mod hostile;

const CHILD_ENV: &str = "SHARESTREAM_HOSTILE_CHILD";

fn read_kib(field: &str) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The reproduction only makes sense where the kernel refuses a ~240 GiB
/// reservation: heuristic overcommit (mode 0) with less RAM + swap than that.
fn kernel_refuses_huge_reservations() -> bool {
    let mode = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    let (Some(mem), Some(swap)) = (read_kib("MemTotal:"), read_kib("SwapTotal:")) else {
        return false;
    };
    matches!(mode.trim(), "0" | "2") && mem + swap < 200 << 20
}

#[test]
fn unguarded_decoder_aborts_on_a_hostile_count() {
    if std::env::var_os(CHILD_ENV).is_some() {
        // Child: decode the frame whose count is 2^32-2 (compact array).
        let frame = hostile::REQUESTS
            .iter()
            .find(|h| h.name.starts_with("Metadata v12"))
            .unwrap();
        let res = hostile::decode_hostile_request(frame.frame);
        println!("child survived: {res:?}");
        return;
    }
    // Not a silent pass where the reproduction cannot happen: the test
    // fails and says why (skip it there with
    // `--skip unguarded_decoder_aborts_on_a_hostile_count`).
    assert!(
        cfg!(target_os = "linux") && kernel_refuses_huge_reservations(),
        "this kernel would grant a ~240 GiB reservation (vm.overcommit_memory 1, or RAM + swap \
         of 200 GiB or more), so the unguarded abort cannot be reproduced here"
    );
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "unguarded_decoder_aborts_on_a_hostile_count",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(libc_sigabrt()),
            "child status {:?}, stdout {}, stderr {stderr}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert!(stderr.contains("memory allocation of"), "stderr: {stderr}");
}

#[cfg(unix)]
fn libc_sigabrt() -> i32 {
    6
}
