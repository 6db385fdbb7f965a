//! Exponential backoff with jitter, and the reconnect schedule built on it.
//!
//! The delay before attempt `n` (counting failures since the last success)
//! is `initial * multiplier^n`, capped at `max`, then multiplied by a random
//! factor in `[1 - jitter, 1 + jitter]` so that many clients that failed
//! together do not retry together. As in Kafka's clients the jitter is
//! applied after the cap, so a delay may exceed `max` by up to `jitter`.
//!
//! Kafka's defaults are provided: [`BackoffConfig::reconnect`]
//! (`reconnect.backoff.ms` = 50, `reconnect.backoff.max.ms` = 1000) and
//! [`BackoffConfig::retry`] (`retry.backoff.ms` = 100,
//! `retry.backoff.max.ms` = 1000), both with multiplier 2 and jitter 0.2.
//!
//! Nothing here reads a clock: [`Backoff`] hands out durations, and
//! [`ReconnectSchedule`] takes the current instant as an argument. A seeded
//! [`Backoff`] is fully deterministic, for tests.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// Parameters of an exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// Delay after the first failure.
    pub initial: Duration,
    /// Cap on the delay before jitter.
    pub max: Duration,
    /// Growth factor per failure (Kafka uses 2).
    pub multiplier: f64,
    /// Relative jitter in `[0, 1)`: the delay is scaled by a random factor in
    /// `[1 - jitter, 1 + jitter]` (Kafka uses 0.2).
    pub jitter: f64,
}

impl BackoffConfig {
    /// Kafka's reconnect backoff: `reconnect.backoff.ms` = 50,
    /// `reconnect.backoff.max.ms` = 1000.
    pub fn reconnect() -> Self {
        Self {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(1000),
            multiplier: 2.0,
            jitter: 0.2,
        }
    }

    /// Kafka's retry backoff: `retry.backoff.ms` = 100,
    /// `retry.backoff.max.ms` = 1000.
    pub fn retry() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(1000),
            multiplier: 2.0,
            jitter: 0.2,
        }
    }

    /// The delay before jitter after `failures` consecutive failures
    /// (`failures` >= 1).
    pub fn base_delay(&self, failures: u32) -> Duration {
        let exp = failures.saturating_sub(1).min(64) as i32;
        let secs = self.initial.as_secs_f64() * self.multiplier.max(1.0).powi(exp);
        let capped = secs.min(self.max.as_secs_f64()).max(0.0);
        Duration::from_secs_f64(capped)
    }
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self::retry()
    }
}

/// An exponential backoff counter with jitter.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    failures: u32,
    rng: StdRng,
}

impl Backoff {
    /// A backoff whose jitter is seeded from the operating system.
    pub fn new(config: BackoffConfig) -> Self {
        Self {
            config,
            failures: 0,
            rng: StdRng::from_os_rng(),
        }
    }

