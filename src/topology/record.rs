//! The records that cross the topology: what the runtime hands in
//! ([`SourceRecord`]), what operators see ([`Record`]), what a sink chooses
//! per record ([`SinkRecord`]) and what the runtime produces
//! ([`OutputRecord`]).

use std::sync::Arc;

use bytes::Bytes;

use crate::protocol::records::RecordHeader;

/// One record delivered by the share group, as the runtime passes it to
/// [`CompiledTopology::process`](super::CompiledTopology::process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRecord {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// How many times the record has been acquired, this time included.
    pub delivery_count: i16,
    /// Key bytes; `None` is a null key.
    pub key: Option<Bytes>,
    /// Value bytes; `None` is a null value (tombstone).
    pub value: Option<Bytes>,
    /// Headers in wire order, duplicate keys kept.
    pub headers: Vec<RecordHeader>,
    /// Timestamp in milliseconds.
    pub timestamp: i64,
}

/// Where a record came from: the source record's coordinates, visible to
/// operators through [`Record::source`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceMeta {
    /// Topic of the source record.
    pub topic: String,
    /// Partition of the source record.
    pub partition: i32,
    /// Offset of the source record.
    pub offset: i64,
    /// Delivery count of the source record.
    pub delivery_count: i16,
    /// Timestamp of the source record (a [`Record`]'s own timestamp may have
    /// been changed since).
    pub timestamp: i64,
}

/// Record headers, in order, duplicate keys kept (KIP-82).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<RecordHeader>);

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Appends a header.
    pub fn add(&mut self, key: impl Into<String>, value: Option<Bytes>) {
        self.0.push(RecordHeader {
            key: key.into(),
            value,
        });
    }

    /// The value of the last header with this key (as Kafka's `lastHeader`);
    /// `Some(None)` is a header with a null value.
    pub fn last(&self, key: &str) -> Option<Option<&Bytes>> {
        self.0
            .iter()
            .rev()
            .find(|h| h.key == key)
            .map(|h| h.value.as_ref())
    }

    /// The value of the last header with this key as UTF-8, if it has one.
    pub fn last_str(&self, key: &str) -> Option<&str> {
        self.last(key)
            .flatten()
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// All values of headers with this key, in order.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = Option<&'a Bytes>> + 'a {
        self.0
            .iter()
            .filter(move |h| h.key == key)
            .map(|h| h.value.as_ref())
    }

    /// Removes every header with this key; returns how many there were.
    pub fn remove(&mut self, key: &str) -> usize {
        let before = self.0.len();
        self.0.retain(|h| h.key != key);
        before - self.0.len()
    }

    /// All headers in order.
    pub fn iter(&self) -> impl Iterator<Item = &RecordHeader> {
        self.0.iter()
    }

    /// Number of headers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The headers as a vector.
    pub fn into_vec(self) -> Vec<RecordHeader> {
        self.0
    }
}

impl From<Vec<RecordHeader>> for Headers {
    fn from(v: Vec<RecordHeader>) -> Self {
        Self(v)
    }
}

/// A record inside the topology: typed key and value, the headers and
/// timestamp that will be written by a sink (initially those of the source
/// record), and the source record's coordinates.
#[derive(Debug, Clone)]
pub struct Record<K, V> {
    /// Key.
    pub key: K,
    /// Value.
    pub value: V,
    /// Headers; sinks write them (initially the source record's).
    pub headers: Headers,
    /// Timestamp in milliseconds; sinks write it unless told otherwise
    /// (initially the source record's, as Kafka Streams does).
    pub timestamp: i64,
    source: Arc<SourceMeta>,
}

impl<K, V> Record<K, V> {
    pub(crate) fn new(
        key: K,
        value: V,
        headers: Headers,
        timestamp: i64,
        source: Arc<SourceMeta>,
    ) -> Self {
        Self {
            key,
            value,
            headers,
            timestamp,
            source,
        }
    }

    /// Key, value, and the rest of the record (headers, timestamp, source)
    /// to rebuild an output with [`with_key_value`](Self::with_key_value).
    pub(crate) fn into_parts(self) -> (K, V, Record<(), ()>) {
        let shell = Record {
            key: (),
            value: (),
            headers: self.headers,
            timestamp: self.timestamp,
            source: self.source,
        };
        (self.key, self.value, shell)
    }

