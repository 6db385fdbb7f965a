//! Share consumer metrics: `share-group-metadata-fetch-rate` (calls of
//! `share_group_metadata()` per second), records polled, acknowledgements
//! sent.
//!
//! The rate is Kafka's sampled rate: two windows of 30 s; the rate is the
//! count in the current and previous window over the time they span. Time
//! is an argument, so the arithmetic is testable without a clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// A count per second over a sliding pair of windows.
#[derive(Debug)]
pub struct WindowedRate {
    window: Duration,
    state: Mutex<RateState>,
}

#[derive(Debug)]
struct RateState {
    started: Option<Instant>,
    current_start: Option<Instant>,
    current: u64,
    previous: u64,
}

impl WindowedRate {
    /// A rate over windows of `window`.
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            state: Mutex::new(RateState {
                started: None,
                current_start: None,
                current: 0,
                previous: 0,
            }),
        }
    }

    fn roll(&self, st: &mut RateState, now: Instant) {
        let start = *st.current_start.get_or_insert(now);
        st.started.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= self.window * 2 {
            st.previous = 0;
            st.current = 0;
            st.current_start = Some(now);
        } else if elapsed >= self.window {
            st.previous = st.current;
            st.current = 0;
            st.current_start = Some(start + self.window);
        }
    }

    /// Counts one event at `now`.
    pub fn record(&self, now: Instant) {
        let mut st = self.state.lock();
        self.roll(&mut st, now);
        st.current += 1;
    }

    /// Events per second at `now`.
    pub fn rate(&self, now: Instant) -> f64 {
        let mut st = self.state.lock();
        self.roll(&mut st, now);
        let (Some(started), Some(current_start)) = (st.started, st.current_start) else {
            return 0.0;
        };
        let span_start = current_start
            .checked_sub(self.window)
            .map_or(started, |s| s.max(started));
        // At least one second, as Kafka's Rate does for young windows.
        let span = now
            .saturating_duration_since(span_start)
            .max(Duration::from_secs(1));
        (st.current + st.previous) as f64 / span.as_secs_f64()
    }
}

/// The share consumer's metrics.
#[derive(Debug)]
pub struct ShareConsumerMetrics {
    metadata_fetches: AtomicU64,
    metadata_fetch_rate: WindowedRate,
    records_polled: AtomicU64,
    acknowledgements_sent: AtomicU64,
    redelivered_while_held: AtomicU64,
}

impl Default for ShareConsumerMetrics {
    fn default() -> Self {
        Self {
            metadata_fetches: AtomicU64::new(0),
            metadata_fetch_rate: WindowedRate::new(Duration::from_secs(30)),
            records_polled: AtomicU64::new(0),
            acknowledgements_sent: AtomicU64::new(0),
            redelivered_while_held: AtomicU64::new(0),
        }
    }
}

impl ShareConsumerMetrics {
    pub(crate) fn on_metadata_fetch(&self, now: Instant) {
        self.metadata_fetches.fetch_add(1, Ordering::Relaxed);
        self.metadata_fetch_rate.record(now);
    }
    pub(crate) fn on_records_polled(&self, n: usize) {
        self.records_polled.fetch_add(n as u64, Ordering::Relaxed);
    }
    pub(crate) fn on_redelivered_while_held(&self, n: usize) {
        self.redelivered_while_held
            .fetch_add(n as u64, Ordering::Relaxed);
    }
    pub(crate) fn on_acknowledgements_sent(&self, n: usize) {
        self.acknowledgements_sent
            .fetch_add(n as u64, Ordering::Relaxed);
    }
    /// `share-group-metadata-fetch-total`: calls of `share_group_metadata()`.
    pub fn share_group_metadata_fetch_total(&self) -> u64 {
        self.metadata_fetches.load(Ordering::Relaxed)
    }
    /// `share-group-metadata-fetch-rate` at `now` (calls per second).
    pub fn share_group_metadata_fetch_rate(&self, now: Instant) -> f64 {
        self.metadata_fetch_rate.rate(now)
    }
    /// Records handed out by `poll`.
    pub fn records_polled_total(&self) -> u64 {
        self.records_polled.load(Ordering::Relaxed)
    }
    /// Records a broker delivered again while this consumer still held
    /// them in a transaction's acknowledgements (their lock had expired
    /// and this member acquired them again): left out of the poll, since
    /// the transaction's acknowledgement covers them whichever
    /// acquisition it meets (see `drop_redelivered`).
    pub fn records_redelivered_while_held_total(&self) -> u64 {
        self.redelivered_while_held.load(Ordering::Relaxed)
    }
    /// Offsets acknowledged to brokers (piggy-backed or ShareAcknowledge),
    /// gaps included.
    pub fn acknowledgements_sent_total(&self) -> u64 {
        self.acknowledgements_sent.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_counts_over_two_windows() {
        let t0 = Instant::now();
        let r = WindowedRate::new(Duration::from_secs(30));
        assert_eq!(r.rate(t0), 0.0);
        for i in 0..60 {
            r.record(t0 + Duration::from_millis(500 * i));
        }
        // 60 events in 30 s.
        let rate = r.rate(t0 + Duration::from_secs(30));
        assert!((rate - 2.0).abs() < 1e-9, "{rate}");
        // Windows later, nothing recent.
        assert_eq!(r.rate(t0 + Duration::from_secs(200)), 0.0);
    }
}
