#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod alloc;
pub mod broker;
pub mod client;
pub mod eos;
pub mod failpoints;
pub mod metrics_http;
pub mod protocol;
pub mod runtime;
pub mod topology;

// The unit tests decode hostile bytes too: guard them like the binary.
#[cfg(test)]
#[global_allocator]
static GLOBAL: alloc::GuardedAlloc = alloc::GuardedAlloc::new();