    /// A deterministic backoff: the same seed gives the same delays.
    pub fn with_seed(config: BackoffConfig, seed: u64) -> Self {
        Self {
            config,
            failures: 0,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// Consecutive failures recorded since the last [`Backoff::reset`].
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Records a failure and returns how long to wait before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let base = self.config.base_delay(self.failures);
        let jitter = self.config.jitter.clamp(0.0, 0.99);
        if jitter == 0.0 {
            return base;
        }
        let factor = self.rng.random_range((1.0 - jitter)..=(1.0 + jitter));
        Duration::from_secs_f64(base.as_secs_f64() * factor)
    }

    /// Forgets past failures (after a success).
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

/// When the next connection attempt to one broker may start.
///
/// A state machine without I/O: record failures and successes with the
/// current instant, ask when the next attempt is allowed.
#[derive(Debug, Clone)]
pub struct ReconnectSchedule {
    backoff: Backoff,
    next_attempt: Option<Instant>,
}

impl ReconnectSchedule {
    /// A schedule allowing an attempt at once, spacing later ones by `backoff`.
    pub fn new(backoff: Backoff) -> Self {
        Self {
            backoff,
            next_attempt: None,
        }
    }

    /// The earliest instant of the next attempt; `None` means "now".
    pub fn next_attempt(&self) -> Option<Instant> {
        self.next_attempt
    }

    /// Whether an attempt may start at `now`.
    pub fn may_attempt(&self, now: Instant) -> bool {
        self.next_attempt.is_none_or(|at| now >= at)
    }

    /// A connection attempt failed, or an established connection was lost,
    /// at `now`: the next attempt waits for the backoff. Returns its instant.
    pub fn on_failure(&mut self, now: Instant) -> Instant {
        let at = now + self.backoff.next_delay();
        self.next_attempt = Some(at);
        at
    }

    /// A connection was established: the backoff starts over.
    pub fn on_success(&mut self) {
        self.backoff.reset();
        self.next_attempt = None;
    }

    /// Consecutive failures since the last success.
    pub fn failures(&self) -> u32 {
        self.backoff.failures()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_delay_doubles_then_caps() {
        let c = BackoffConfig::reconnect();
        let ms: Vec<u128> = (1..=7).map(|n| c.base_delay(n).as_millis()).collect();
        assert_eq!(ms, vec![50, 100, 200, 400, 800, 1000, 1000]);
        assert_eq!(
            BackoffConfig::retry().base_delay(1),
            Duration::from_millis(100)
        );
        // Huge failure counts neither overflow nor exceed the cap.
        assert_eq!(c.base_delay(u32::MAX), Duration::from_millis(1000));
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let c = BackoffConfig::reconnect();
        let mut b = Backoff::with_seed(c, 7);
        for n in 1..=50u32 {
            let d = b.next_delay().as_secs_f64();
            let base = c.base_delay(n).as_secs_f64();
            assert!(d >= base * 0.8 - 1e-9 && d <= base * 1.2 + 1e-9, "{n}: {d}");
        }
        assert_eq!(b.failures(), 50);
    }

    #[test]
    fn jitter_actually_varies() {
        let mut b = Backoff::with_seed(BackoffConfig::reconnect(), 1);
        let delays: Vec<Duration> = (0..20)
            .map(|_| {
                b.reset();
                b.next_delay()
            })
            .collect();
        assert!(delays.iter().any(|d| *d != delays[0]));
    }

    #[test]
    fn seeded_backoff_is_deterministic() {
        let mut a = Backoff::with_seed(BackoffConfig::retry(), 42);
        let mut b = Backoff::with_seed(BackoffConfig::retry(), 42);
        for _ in 0..10 {
            assert_eq!(a.next_delay(), b.next_delay());
        }
    }

    #[test]
    fn no_jitter_gives_exact_delays() {
        let c = BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::reconnect()
        };
        let mut b = Backoff::new(c);
        assert_eq!(b.next_delay(), Duration::from_millis(50));
        assert_eq!(b.next_delay(), Duration::from_millis(100));
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(50));
    }

    #[test]
    fn reconnect_schedule_spaces_attempts() {
        let c = BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::reconnect()
        };
        let mut s = ReconnectSchedule::new(Backoff::new(c));
        let t0 = Instant::now();
        assert!(s.may_attempt(t0));
        let at = s.on_failure(t0);
        assert_eq!(at, t0 + Duration::from_millis(50));
        assert!(!s.may_attempt(t0 + Duration::from_millis(49)));
        assert!(s.may_attempt(at));
        let at2 = s.on_failure(at);
        assert_eq!(at2, at + Duration::from_millis(100));
        assert_eq!(s.failures(), 2);
        s.on_success();
        assert!(s.may_attempt(at));
        assert_eq!(s.failures(), 0);
        assert_eq!(s.on_failure(at), at + Duration::from_millis(50));
    }
}
