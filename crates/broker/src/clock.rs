//! The broker's one clock.
//!
//! Every state machine of the broker takes time as an input (milliseconds
//! since the Unix epoch). The broker reads it from the [`Clock`] in its
//! [`BrokerConfig`](crate::BrokerConfig), and nowhere else, so that a test
//! can run the broker on a time it controls:
//!
//! - [`SystemClock`]: wall-clock time (the default);
//! - [`TokioClock`]: follows tokio's clock from a wall-clock start, so a
//!   test on paused tokio time (`tokio::time::pause`, `advance`) moves the
//!   broker's lock and session deadlines with its timers;
//! - [`ManualClock`]: set and advanced by hand.
//!
//! Durations measured for metrics (request latency) are not broker time
//! and use `std::time::Instant`.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of "now" in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// A clock shared by the broker's parts.
pub type SharedClock = Arc<dyn Clock>;

/// Wall-clock time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        wall_clock_ms()
    }
}

/// The system clock, shared.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// Tokio's clock (paused or not), anchored at the wall-clock time of its
/// creation. Create it inside the runtime whose time it should follow.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base_ms: i64,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// Starts at the wall-clock time now and follows tokio's clock.
    pub fn new() -> Self {
        Self {
            base_ms: wall_clock_ms(),
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> i64 {
        self.base_ms + self.start.elapsed().as_millis() as i64
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock standing at `now_ms`.
    pub fn new(now_ms: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(now_ms)))
    }

    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(1_000);
        assert_eq!(c.now_ms(), 1_000);
        c.advance(250);
        assert_eq!(c.now_ms(), 1_250);
        c.set(5);
        assert_eq!(c.now_ms(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let c = TokioClock::new();
        let t0 = c.now_ms();
        tokio::time::advance(std::time::Duration::from_secs(30)).await;
        assert_eq!(c.now_ms() - t0, 30_000);
    }
}
