//! The durable share state, written off the request path with group commit.
//!
//! The share-state log (`share-state/share.log`, a [`StateLog`]) holds
//! MessagePack records, each either the share group coordinator's snapshot,
//! one share partition's snapshot, or a share partition's deletion; the
//! last record of a key wins at replay.
//!
//! `Journal` owns the log on a dedicated thread (`share-state`). Callers
//! hand it encoded records *under the service's lock*, so the order of the
//! log is the order of the state changes, and get back a sequence number.
//! The thread takes everything queued at once, writes it with one write and
//! one fsync, and then publishes the highest sequence number it made
//! durable. Concurrent requests thus share a flush: while one fsync runs,
//! the next batch gathers (group commit).
//!
//! A request is answered only once its records are durable ([`Durable`]):
//! the durability of an answer is the same as when every request flushed
//! the log itself, only the flushes are shared. If writing a batch fails,
//! every request with a record in it learns so (KAFKA_STORAGE_ERROR, as
//! before); the in-memory state stays ahead of the log, and the next
//! snapshot of the same share partition (each is the whole state) repairs
//! it.
//!
//! Compaction is a queued operation too: the service builds the live
//! records under its lock when the log has grown past its threshold, and
//! the thread rewrites the log in its place in the queue, so appends queued
//! before it are subsumed and appends queued after it follow it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use uuid::Uuid;

use crate::group::CoordinatorSnapshot;
use crate::log::StateLog;
use crate::share::SharePartitionState;
use sharestream_protocol::ErrorCode;

/// One record of the share-state log.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum StoredRecord {
    Coordinator(CoordinatorSnapshot),
    Partition {
        group_id: String,
        topic_id: Uuid,
        partition: i32,
        state: SharePartitionState,
    },
    /// The share partition's state was deleted (DeleteShareGroupOffsets,
    /// DeleteGroups, or an AlterShareGroupOffsets to -1): at replay it
    /// removes what earlier records of the key restored.
    PartitionDeleted {
        group_id: String,
        topic_id: Uuid,
        partition: i32,
    },
}

impl StoredRecord {
    pub(super) fn encode(&self) -> Option<Vec<u8>> {
        match rmp_serde::to_vec_named(self) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::error!(error = %e, "share state: cannot encode a record");
                None
            }
        }
    }
}

enum Op {
    Append(Vec<u8>),
    Rewrite(Vec<Vec<u8>>),
}

#[derive(Default)]
struct Queue {
    ops: Vec<(u64, Op)>,
    /// Sequence number of the last queued operation.
    enqueued: u64,
    closed: bool,
}

#[derive(Default)]
struct Done {
    /// Every operation up to this sequence number was carried out.
    completed: u64,
    /// Sequence ranges (inclusive) whose batch failed to be written; the
    /// most recent ones only.
    failed: Vec<(u64, u64)>,
}

/// How many failed ranges are remembered (a waiter far behind them is
/// answered with an error anyway: it waited through many failures).
const FAILED_RANGES_KEPT: usize = 64;

struct Shared {
    queue: Mutex<Queue>,
    work: Condvar,
    done: Mutex<Done>,
    done_cv: Condvar,
    /// The `completed` value of `done`, for async waiters.
    durable: watch::Sender<u64>,
    /// Size of the log file after the last batch (decides compaction).
    size_bytes: AtomicU64,
    /// A rewrite is queued and not carried out yet.
    rewrite_queued: AtomicBool,
    /// Batches written and fsyncs made (for metrics and tests).
    batches: AtomicU64,
}

