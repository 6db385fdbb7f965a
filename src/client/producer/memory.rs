//! `buffer.memory`: the bytes of records a producer may hold.
//!
//! Every record is counted from [`Producer::send`](super::Producer::send)
//! until its batch completes (acknowledged, failed, or aborted): while it
//! waits in the command channel, in the accumulator, and in flight. `send`
//! reserves the record's estimated encoded size
//! ([`record_size`](super::accumulator::record_size)); when the budget is
//! spent it waits, up to what is left of `max.block.ms`, for completions to
//! give bytes back, and fails with [`ProducerError::BufferExhausted`]
//! after that. A record larger than the whole budget fails at once with
//! [`ProducerError::RecordTooLarge`]. Waiters are served first come, first
//! served: a large record at the head is not overtaken by small ones, so it
//! cannot starve.
//!
//! Java's producer takes `batch.size` buffers out of a pool, one per batch
//! (a record larger than `batch.size` gets a buffer of its own size), and
//! counts a batch's whole buffer even while it holds one small record. Our
//! batches are lists of records, not preallocated buffers, so the budget
//! counts what is held: the sum of the records' sizes. Reserving is one
//! compare-and-swap per record (no lock); bytes go back once per batch,
//! through the batch's [`BatchMemory`], when the batch is dropped wherever
//! that happens (completion, failure, abort, close). The record sizes are
//! estimates of the encoded bytes; the producer's real memory per record
//! (record struct, delivery channel) is some tens of bytes more, and a
//! batch in flight also holds its encoded request.
//!
//! A send that has to wait first waits, for at most 20 ms, until a
//! thirty-second of the budget is free, and leaves what it does not need
//! to the sends after it; then it waits for its own bytes. So under
//! back-pressure the application's task wakes once per thirty-second of
//! the budget, not once per completed batch.
//!
//! [`ProducerError::BufferExhausted`]: super::ProducerError::BufferExhausted
//! [`ProducerError::RecordTooLarge`]: super::ProducerError::RecordTooLarge

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;

/// A send that has to wait first waits for this fraction of the budget
/// (1/32: 1 MiB of the default 32 MiB), for at most [`SHARE_WINDOW`].
const WAKE_SHARE: usize = 32;

/// How long a waiting send waits for a share of the budget before it
/// waits for its own bytes only: the most that sharing the wakeups adds to
/// a send's wait when completions are slow.
const SHARE_WINDOW: Duration = Duration::from_millis(20);

/// Why a reservation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReserveError {
    /// Larger than the whole budget: it could never fit.
    TooLarge,
    /// No room within the given time.
    Exhausted,
    /// The producer was closed while waiting.
    Closed,
}

/// The budget of one producer (`buffer.memory` bytes).
#[derive(Debug)]
pub struct BufferMemory {
    total: usize,
    free: Semaphore,
    exhausted: AtomicU64,
    waiting: AtomicUsize,
}

impl BufferMemory {
    /// A budget of `total` bytes (at most tokio's semaphore limit, 2^61-1 on
    /// 64-bit targets: more is the same as no bound).
    pub fn new(total: u64) -> Self {
        let total = usize::try_from(total)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Self {
            total,
            free: Semaphore::new(total),
            exhausted: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Reservations waiting for room now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// The budget in bytes (`buffer-total-bytes`).
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes not reserved (`buffer-available-bytes`). Bytes already handed
    /// to a waiter that needs more are not counted.
    pub fn available(&self) -> usize {
        self.free.available_permits()
    }

    /// Sends that failed for want of room (`buffer-exhausted-total`).
    pub fn exhausted_total(&self) -> u64 {
        self.exhausted.load(Ordering::Relaxed)
    }

    /// [`BufferMemory::reserve_or`] with nothing to do on waiting.
    #[cfg(test)]
    pub(crate) async fn reserve(
        &self,
        bytes: usize,
        max_wait: Duration,
    ) -> Result<bool, ReserveError> {
        self.reserve_or(bytes, max_wait, || {}).await
    }

    /// Takes `bytes` if they are free now (one compare-and-swap), else waits
    /// up to `max_wait` behind earlier waiters; `Ok(true)` when it waited.
    /// It calls `on_wait` once the wait has begun (counted in
    /// [`BufferMemory::waiting`]): the producer wakes its sender there, so
    /// that batches go out without lingering.
    pub(crate) async fn reserve_or(
        &self,
        bytes: usize,
        max_wait: Duration,
        on_wait: impl FnOnce(),
    ) -> Result<bool, ReserveError> {
        if bytes > self.total {
            return Err(ReserveError::TooLarge);
        }
        let Ok(n) = u32::try_from(bytes) else {
            return Err(ReserveError::TooLarge);
        };
        match self.free.try_acquire_many(n) {
            Ok(permit) => {
                permit.forget();
                return Ok(false);
            }
            Err(tokio::sync::TryAcquireError::Closed) => return Err(ReserveError::Closed),
            Err(tokio::sync::TryAcquireError::NoPermits) => {}
        }
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.waiting);
        on_wait();
        // First wait, briefly, for a share of the budget rather than for
        // this record's bytes alone, and hand the surplus straight back:
        // the sends that follow find it free. Waiting for the record alone
        // woke the sending task at every completed batch (10 000 times a
        // second at 1 KiB records), and those wakeups cost the producer
        // more than the records did.
        let share = (self.total / WAKE_SHARE).min(u32::MAX as usize);
        let mut rest = max_wait;
        if share > bytes {
            let window = max_wait.min(SHARE_WINDOW);
            match tokio::time::timeout(window, self.free.acquire_many(share as u32)).await {
                Ok(Ok(permit)) => {
                    permit.forget();
                    self.free.add_permits(share - bytes);
                    return Ok(true);
                }
                Ok(Err(_closed)) => return Err(ReserveError::Closed),
                // What the waiter had gathered went back to the semaphore
                // when its wait was dropped; wait for the record's bytes.
                Err(_elapsed) => rest -= window,
            }
        }
        match tokio::time::timeout(rest, self.free.acquire_many(n)).await {
            Ok(Ok(permit)) => {
                permit.forget();
                Ok(true)
            }
            Ok(Err(_closed)) => Err(ReserveError::Closed),
            Err(_elapsed) => {
                self.exhausted.fetch_add(1, Ordering::Relaxed);
                Err(ReserveError::Exhausted)
            }
        }
    }

    /// Gives `bytes` back (they were reserved).
    pub(crate) fn release(&self, bytes: usize) {
        if bytes > 0 {
            self.free.add_permits(bytes);
        }
    }

    /// Fails every waiting and later reservation with
    /// [`ReserveError::Closed`]; releases still count.
    pub(crate) fn close(&self) {
        self.free.close();
    }
}

/// The bytes a batch holds in its producer's [`BufferMemory`]; given back
/// when the batch is dropped. Without a budget (a bare accumulator) it only
/// counts.
#[derive(Debug, Default)]
pub struct BatchMemory {
    budget: Option<Arc<BufferMemory>>,
    bytes: usize,
}

impl BatchMemory {
    pub(crate) fn new(budget: Option<Arc<BufferMemory>>) -> Self {
        Self { budget, bytes: 0 }
    }