    /// Where the record came from.
    pub fn source(&self) -> &SourceMeta {
        &self.source
    }

    /// The same record with another key and value (headers, timestamp and
    /// source kept). This is how a [`process`](super::KStream::process)
    /// closure makes its outputs.
    pub fn with_key_value<K2, V2>(self, key: K2, value: V2) -> Record<K2, V2> {
        Record {
            key,
            value,
            headers: self.headers,
            timestamp: self.timestamp,
            source: self.source,
        }
    }

    /// The same record with another value.
    pub fn with_value<V2>(self, value: V2) -> Record<K, V2> {
        Record {
            key: self.key,
            value,
            headers: self.headers,
            timestamp: self.timestamp,
            source: self.source,
        }
    }

    /// The same record with another key.
    pub fn with_key<K2>(self, key: K2) -> Record<K2, V> {
        Record {
            key,
            value: self.value,
            headers: self.headers,
            timestamp: self.timestamp,
            source: self.source,
        }
    }

    /// A record with another key and value that shares this one's headers,
    /// timestamp and source (for fan-out).
    pub fn derive<K2, V2>(&self, key: K2, value: V2) -> Record<K2, V2> {
        Record {
            key,
            value,
            headers: self.headers.clone(),
            timestamp: self.timestamp,
            source: self.source.clone(),
        }
    }
}

/// A record for the runtime to produce, in the transaction that
/// acknowledges its source record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRecord {
    /// Topic.
    pub topic: String,
    /// Key bytes; `None` is a null key.
    pub key: Option<Bytes>,
    /// Value bytes; `None` is a null value.
    pub value: Option<Bytes>,
    /// Headers in order.
    pub headers: Vec<RecordHeader>,
    /// Partition; `None` lets the producer's partitioner choose (by key).
    pub partition: Option<i32>,
    /// Timestamp; `None` lets the producer use the current time.
    pub timestamp: Option<i64>,
}

/// What [`KStream::to_dynamic`](super::KStream::to_dynamic) decides for one
/// record: the topic, and optionally the partition, the timestamp, the
/// headers and a null key.
///
/// ```
/// use sharestream::topology::SinkRecord;
/// let choice = SinkRecord::topic("audit")
///     .partition(0)
///     .timestamp(1_700_000_000_000)
///     .header("origin", "eu-west");
/// assert_eq!(choice.topic_name(), "audit");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkRecord {
    pub(crate) topic: String,
    pub(crate) partition: Option<i32>,
    pub(crate) timestamp: SinkTimestamp,
    pub(crate) replace_headers: Option<Headers>,
    pub(crate) add_headers: Vec<RecordHeader>,
    pub(crate) null_key: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SinkTimestamp {
    Record,
    Producer,
    Set(i64),
}

impl SinkRecord {
    /// Write to `topic`, with the record's key, headers and timestamp and the
    /// producer's choice of partition.
    pub fn topic(topic: impl Into<String>) -> Self {
        Self {
            topic: topic.into(),
            partition: None,
            timestamp: SinkTimestamp::Record,
            replace_headers: None,
            add_headers: Vec::new(),
            null_key: false,
        }
    }

    /// The chosen topic.
    pub fn topic_name(&self) -> &str {
        &self.topic
    }

    /// Write to this partition.
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Write this timestamp instead of the record's.
    pub fn timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = SinkTimestamp::Set(timestamp);
        self
    }

    /// Leave the timestamp to the producer (the time of the send).
    pub fn producer_timestamp(mut self) -> Self {
        self.timestamp = SinkTimestamp::Producer;
        self
    }

    /// Write these headers instead of the record's (headers added with
    /// [`header`](Self::header) still follow).
    pub fn headers(mut self, headers: Headers) -> Self {
        self.replace_headers = Some(headers);
        self
    }

    /// Append a header.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        self.add_headers.push(RecordHeader {
            key: key.into(),
            value: Some(value.into()),
        });
        self
    }

    /// Write a null key whatever the record's key is.
    pub fn null_key(mut self) -> Self {
        self.null_key = true;
        self
    }
}
