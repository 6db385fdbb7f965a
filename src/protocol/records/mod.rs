//! Record batches, magic v2.
//!
//! [`batch`] reads and patches the fixed batch header in place, so the
//! broker can validate a batch and assign offsets without decoding records.
//! Full record encoding and decoding (headers, control records, compression)
//! lives in the sibling modules.

pub mod batch;

pub use batch::{Compression, RecordBatchView};
