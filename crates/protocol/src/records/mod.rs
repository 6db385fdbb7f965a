//! Record batches, magic v2.
//!
//! - [`batch`] reads and patches the fixed batch header in place, so the
//!   broker can validate a batch and assign offsets without decoding records.
//! - [`record`]: [`Record`] and [`RecordHeader`] (an ordered list that keeps
//!   duplicate keys, KIP-82), and bounded decoding of a batch into records
//!   ([`RecordBatchView::records`], [`RecordBatchView::record_iter`]).
//! - [`builder`]: [`encode_batch`] from a [`BatchSpec`] and records, and the
//!   producer-side [`BatchBuilder`].
//! - [`control`]: COMMIT/ABORT marker batches ([`control_batch`]) and the
//!   cheap [`RecordBatchView::control_type`].
//! - [`compression`]: gzip, snappy (xerial framing), lz4 (Kafka's frame
//!   settings) and zstd, with a bound on decompressed size.
//!
//! ```
//! use bytes::Bytes;
//! use sharestream_protocol::records::{
//!     encode_batch, BatchSpec, Compression, Record, RecordBatchView,
//! };
//!
//! let spec = BatchSpec { compression: Compression::Lz4, ..BatchSpec::default() };
//! let records = vec![
//!     Record::new(0, 1_000, None, Some(Bytes::from_static(b"hello")))
//!         .with_header("trace", Some(Bytes::from_static(b"a")))
//!         .with_header("trace", Some(Bytes::from_static(b"b"))),
//! ];
//! let mut wire = encode_batch(&spec, &records).unwrap();
//! let batch = RecordBatchView::split_from(&mut wire).unwrap().unwrap();
//! batch.verify_crc().unwrap();
//! assert_eq!(batch.records(1 << 20).unwrap(), records);
//! ```

pub mod batch;
pub mod builder;
pub mod compression;
pub mod control;
pub mod record;

pub use batch::{Compression, RecordBatchView};
pub use builder::{
    BatchBuilder, BatchSpec, TimestampType, encode_batch, encode_batch_of,
    encode_batch_with_delete_horizon,
};
pub use control::{ControlType, EndTxnMarker, control_batch};
pub use record::{DEFAULT_MAX_DECOMPRESSED, Record, RecordHeader, RecordIter, RecordView};
