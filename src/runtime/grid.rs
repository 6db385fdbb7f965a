//! When transactions commit: the commit grid shared by a process's workers.
//!
//! `commit.interval.ms` bounds how long a record waits before it is
//! visible to read_committed readers. A transaction's commit takes time
//! (EndTxn, markers), and under exactly_once the loop does not poll while
//! it commits, so a record that arrives just after one commit started is
//! fetched when that commit ends and waits for the next. If commits started
//! every `interval`, that record would be visible `interval` + one commit
//! after it arrived. With `commit.within.interval` (the default) the grid's
//! period is `interval` less the expected commit duration, so the wait is
//! about `interval` in the worst case; without it the period is `interval`.
//!
//! The expected duration follows the process's recent commits, rising at
//! once half way to a slower commit and falling by an eighth towards a
//! faster one, so it sits near the slow end of the recent commits (where
//! the latency percentiles are decided) rather than at their mean. It never
//! exceeds half the interval.
//!
//! With `commit.aligned` (the default) every worker starts its commits on
//! the same grid points: transactions of several workers that write to one
//! output partition then end together, and the partition's last stable
//! offset is not held back by another worker's transaction that began
//! earlier. Grid points are laid one period after the other as time goes
//! on (a change of the estimate moves only the points still to come), so
//! all workers see the same points. Without alignment each transaction
//! starts its commit one period after its first record.
//!
//! No I/O: time is an argument; the runtime passes tokio's clock.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Grid points kept for workers whose first record is a little in the past.
const KEPT_POINTS: usize = 16;

/// The commit schedule of one process (see the module docs).
#[derive(Debug)]
pub(crate) struct CommitGrid {
    interval: Duration,
    within: bool,
    aligned: bool,
    state: Mutex<GridState>,
}

#[derive(Debug)]
struct GridState {
    /// Increasing grid points; the last is the furthest laid so far.
    points: VecDeque<Instant>,
    /// The expected commit duration.
    estimate: Duration,
}

impl CommitGrid {
    /// A grid starting at `origin`.
    pub(crate) fn new(origin: Instant, interval: Duration, within: bool, aligned: bool) -> Self {
        Self {
            interval: interval.max(Duration::from_millis(1)),
            within,
            aligned,
            state: Mutex::new(GridState {
                points: VecDeque::from([origin]),
                estimate: Duration::ZERO,
            }),
        }
    }

    /// The time between commit starts: the interval less the expected
    /// commit (at most half of it), or the interval.
    #[cfg(test)]
    pub(crate) fn period(&self) -> Duration {
        let estimate = self.state.lock().estimate;
        self.period_for(estimate)
    }

    fn period_for(&self, estimate: Duration) -> Duration {
        if self.within {
            self.interval - estimate.min(self.interval / 2)
        } else {
            self.interval
        }
    }

    /// The expected commit duration.
    #[cfg(test)]
    pub(crate) fn estimate(&self) -> Duration {
        self.state.lock().estimate
    }

    /// A commit of `took` succeeded.
    pub(crate) fn record_commit(&self, took: Duration) {
        let mut s = self.state.lock();
        s.estimate = if took > s.estimate {
            s.estimate + (took - s.estimate) / 2
        } else {
            s.estimate - (s.estimate - took) / 8
        };
    }

    /// When the commit of a transaction whose first record was fetched at
    /// `first` starts: the first grid point after `first` (aligned), or one
    /// period after it. Always after `first`, at most one interval later.
    pub(crate) fn commit_start(&self, first: Instant) -> Instant {
        let mut s = self.state.lock();
        let period = self.period_for(s.estimate);
        if !self.aligned {
            return first + period;
        }
        while *s.points.back().expect("never empty") <= first {
            let next = *s.points.back().expect("never empty") + period;
            // A long idle gap: lay the next point near `first` rather than
            // every missed point one by one.
            let next = if next + period <= first {
                let behind = first.saturating_duration_since(next);
                let skip = behind.as_nanos() / period.as_nanos().max(1);
                next + Duration::from_nanos((skip * period.as_nanos()).min(u64::MAX as u128) as u64)
            } else {
                next
            };
            s.points.push_back(next);
            if s.points.len() > KEPT_POINTS {
                s.points.pop_front();
            }
        }
        *s.points
            .iter()
            .find(|p| **p > first)
            .expect("the last point is after first")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn unaligned_starts_one_period_after_the_first_record() {
        let t = Instant::now();
        let g = CommitGrid::new(t, 100 * MS, true, false);
        assert_eq!(g.commit_start(t + 7 * MS), t + 107 * MS);
        g.record_commit(20 * MS);
        assert_eq!(g.estimate(), 10 * MS, "half way up at once");
        assert_eq!(g.commit_start(t), t + 90 * MS);
        let off = CommitGrid::new(t, 100 * MS, false, false);
        off.record_commit(20 * MS);
        assert_eq!(
            off.commit_start(t),
            t + 100 * MS,
            "within off: the interval"
        );
    }

    #[test]
    fn estimate_rises_fast_falls_slowly_and_is_capped_at_half() {
        let t = Instant::now();
        let g = CommitGrid::new(t, 100 * MS, true, true);
        g.record_commit(40 * MS);
        assert_eq!(g.estimate(), 20 * MS);
        g.record_commit(4 * MS);
        assert_eq!(g.estimate(), 18 * MS);
        for _ in 0..10 {
            g.record_commit(300 * MS);
        }
        assert!(g.estimate() > 200 * MS);
        assert_eq!(g.period(), 50 * MS, "never below half the interval");
    }

    #[test]
    fn aligned_workers_share_points_and_each_start_is_within_one_interval() {
        let t = Instant::now();
        let g = CommitGrid::new(t, 100 * MS, true, true);
        // Two workers whose transactions began at different times start
        // their commits together, on the next point.
        let a = g.commit_start(t + 30 * MS);
        let b = g.commit_start(t + 70 * MS);
        assert_eq!(a, t + 100 * MS);
        assert_eq!(a, b);
        // Exactly on a point: the next one, never a zero-length wait.
        assert_eq!(g.commit_start(t + 100 * MS), t + 200 * MS);
        // The estimate shortens only the periods still to come.
        g.record_commit(40 * MS);
        assert_eq!(g.commit_start(t + 150 * MS), t + 200 * MS);
        assert_eq!(g.commit_start(t + 200 * MS), t + 280 * MS);
        // A worker a little behind still finds the earlier point.
        assert_eq!(g.commit_start(t + 199 * MS), t + 200 * MS);
        for first_ms in [0u32, 1, 79, 280, 281, 999, 5_000, 60_000] {
            let first = t + first_ms * MS;
            let d = g.commit_start(first);
            assert!(d > first && d <= first + 100 * MS, "{first_ms}: {d:?}");
        }
    }

    #[test]
    fn a_long_idle_gap_does_not_lay_every_missed_point() {
        let t = Instant::now();
        let g = CommitGrid::new(t, 100 * MS, false, true);
        let d = g.commit_start(t + Duration::from_secs(3600) + 50 * MS);
        assert_eq!(d, t + Duration::from_secs(3600) + 100 * MS);
        assert!(g.state.lock().points.len() <= KEPT_POINTS);
    }
}
