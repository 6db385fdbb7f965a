//! The runtime that executes topologies: workers, batching, shutdown, metrics.
//!
//! Not built yet: reserved for the runtime issue.
