//! Tiny frames announcing billions of array elements must come back as
//! decode errors, without aborting and without touching memory in
//! proportion to the announced count. See `sharestream::alloc`.
//!
//! This file holds a single test so that nothing else runs in the process
//! while it watches the peak resident set size.

#[path = "support/hostile.rs"]
mod hostile;

use sharestream::alloc::{GuardedAlloc, stats};

#[global_allocator]
static GLOBAL: GuardedAlloc = GuardedAlloc::new();

/// Peak resident set size in KiB (`VmHWM`), Linux only.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resets the peak RSS to the current RSS (Linux >= 4.0).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[test]
fn hostile_array_counts_are_errors_not_aborts() {
    assert!(sharestream::alloc::is_installed());
    let can_watch_rss = reset_peak_rss();
    let peak_before = peak_rss_kib();
    let before = stats();

    for h in hostile::REQUESTS {
        let res = hostile::decode_hostile_request(h.frame);
        assert!(res.is_err(), "{}: decoded {res:?}", h.name);
    }
    for (name, res) in hostile::decode_hostile_responses() {
        assert!(res.is_err(), "{name}: decoded {res:?}");
    }

    let after = stats();
    if sharestream::alloc::guard_supported() {
        // The crate did ask for the announced capacity (the hole is real)...
        assert!(
            after.huge_reservations >= before.huge_reservations + 5,
            "{before:?} -> {after:?}"
        );
        assert!(after.largest_huge_bytes >= 100 << 30, "{after:?}");
        assert_eq!(after.huge_failures, before.huge_failures);
        // ...and gave it all back.
        assert_eq!(after.live_huge_bytes, before.live_huge_bytes);
    }
    // Nothing proportional to the announced counts was ever resident.
    if let (true, Some(b), Some(a)) = (can_watch_rss, peak_before, peak_rss_kib()) {
        assert!(
            a.saturating_sub(b) < 64 * 1024,
            "peak RSS grew from {b} KiB to {a} KiB"
        );
    }
}
