//! Serdes: how keys and values become bytes and back.
//!
//! A source takes a [`Deserializer`] for its keys and one for its values; a
//! sink takes two [`Serializer`]s. A [`Serde`] is anything that is both; every
//! built-in serde is one, so the same value can be passed to a source and to a
//! sink. Built-ins ([`Serdes`]):
//!
//! | constructor | type | wire format |
//! |---|---|---|
//! | [`Serdes::bytes`] | [`Bytes`] | the bytes as they are |
//! | [`Serdes::string`] | [`String`] | UTF-8; invalid UTF-8 is an error |
//! | [`Serdes::json`] | any `Serialize + DeserializeOwned` | JSON (`serde_json`) |
//! | [`Serdes::msgpack`] | any `Serialize + DeserializeOwned` | MessagePack with field names (`rmp-serde`) |
//! | [`Serdes::unit`] | `()` | always null; ignores the data when reading |
//! | [`Serdes::optional`] | `Option<T>` | null is `None`, anything else goes to the inner serde |
//!
//! # Null keys and values (tombstones)
//!
//! Kafka keys and values may be null. The serdes above (except `unit` and
//! `optional`) refuse a null with a [`SerdeError`] that says to wrap them in
//! [`Serdes::optional`], so a topic with null keys or tombstones is read as
//! `Option<K>` / `Option<V>` and the types say that a value may be missing.
//! Writing `None` through `optional` produces a null (a tombstone for a
//! value).
//!
//! # User serdes
//!
//! Implement [`Serializer`] and/or [`Deserializer`] for your type. The
//! [`format`](Serializer::format) name is used by the build-time check that a
//! topic written and read by the same topology uses the same format on both
//! ends; the default is the Rust type name of the serde, so two different
//! custom serdes count as different formats.

use std::marker::PhantomData;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A key or value could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SerdeError {
    message: String,
}

impl SerdeError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    fn unexpected_null(format: &str) -> Self {
        Self::new(format!(
            "null data, but the {format} serde expects data: wrap it in Serdes::optional(...) \
             to read null keys or tombstones as None"
        ))
    }
}

/// Turns a `T` into the bytes of a record key or value (`None` = null).
pub trait Serializer<T>: Send + Sync + 'static {
    /// Serializes `data` for a record of `topic`.
    fn serialize(&self, topic: &str, data: &T) -> Result<Option<Bytes>, SerdeError>;

    /// The name of the wire format, compared by the build-time check of
    /// topics that the topology both writes and reads.
    fn format(&self) -> String {
        std::any::type_name::<Self>().to_string()
    }
}

/// Turns the bytes of a record key or value (`None` = null) into a `T`.
pub trait Deserializer<T>: Send + Sync + 'static {
    /// Deserializes the data of a record of `topic`.
    fn deserialize(&self, topic: &str, data: Option<&[u8]>) -> Result<T, SerdeError>;

    /// The name of the wire format (see [`Serializer::format`]).
    fn format(&self) -> String {
        std::any::type_name::<Self>().to_string()
    }
}

/// Both directions; implemented for everything that implements both traits.
pub trait Serde<T>: Serializer<T> + Deserializer<T> {}

impl<T, S: Serializer<T> + Deserializer<T>> Serde<T> for S {}

/// Constructors of the built-in serdes.
#[derive(Debug, Clone, Copy)]
pub struct Serdes;

impl Serdes {
    /// Raw bytes, unchanged.
    pub fn bytes() -> BytesSerde {
        BytesSerde
    }

    /// UTF-8 strings; invalid UTF-8 is a deserialization error.
    pub fn string() -> StringSerde {
        StringSerde
    }

    /// JSON through `serde_json`.
    pub fn json<T>() -> JsonSerde<T> {
        JsonSerde(PhantomData)
    }

    /// MessagePack through `rmp-serde` (structs as maps with field names).
    pub fn msgpack<T>() -> MsgPackSerde<T> {
        MsgPackSerde(PhantomData)
    }

    /// `()`: writes null, reads anything as `()`. For topics without keys.
    pub fn unit() -> UnitSerde {
        UnitSerde
    }

    /// `Option<T>`: null is `None`; anything else goes through `inner`.
    pub fn optional<S>(inner: S) -> OptionalSerde<S> {
        OptionalSerde(inner)
    }
}

/// See [`Serdes::bytes`].
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesSerde;

impl Serializer<Bytes> for BytesSerde {
    fn serialize(&self, _topic: &str, data: &Bytes) -> Result<Option<Bytes>, SerdeError> {
        Ok(Some(data.clone()))
    }
    fn format(&self) -> String {
        "bytes".into()
    }
}

impl Deserializer<Bytes> for BytesSerde {
    fn deserialize(&self, _topic: &str, data: Option<&[u8]>) -> Result<Bytes, SerdeError> {
        data.map(Bytes::copy_from_slice)
            .ok_or_else(|| SerdeError::unexpected_null("bytes"))
    }
    fn format(&self) -> String {
        "bytes".into()
    }
}

