//! The exhaustive model checks of the exactly-once protocols (stateright),
//! as a test binary of their own: they are CPU-bound for seconds to tens of
//! seconds each, and beside the timing-sensitive integration tests of
//! `tests/suite` they would starve them.
//!
//! - `model_kip1289`: the KIP-1289 staging path of our broker (D16).
//! - `model_ledger`: exactly-once on stock Kafka through an intent ledger
//!   (D20, docs/EXACTLY-ONCE.md).
//! - `model_group_commit`: one ledger transaction shared by the members of
//!   a process (not built yet; the model comes first).

mod model_group_commit;
mod model_kip1289;
mod model_ledger;
