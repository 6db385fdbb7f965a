//! Generators shared by the codec tests of `tests/suite` (`hostile.rs` is
//! included by path by the two hostile-frame binaries).

pub mod entropy;
pub mod gen_messages;
pub mod gen_streams;