    /// Takes over the reservation of a record of `bytes`.
    pub(crate) fn add(&mut self, bytes: usize) {
        self.bytes += bytes;
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for BatchMemory {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.release(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn waits_in_order_and_times_out() {
        let m = Arc::new(BufferMemory::new(1000));
        assert_eq!(m.reserve(600, Duration::ZERO).await, Ok(false));
        assert_eq!(m.available(), 400);
        assert_eq!(
            m.reserve(1001, Duration::from_secs(1)).await,
            Err(ReserveError::TooLarge)
        );
        // No room: times out after max_wait and gives back what it held.
        let t0 = tokio::time::Instant::now();
        assert_eq!(
            m.reserve(500, Duration::from_millis(50)).await,
            Err(ReserveError::Exhausted)
        );
        assert_eq!(t0.elapsed(), Duration::from_millis(50));
        assert_eq!(m.available(), 400);
        assert_eq!(m.exhausted_total(), 1);
        // A large waiter takes what is free and queues; a small one queues
        // behind it and is served after it, not before.
        let big = tokio::spawn({
            let m = m.clone();
            async move { m.reserve(900, Duration::from_secs(10)).await }
        });
        tokio::task::yield_now().await;
        let small = tokio::spawn({
            let m = m.clone();
            async move { m.reserve(100, Duration::from_secs(10)).await }
        });
        tokio::task::yield_now().await;
        assert!(!big.is_finished() && !small.is_finished());
        let mut batch = BatchMemory::new(Some(m.clone()));
        batch.add(600);
        drop(batch);
        assert_eq!(big.await.unwrap(), Ok(true));
        tokio::task::yield_now().await;
        assert_eq!(small.await.unwrap(), Ok(true));
        assert_eq!(m.available(), 0);
        m.release(1000);
        assert_eq!(m.available(), 1000);
        // Closing fails waiters.
        m.reserve(1000, Duration::ZERO).await.unwrap();
        let waiter = tokio::spawn({
            let m = m.clone();
            async move { m.reserve(1, Duration::from_secs(10)).await }
        });
        tokio::task::yield_now().await;
        m.close();
        assert_eq!(waiter.await.unwrap(), Err(ReserveError::Closed));
        m.release(1000);
        assert_eq!(m.available(), 1000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_send_wakes_for_a_share_of_the_budget_or_after_the_window() {
        let m = Arc::new(BufferMemory::new(32_000));
        m.reserve(32_000, Duration::ZERO).await.unwrap();
        let waiter = tokio::spawn({
            let m = m.clone();
            async move { m.reserve(100, Duration::from_secs(10)).await }
        });
        tokio::task::yield_now().await;
        // Room for the record but not for a share (1 000 bytes): it waits on.
        m.release(400);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        // A share is free: it takes its record and leaves the rest.
        m.release(600);
        assert_eq!(waiter.await.unwrap(), Ok(true));
        assert_eq!(m.available(), 900);

        // Completions too slow for a share: after the window the record's
        // own bytes are enough, and no later than that.
        m.reserve(900, Duration::ZERO).await.unwrap();
        let t0 = tokio::time::Instant::now();
        let waiter = tokio::spawn({
            let m = m.clone();
            async move { m.reserve(100, Duration::from_secs(10)).await }
        });
        tokio::task::yield_now().await;
        m.release(300);
        assert_eq!(waiter.await.unwrap(), Ok(true));
        assert_eq!(t0.elapsed(), SHARE_WINDOW);
        assert_eq!(m.available(), 200);

        // The window counts against max_wait: nothing freed, it fails at
        // max_wait, not at max_wait plus the window.
        let t0 = tokio::time::Instant::now();
        assert_eq!(
            m.reserve(1000, Duration::from_millis(50)).await,
            Err(ReserveError::Exhausted)
        );
        assert_eq!(t0.elapsed(), Duration::from_millis(50));
        let t0 = tokio::time::Instant::now();
        assert_eq!(
            m.reserve(300, Duration::from_millis(50)).await,
            Err(ReserveError::Exhausted)
        );
        assert_eq!(t0.elapsed(), Duration::from_millis(50));
        assert_eq!(m.available(), 200);
    }
}
