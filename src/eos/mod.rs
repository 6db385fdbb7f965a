//! Exactly-once plumbing: accumulation of share acknowledgements and their
//! staging in the producer's transaction (KIP-1289).
//!
//! Not built yet: reserved for the client-layer and runtime issues.