/// See [`Serdes::string`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StringSerde;

impl Serializer<String> for StringSerde {
    fn serialize(&self, _topic: &str, data: &String) -> Result<Option<Bytes>, SerdeError> {
        Ok(Some(Bytes::copy_from_slice(data.as_bytes())))
    }
    fn format(&self) -> String {
        "string".into()
    }
}

impl Deserializer<String> for StringSerde {
    fn deserialize(&self, _topic: &str, data: Option<&[u8]>) -> Result<String, SerdeError> {
        let data = data.ok_or_else(|| SerdeError::unexpected_null("string"))?;
        std::str::from_utf8(data)
            .map(str::to_owned)
            .map_err(|e| SerdeError::new(format!("invalid UTF-8: {e}")))
    }
    fn format(&self) -> String {
        "string".into()
    }
}

/// See [`Serdes::json`].
pub struct JsonSerde<T>(PhantomData<fn() -> T>);

impl<T> Clone for JsonSerde<T> {
    fn clone(&self) -> Self {
        Self(PhantomData)
    }
}

impl<T> std::fmt::Debug for JsonSerde<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonSerde")
    }
}

impl<T: Serialize + 'static> Serializer<T> for JsonSerde<T> {
    fn serialize(&self, _topic: &str, data: &T) -> Result<Option<Bytes>, SerdeError> {
        serde_json::to_vec(data)
            .map(|v| Some(Bytes::from(v)))
            .map_err(|e| SerdeError::new(format!("JSON: {e}")))
    }
    fn format(&self) -> String {
        "json".into()
    }
}

impl<T: DeserializeOwned + 'static> Deserializer<T> for JsonSerde<T> {
    fn deserialize(&self, _topic: &str, data: Option<&[u8]>) -> Result<T, SerdeError> {
        let data = data.ok_or_else(|| SerdeError::unexpected_null("json"))?;
        serde_json::from_slice(data).map_err(|e| SerdeError::new(format!("JSON: {e}")))
    }
    fn format(&self) -> String {
        "json".into()
    }
}

/// See [`Serdes::msgpack`].
pub struct MsgPackSerde<T>(PhantomData<fn() -> T>);

impl<T> Clone for MsgPackSerde<T> {
    fn clone(&self) -> Self {
        Self(PhantomData)
    }
}

impl<T> std::fmt::Debug for MsgPackSerde<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MsgPackSerde")
    }
}

impl<T: Serialize + 'static> Serializer<T> for MsgPackSerde<T> {
    fn serialize(&self, _topic: &str, data: &T) -> Result<Option<Bytes>, SerdeError> {
        rmp_serde::to_vec_named(data)
            .map(|v| Some(Bytes::from(v)))
            .map_err(|e| SerdeError::new(format!("MessagePack: {e}")))
    }
    fn format(&self) -> String {
        "msgpack".into()
    }
}

impl<T: DeserializeOwned + 'static> Deserializer<T> for MsgPackSerde<T> {
    fn deserialize(&self, _topic: &str, data: Option<&[u8]>) -> Result<T, SerdeError> {
        let data = data.ok_or_else(|| SerdeError::unexpected_null("msgpack"))?;
        rmp_serde::from_slice(data).map_err(|e| SerdeError::new(format!("MessagePack: {e}")))
    }
    fn format(&self) -> String {
        "msgpack".into()
    }
}

/// See [`Serdes::unit`].
#[derive(Debug, Clone, Copy, Default)]
pub struct UnitSerde;

impl Serializer<()> for UnitSerde {
    fn serialize(&self, _topic: &str, _data: &()) -> Result<Option<Bytes>, SerdeError> {
        Ok(None)
    }
    fn format(&self) -> String {
        "unit".into()
    }
}

impl Deserializer<()> for UnitSerde {
    fn deserialize(&self, _topic: &str, _data: Option<&[u8]>) -> Result<(), SerdeError> {
        Ok(())
    }
    fn format(&self) -> String {
        "unit".into()
    }
}

/// See [`Serdes::optional`]. Its format is the inner serde's: null and data
/// written by either can be read by the other.
#[derive(Debug, Clone, Copy, Default)]
pub struct OptionalSerde<S>(S);

impl<T, S: Serializer<T>> Serializer<Option<T>> for OptionalSerde<S> {
    fn serialize(&self, topic: &str, data: &Option<T>) -> Result<Option<Bytes>, SerdeError> {
        match data {
            None => Ok(None),
            Some(v) => self.0.serialize(topic, v),
        }
    }
    fn format(&self) -> String {
        Serializer::format(&self.0)
    }
}

impl<T, S: Deserializer<T>> Deserializer<Option<T>> for OptionalSerde<S> {
    fn deserialize(&self, topic: &str, data: Option<&[u8]>) -> Result<Option<T>, SerdeError> {
        match data {
            None => Ok(None),
            Some(d) => self.0.deserialize(topic, Some(d)).map(Some),
        }
    }
    fn format(&self) -> String {
        Deserializer::format(&self.0)
    }
}
