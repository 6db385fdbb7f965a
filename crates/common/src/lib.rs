//! What both sides of sharestream use beyond the wire protocol: the
//! embedded broker (`sharestream-broker`) and the framework (`sharestream`)
//! each serve `/metrics` and each carry failpoints for the fault-injection
//! tests. Neither may depend on the other, so these live here.
//!
//! - [`metrics_http`]: the small `GET /metrics` HTTP endpoint.
//! - [`failpoints`]: named fault-injection and pause points, compiled in only
//!   with the `failpoints` feature.
#![deny(missing_docs)]

pub mod failpoints;
pub mod metrics_http;