/// The share-state log behind its writer thread. See the module docs.
pub(super) struct Journal {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field(
                "size_bytes",
                &self.shared.size_bytes.load(Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Starts the writer thread on `log`.
    pub(super) fn start(log: StateLog) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            done: Mutex::new(Done::default()),
            done_cv: Condvar::new(),
            durable: watch::channel(0).0,
            size_bytes: AtomicU64::new(log.size_bytes()),
            rewrite_queued: AtomicBool::new(false),
            batches: AtomicU64::new(0),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("share-state".into())
            .spawn(move || writer(&s, log))?;
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues a record; returns its sequence number.
    pub(super) fn append(&self, bytes: Vec<u8>) -> u64 {
        self.push(Op::Append(bytes))
    }

    /// Queues a rewrite of the whole log to `live`.
    pub(super) fn rewrite(&self, live: Vec<Vec<u8>>) -> u64 {
        self.shared.rewrite_queued.store(true, Ordering::SeqCst);
        self.push(Op::Rewrite(live))
    }

    fn push(&self, op: Op) -> u64 {
        let mut q = self.shared.queue.lock();
        q.enqueued += 1;
        let seq = q.enqueued;
        q.ops.push((seq, op));
        self.shared.work.notify_one();
        seq
    }

    /// Sequence number of the last queued operation.
    pub(super) fn enqueued(&self) -> u64 {
        self.shared.queue.lock().enqueued
    }

    /// Size of the log after the last written batch.
    pub(super) fn size_bytes(&self) -> u64 {
        self.shared.size_bytes.load(Ordering::SeqCst)
    }

    /// Whether a rewrite is queued.
    pub(super) fn rewrite_queued(&self) -> bool {
        self.shared.rewrite_queued.load(Ordering::SeqCst)
    }

    /// Batches written so far (each with one fsync).
    pub(super) fn batches(&self) -> u64 {
        self.shared.batches.load(Ordering::Relaxed)
    }

    /// A handle that waits for operations `after+1 ..= upto`.
    pub(super) fn durable(&self, after: u64, upto: u64) -> Durable {
        Durable {
            wait: Some((self.shared.clone(), after, upto)),
        }
    }
}

impl Drop for Journal {
    /// Writes what is queued, then stops the thread.
    fn drop(&mut self) {
        self.shared.queue.lock().closed = true;
        self.shared.work.notify_one();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

fn writer(shared: &Shared, mut log: StateLog) {
    loop {
        let ops = {
            let mut q = shared.queue.lock();
            while q.ops.is_empty() && !q.closed {
                shared.work.wait(&mut q);
            }
            if q.ops.is_empty() {
                return;
            }
            std::mem::take(&mut q.ops)
        };
        let (first, last) = (ops[0].0, ops[ops.len() - 1].0);
        let had_rewrite = ops.iter().any(|(_, op)| matches!(op, Op::Rewrite(_)));
        sharestream_common::failpoints::pause_blocking("share.journal.before_write");
        let ok = write_batch(&mut log, ops);
        if had_rewrite {
            shared.rewrite_queued.store(false, Ordering::SeqCst);
        }
        shared.batches.fetch_add(1, Ordering::Relaxed);
        shared.size_bytes.store(log.size_bytes(), Ordering::SeqCst);
        {
            let mut d = shared.done.lock();
            d.completed = last;
            if !ok {
                d.failed.push((first, last));
                if d.failed.len() > FAILED_RANGES_KEPT {
                    d.failed.remove(0);
                }
            }
            shared.done_cv.notify_all();
        }
        shared.durable.send_replace(last);
    }
}

/// Writes a batch: the appends between rewrites with one write each, one
/// fsync at the end. Returns false if anything failed.
fn write_batch(log: &mut StateLog, ops: Vec<(u64, Op)>) -> bool {
    let mut ok = true;
    let mut pending: Vec<Vec<u8>> = Vec::new();
    let flush = |log: &mut StateLog, pending: &mut Vec<Vec<u8>>| -> bool {
        if pending.is_empty() {
            return true;
        }
        let res = if sharestream_common::failpoints::hit("share.persist") {
            Err(std::io::Error::other("failpoint share.persist"))
        } else {
            log.append_all(pending.iter().map(Vec::as_slice))
        };
        pending.clear();
        match res {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(error = %e, "share state: append failed");
                false
            }
        }
    };
    for (_, op) in ops {
        match op {
            Op::Append(b) => pending.push(b),
            Op::Rewrite(live) => {
                ok &= flush(log, &mut pending);
                let live_bytes: u64 = live
                    .iter()
                    .map(|b| (b.len() + crate::log::state_log::STATE_RECORD_OVERHEAD) as u64)
                    .sum();
                if log.size_bytes() > live_bytes.saturating_mul(4)
                    && let Err(e) = log.rewrite(&live)
                {
                    tracing::error!(error = %e, "share state: rewrite failed");
                }
            }
        }
    }
    ok &= flush(log, &mut pending);
    ok
}

/// Waits until a call's share-state records are durable. Empty (ready at
/// once) for an in-memory broker.
#[derive(Default)]
#[must_use = "an answer may go out only once its state is durable"]
pub struct Durable {
    wait: Option<(Arc<Shared>, u64, u64)>,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.wait {
            None => f.write_str("Durable(ready)"),
            Some((_, after, upto)) => write!(f, "Durable({after}..={upto})"),
        }
    }
}

impl Durable {
    /// Whether there is nothing to wait for (nothing was queued, or the
    /// broker keeps its state in memory).
    pub fn is_ready(&self) -> bool {
        self.wait.is_none()
    }

    /// The later of two waits (the union of their records).
    pub fn and(self, other: Durable) -> Durable {
        match (self.wait, other.wait) {
            (None, w) | (w, None) => Durable { wait: w },
            (Some((s, a1, u1)), Some((_, a2, u2))) => Durable {
                wait: Some((s, a1.min(a2), u1.max(u2))),
            },
        }
    }

    fn outcome(done: &Done, after: u64, upto: u64) -> Result<(), ErrorCode> {
        // The call's records are `after + 1 ..= upto` (none when equal).
        let lost = after < upto && done.failed.iter().any(|&(lo, hi)| lo <= upto && hi > after);
        if lost {
            Err(ErrorCode::KAFKA_STORAGE_ERROR)
        } else {
            Ok(())
        }
    }

    /// Waits on the async side (the request's task yields; no thread is
    /// blocked). KAFKA_STORAGE_ERROR if a record of this call was not
    /// written.
    pub async fn wait(self) -> Result<(), ErrorCode> {
        let Some((shared, after, upto)) = self.wait else {
            return Ok(());
        };
        let mut rx = shared.durable.subscribe();
        if rx.wait_for(|c| *c >= upto).await.is_err() {
            return Err(ErrorCode::KAFKA_STORAGE_ERROR);
        }
        let done = shared.done.lock();
        Self::outcome(&done, after, upto)
    }

    /// Waits blocking the thread: for callers already off the async
    /// threads (transaction markers, staging, start-up, tests).
    pub fn wait_blocking(self) -> Result<(), ErrorCode> {
        let Some((shared, after, upto)) = self.wait else {
            return Ok(());
        };
        let mut done = shared.done.lock();
        while done.completed < upto {
            shared.done_cv.wait(&mut done);
        }
        Self::outcome(&done, after, upto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(dir: &std::path::Path) -> Journal {
        let (log, records, _) = StateLog::open(dir.join("share.log")).unwrap();
        assert!(records.is_empty());
        Journal::start(log).unwrap()
    }

    #[test]
    fn records_queued_while_a_batch_is_written_share_the_next_flush() {
        let dir = tempfile::tempdir().unwrap();
        let j = journal(dir.path());
        let n = 50u64;
        let durable = {
            // Holding the completion lock stops the writer after its first
            // batch, before it can publish it: every later record queues.
            let _hold = j.shared.done.lock();
            let first = j.append(b"r0".to_vec());
            for i in 1..n {
                j.append(format!("r{i}").into_bytes());
            }
            j.durable(first - 1, j.enqueued())
        };
        assert_eq!(durable.wait_blocking(), Ok(()));
        // The first record alone (or with all the others), then the rest
        // together: never one flush per record.
        assert!(j.batches() <= 2, "{} batches for {n} records", j.batches());
        drop(j);
        let (_, records, _) = StateLog::open(dir.path().join("share.log")).unwrap();
        let expected: Vec<Vec<u8>> = (0..n).map(|i| format!("r{i}").into_bytes()).collect();
        let got: Vec<Vec<u8>> = records.iter().map(|r| r.to_vec()).collect();
        assert_eq!(got, expected, "in queue order");
    }

    #[tokio::test]
    // The completion lock is held across the await on purpose: it stalls
    // the writer before it can publish the record.
    #[allow(clippy::await_holding_lock)]
    async fn a_durable_wait_ends_only_once_its_records_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let j = journal(dir.path());
        let hold = j.shared.done.lock();
        let before = j.enqueued();
        j.append(b"x".to_vec());
        let durable = j.durable(before, j.enqueued());
        let waiter = tokio::spawn(durable.wait());
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "answered before the record was durable"
        );
        drop(hold);
        assert_eq!(waiter.await.unwrap(), Ok(()));
        let (_, records, _) = StateLog::open(dir.path().join("share.log")).unwrap();
        assert_eq!(records.len(), 1);
    }

    #[test]
    fn a_failed_batch_fails_the_waits_with_records_in_it_only() {
        let done = Done {
            completed: 10,
            failed: vec![(4, 6)],
        };
        assert_eq!(Durable::outcome(&done, 0, 3), Ok(()), "before the batch");
        assert_eq!(
            Durable::outcome(&done, 3, 4),
            Err(ErrorCode::KAFKA_STORAGE_ERROR)
        );
        assert_eq!(
            Durable::outcome(&done, 5, 9),
            Err(ErrorCode::KAFKA_STORAGE_ERROR)
        );
        assert_eq!(Durable::outcome(&done, 6, 9), Ok(()), "after the batch");
        // A call that queued nothing has nothing to lose.
        assert_eq!(Durable::outcome(&done, 5, 5), Ok(()));
    }

    #[test]
    fn a_rewrite_in_the_queue_replaces_what_came_before_it_only() {
        let dir = tempfile::tempdir().unwrap();
        let j = journal(dir.path());
        let mark = j.enqueued();
        for i in 0..20 {
            j.append(format!("old{i}").into_bytes());
        }
        j.rewrite(vec![b"live".to_vec()]);
        j.append(b"after".to_vec());
        j.durable(mark, j.enqueued()).wait_blocking().unwrap();
        assert!(!j.rewrite_queued());
        drop(j);
        let (_, records, _) = StateLog::open(dir.path().join("share.log")).unwrap();
        let got: Vec<&[u8]> = records.iter().map(|r| r.as_ref()).collect();
        assert_eq!(got, vec![b"live".as_slice(), b"after".as_slice()]);
    }
}
