//! The integration tests, as one test binary: each module below was a test
//! binary of its own, and each relinked the whole library (32 links per
//! test run). Four stay apart:
//! - `tests/failpoints/`: the tests that arm failpoints, which are process-
//!   wide, serialized with one lock;
//! - `tests/models/`: the model checks, CPU-bound, which would starve the
//!   timing-sensitive tests here;
//! - `tests/hostile_frames.rs`: watches the process's peak RSS, so nothing
//!   else may run beside it;
//! - `tests/hostile_frames_unguarded.rs`: keeps the system allocator.
//!
//! Run one group with a filter: `cargo test --test suite broker_txn::`.

// Several modules decode hostile bytes: guard the process like the binaries.
#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

#[path = "../common/mod.rs"]
mod common;
#[path = "../runtime_common/mod.rs"]
mod rt;
#[path = "../support/mod.rs"]
mod support;

mod broker_admin;
mod broker_authz;
mod broker_bad_input;
mod broker_client_quotas;
mod broker_compaction;
mod broker_consumer_groups;
mod broker_consumer_protocol;
mod broker_dead_letters;
mod broker_features;
mod broker_fetch_sessions;
mod broker_list_offsets_versions;
mod broker_node_id;
mod broker_offsets_retention;
mod broker_records_admin;
mod broker_security;
mod broker_share_groups;
mod broker_share_offsets_admin;
mod broker_streams_compat;
mod broker_streams_protocol;
mod broker_txn;
mod client_kip1289;
mod client_producer;
mod client_security;
mod client_share_renew;
mod golden_frames;
mod interop_embedded;
mod jvm_bytes;
mod kip1289_corner_cases;
mod kip1289_interleavings;
mod protocol_roundtrip;
mod record_batches;
mod runtime_ledger;
mod runtime_topologies;
mod scale_out;
mod scenarios;
