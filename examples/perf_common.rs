//! Scaffolding shared by the client load tools (`share_perf`,
//! `produce_perf`, `krafka_perf`), included by each with
//! `#[path = "perf_common.rs"] mod perf_common;`.
//!
//! Every tool runs one client in a process of its own and ends with one
//! line that `clients_bench` (and scripts/bench_vs_kafka.sh) parse:
//!
//! ```text
//! RESULT records=.. bytes=.. seconds=.. records_per_s=.. mb_per_s=.. cpu_s=.. cpu_us_per_record=.. peak_rss_mib=..
//! ```
//!
//! `seconds` and `cpu_s` cover the measured part only (from
//! [`Clock::start`] to [`Clock::report`]); `cpu_s` is the whole process's
//! user + system time over it (`getrusage(RUSAGE_SELF)`), so it counts
//! every thread of the client. `peak_rss_mib` is the process's `VmHWM`
//! (whole life). MB = 10^6 bytes of keys and values.

#![allow(dead_code)]

use std::time::Instant;

use bytes::Bytes;

/// A field of `/proc/self/status` in KiB (`VmHWM:`, `VmRSS:`), 0 if absent.
pub fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// User + system CPU seconds of this process so far, all threads.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A value of `size` bytes (a repeating byte pattern, not compressible to
/// nothing).
pub fn payload(size: usize) -> Bytes {
    Bytes::from((0..size).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
}

/// `name=value` settings given on the command line.
pub fn parse_props(props: &[String]) -> Vec<(String, String)> {
    props
        .iter()
        .map(|p| {
            let (k, v) = p
                .split_once('=')
                .unwrap_or_else(|| panic!("expected name=value, got {p:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// Wall clock and process CPU from the start of the measured part.
pub struct Clock {
    start: Instant,
    cpu: f64,
}

impl Clock {
    /// Starts measuring now.
    pub fn start() -> Self {
        Self {
            start: Instant::now(),
            cpu: cpu_seconds(),
        }
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Prints the RESULT line for `records` records of `bytes` payload
    /// bytes, measured until now.
    pub fn report(&self, records: u64, bytes: u64) {
        let secs = self.elapsed();
        let cpu = cpu_seconds() - self.cpu;
        println!(
            "RESULT records={records} bytes={bytes} seconds={secs:.3} records_per_s={:.0} \
             mb_per_s={:.2} cpu_s={cpu:.3} cpu_us_per_record={:.3} peak_rss_mib={:.1}",
            records as f64 / secs,
            bytes as f64 / secs / 1e6,
            cpu * 1e6 / records.max(1) as f64,
            status_kib("VmHWM:") as f64 / 1024.0
        );
    }
}

/// Fails the run with a RESULT line the bench recognises.
pub fn fail(reason: &str) -> ! {
    println!("RESULT error={}", reason.replace(' ', "_"));
    std::process::exit(1);
}
