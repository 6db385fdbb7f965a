//! The topology DSL: sources over a share group, stateless operators,
//! sinks, and error policies — in the spirit of Kafka Streams' DSL.
//!
//! A [`StreamsBuilder`] makes typed [`KStream<K, V>`] handles: a source
//! deserializes the key and value of its topics' records with the serdes it
//! was given ([`serdes`]), operators transform the typed records, and sinks
//! serialize them again. The types make most serde mismatches compile
//! errors; [`StreamsBuilder::build`] refuses the rest of what cannot run
//! (no source, no sink, a branch or an operator whose records go nowhere,
//! a topic written and read with different formats, ...) with messages
//! that say what to fix ([`TopologyError`]).
//!
//! The built [`Topology`] does no I/O and knows nothing of Kafka clients.
//! The runtime [compiles](Topology::compile) it and, for every record that
//! the share consumer delivers, calls [`CompiledTopology::process`] with a
//! [`SourceRecord`]; it gets back the [`OutputRecord`]s to produce and the
//! [`Outcome`] (ACCEPT, REJECT, dead-letter, or stop) to stage in the same
//! transaction.
//!
//! | part | where |
//! |---|---|
//! | sources, build-time checks | [`builder`] |
//! | operators, split, merge, sinks | [`operators`] |
//! | serdes | [`serdes`] |
//! | records and headers | [`record`] |
//! | error policies, dead-letter headers, build errors | [`error`] |
//! | processing one source record; concurrency and ordering | [`processor`] |
//! | `describe()` | [`describe`] |
//!
//! # Operators
//!
//! `filter`, `filter_not`, `map`, `map_values`, `flat_map`,
//! `flat_map_values`, `select_key`, `peek`, `foreach`, `split` (named
//! branches, optional default branch), `merge`, `map_async` (bounded
//! concurrency), plus the record-level `filter_record`, `map_record`,
//! `process`, `map_record_async` (they see headers, timestamp and the
//! source coordinates) and the fallible `try_filter`, `try_map`,
//! `try_map_values`. Sinks: `to(topic, ...)` and `to_dynamic(...)`, whose
//! [`SinkRecord`] chooses topic, partition, timestamp, headers and a null
//! key per record.
//!
//! # Example
//!
//! ```
//! use bytes::Bytes;
//! use serde::{Deserialize, Serialize};
//! use sharestream::topology::*;
//!
//! #[derive(Debug, Clone, Serialize, Deserialize)]
//! struct Order { id: u64, amount: u64 }
//!
//! let mut builder = StreamsBuilder::new("orders-app");
//! builder.error_policy(ErrorPolicy::dead_letter("orders-dlq"));
//!
//! let orders = builder.stream::<String, Order>("orders", Serdes::string(), Serdes::json());
//! let mut branches = orders
//!     .filter(|_customer, order| order.amount > 0)
//!     .split()
//!     .branch("big", |_, order| order.amount >= 1000)
//!     .default_branch("small");
//! branches.take("big").unwrap()
//!     .map_values(|order| order.amount)
//!     .to("big-orders", Serdes::string(), Serdes::json::<u64>());
//! branches.take("small").unwrap()
//!     .to("small-orders", Serdes::string(), Serdes::msgpack());
//!
//! let topology = builder.build().expect("a valid topology");
//! println!("{}", topology.describe());
//!
//! let processor = topology.compile();
//! let record = SourceRecord {
//!     topic: "orders".into(),
//!     partition: 0,
//!     offset: 42,
//!     delivery_count: 1,
//!     key: Some(Bytes::from_static(b"alice")),
//!     value: Some(Bytes::from_static(br#"{"id":7,"amount":1500}"#)),
//!     headers: vec![],
//!     timestamp: 1_700_000_000_000,
//! };
//! let result = futures::executor::block_on(processor.process(record));
//! assert_eq!(result.outcome, Outcome::Accept);
//! assert_eq!(result.records.len(), 1);
//! assert_eq!(result.records[0].topic, "big-orders");
//! assert_eq!(result.records[0].value.as_deref(), Some(&b"1500"[..]));
//!
//! // A value that is not JSON goes to the dead-letter topic, and the
//! // source record is rejected.
//! let bad = SourceRecord {
//!     value: Some(Bytes::from_static(b"not json")),
//!     offset: 43,
//!     ..result_source()
//! };
//! # fn result_source() -> SourceRecord { SourceRecord { topic: "orders".into(),
//! #   partition: 0, offset: 0, delivery_count: 1, key: None, value: None,
//! #   headers: vec![], timestamp: 0 } }
//! let result = futures::executor::block_on(processor.process(bad));
//! assert!(matches!(result.outcome, Outcome::DeadLetter { .. }));
//! assert_eq!(result.records[0].topic, "orders-dlq");
//! ```
//!
//! # Not done yet
//!
//! Stateful operators (aggregations, joins, windows, state stores), and
//! repartitioning: a topology is stateless, each source record is
//! processed on its own.

pub mod builder;
pub mod describe;
pub mod error;
pub mod operators;
pub mod processor;
pub mod record;
pub mod serdes;

#[cfg(test)]
mod tests;

pub use builder::{StreamsBuilder, Topics};
pub use describe::{NodeDescription, TopologyDescription};
pub use error::{
    AttemptsExhausted, BoxError, BuildError, ErrorKind, ErrorPolicy, ProcessingError,
    TopologyError, dead_letter_record,
};
pub use operators::{Branches, KStream, SinkHandle, Split};
pub use processor::{CompiledTopology, Outcome, ProcessResult, Topology};
pub use record::{Headers, OutputRecord, Record, SinkRecord, SourceMeta, SourceRecord};
pub use serdes::{
    BytesSerde, Deserializer, JsonSerde, MsgPackSerde, OptionalSerde, Serde, SerdeError, Serdes,
    Serializer, StringSerde, UnitSerde,
};
