//! Share partitions (KIP-932) with KIP-1289's transactional acknowledgements.
//!
//! A [`SharePartition`] exists per (share group, topic-partition). It is a
//! plain state machine: no I/O, no clock; every method that depends on time
//! takes `now_ms`, and results say what the broker must do (wake long-polling
//! fetches, persist a [`SharePartitionState`], re-arm a timer).
//!
//! # The in-flight window
//!
//! Offsets below the share-partition start offset (SPSO) are all terminal and
//! forgotten. Offsets from the SPSO up to the end offset (SPEO, exclusive)
//! form the in-flight window; each has a [`RecordState`] and a delivery
//! count:
//!
//! ```text
//!               acquire (delivery count + 1)
//! AVAILABLE ----------------------------------> ACQUIRED (member, lock deadline)
//!   ^   ^                                         |  |  |
//!   |   |  RELEASE, lock expiry, member leaves    |  |  +-- ACCEPT -------> ACKNOWLEDGED
//!   |   +-----------------------------------------+  |  +-- GAP, REJECT --> ARCHIVED
//!   |      (ARCHIVED instead at the delivery         |  +-- RENEW: new deadline
//!   |       count limit)                             |
//!   |                   stage (ACCEPT/REJECT/GAP  |  in a transaction)
//!   |                                                v
//!   |  abort (see below)    TX_PENDING (producer id, epoch, type; lock suspended)
//!   +---------------------------  |   |
//!        (ARCHIVED at the limit)  |   +-- commit: ACCEPT -> ACKNOWLEDGED, REJECT/GAP -> ARCHIVED
//!                                 +------ abort under `acquired`, member alive:
//!                                         ACQUIRED, fresh lock, same delivery count
//! ```
//!
//! Which abort applies is the broker setting
//! `group.share.transaction.abort.record.state` (docs/DESIGN.md D25):
//! `available` (the default) makes every aborted record AVAILABLE, as do an
//! imposed abort (fence, timeout) and a member gone under `acquired`.
//!
//! The window is stored as runs ([`runs::RunMap`]): a `BTreeMap` from the
//! first offset of a run to its last offset and one value (state, delivery
//! count, lock holder and deadline, staging transaction). Every change splits
//! at most two runs and merges its neighbours again, so memory is
//! proportional to the number of distinct runs of state, never to the number
//! of records: 500 records acquired by one fetch are one run, and runs of
//! terminal records at the start are dropped as the SPSO moves.
//!
//! # Acquisition
//!
//! [`SharePartition::acquire`] takes the caller's [`LogView`]: the bound
//! (high watermark, or last stable offset for read_committed groups) and the
//! record batches actually read from [`SharePartition::next_fetch_offset`].
//! It never acquires beyond them. AVAILABLE records of the window come
//! first, then new records from the end offset while the window stays below
//! `max_in_flight_records`. [`AcquireMode::BatchOptimized`] stops at the end
//! of the batch in which `max_records` was reached (whole batches, as Kafka's
//! `batch_optimized`); [`AcquireMode::RecordLimit`] stops exactly.
//!
//! Gaps (read_committed): records of aborted transactions and control
//! records are never delivered as data. We decided to acquire their offsets
//! like any others (so the window stays contiguous, the cap and the delivery
//! count apply, and a consumer that never acknowledges them loses the lock as
//! usual) and to list them in [`Acquisition::gaps`]. The broker leaves those
//! batches out of the ShareFetch response; the consumer sees acquired offsets
//! without records and acknowledges them as GAP (ARCHIVED). Control batches
//! are gaps for read_uncommitted groups too; aborted data is delivered to
//! read_uncommitted groups. Offsets at or beyond the end offset that no
//! fetched batch holds (a hole the log skipped, e.g. after compaction)
//! become ARCHIVED with delivery count 0 when the end offset moves past them.
//!
//! # Acknowledgement
//!
//! [`SharePartition::acknowledge`] validates batches as Kafka does and
//! applies them all or not at all: GAP and REJECT archive, ACCEPT
//! acknowledges, RELEASE makes AVAILABLE keeping the delivery count
//! (ARCHIVED at the limit), RENEW extends the lock. Only the member holding
//! a record ACQUIRED may acknowledge it. The SPSO moves over terminal
//! records after every change.
//!
//! # Transactions (KIP-1289)
//!
//! [`SharePartition::stage`] makes ACQUIRED records of the member TX_PENDING
//! for (producer id, producer epoch) with the staged ACCEPT or REJECT. Their
//! lock is suspended: they are never redelivered while pending (D6), but a
//! lock that would have expired counts once in TxnPendingLockExpiredCount.
//! Non-transactional acknowledgements, releases, renewals and leaving members
//! cannot touch them (D8). [`SharePartition::apply_marker`] resolves them
//! (D4: a marker at epoch E resolves what the producer staged at E or E-1;
//! D10: duplicates are no-ops). TX_PENDING is persisted (D9) and, after a
//! [`SharePartition::restore`], resolved by
//! [`SharePartition::resolve_recovered`] from the transaction outcomes the
//! broker recovered. [`SharePartition::txn_pending_records`] lets the broker
//! refuse a downgrade below `share.version` 3 (D2).
//!
//! # Dead-letter queues (KIP-1191)
//!
//! With [`SharePartitionConfig::dead_letter_queue`] on, what a REJECT (or a
//! committed transactional REJECT) or the delivery count limit would make
//! ARCHIVED becomes ARCHIVING (state 3): never delivered again, not
//! terminal. [`SharePartition::take_dead_letters`] hands the new ARCHIVING
//! runs to the broker's writer, which calls
//! [`SharePartition::finish_dead_letters`] once their dead-letter records
//! are written (or given up); ARCHIVING is persisted and handed out again
//! after a restore (docs/DESIGN.md D24).
//!
//! # Retention
//!
//! [`SharePartition::advance_log_start`] archives AVAILABLE and ACQUIRED
//! records the log no longer holds; TX_PENDING ones wait for their
//! transaction, and an abort archives them.
//!
//! # Time
//!
//! Every operation first expires the locks due at its `now_ms`, so an
//! acknowledgement at or after a lock's deadline is refused even if no
//! [`SharePartition::tick`] ran in between. `tick` reports the next deadline.

pub mod partition;
pub mod runs;
pub mod state;
pub mod types;

pub use partition::{RecordInfo, SharePartition};
pub use state::{PersistedRecordState, PersistedRun, SharePartitionState};
pub use types::*;
