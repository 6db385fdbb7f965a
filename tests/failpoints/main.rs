//! The tests that arm failpoints (compiled in with the `failpoints`
//! feature), as one test binary apart from `tests/suite`: a failpoint is
//! process-wide, so every test here holds [`SERIAL`] while it runs, and no
//! other test shares the process.

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

#[path = "../common/mod.rs"]
mod common;
#[path = "../runtime_common/mod.rs"]
mod rt;

/// Held by every test of this binary: armed failpoints must not reach
/// another test's broker or runtime.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

mod dead_letter_failpoints;
mod kip1289_failpoints;
mod log_cleaner;
mod runtime_eos;
mod write_atomic;
