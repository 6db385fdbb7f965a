#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod broker;
pub mod client;
pub mod eos;
pub mod protocol;
pub mod runtime;
pub mod topology;
