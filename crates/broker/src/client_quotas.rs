//! Client quotas (KIP-13, KIP-55, KIP-546, KIP-612): the quotas set with
//! AlterClientQuotas, how a request or a connection finds the one that
//! applies to it, and the rates measured against them.
//!
//! **What is enforced.** `producer_byte_rate` (the bytes of Produce
//! requests) and `consumer_byte_rate` (the bytes of Fetch and ShareFetch
//! responses), per user (the connection's principal) and client id, at
//! Kafka's precedence:
//!
//! 1. user and client id, 2. user and default client id, 3. user,
//! 4. default user and client id, 5. default user and default client id,
//! 6. default user, 7. client id, 8. default client id.
//!
//! The first entity (in that order) that sets the quota wins. The clients
//! sharing that entity share its rate: a quota set on a user binds all its
//! client ids together; a default binds each user (or client id) on its
//! own. `controller_mutation_rate` (KIP-599), found the same way, limits
//! the partitions created or deleted with a token bucket
//! ([`QuotaStore::mutate`]). And `connection_creation_rate` (KIP-612) per
//! IP address, set on the address or on the default IP entity: a
//! connection over it is held that long before it is served. Kafka's
//! remaining key, `request_percentage`, is refused with a message saying
//! so rather than stored and ignored.
//!
//! **How a rate is measured** ([`Rate`]): eleven windows of one second, the
//! rate being their sum over the time they span, and at least ten seconds
//! (so a burst is measured against ten seconds of quota). When a request
//! takes the rate above the quota, its answer carries the time the client
//! must wait for the rate to come back to the quota, `(rate - quota) /
//! quota * span`, uncapped as in Kafka (a burst far above the quota waits
//! as long as the quota needs to pay for it), and the connection reads no
//! further request for that long (KIP-219: the broker answers first, then
//! mutes the channel). A Fetch or ShareFetch asks for at most ten seconds
//! of its quota ([`QuotaStore::window_bytes`]), as in Kafka, so that one
//! answer is not bound to be throttled.
//!
//! **One difference from Kafka.** A throttled Fetch or ShareFetch is
//! answered with its records; Kafka answers an empty one and forgets the
//! bytes. A ShareFetch's records are acquired before the answer is built,
//! and dropping them would leave them locked until their acquisition lock
//! expires and count a delivery that never happened; a Fetch keeps the same
//! rule for simplicity. The average rate is held either way, as the mute
//! pays for the bytes sent.
//!
//! **Storage.** The quotas live in memory and, with a data directory, in
//! `client-quotas.json`, written (atomically) before an alteration is
//! answered. Nothing here does I/O but that file, and time is an input.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use sharestream_protocol::ErrorCode;

/// The file of the quotas, in the data directory.
pub const QUOTAS_FILE: &str = "client-quotas.json";

/// The entity types.
pub const USER: &str = "user";
/// The client-id entity type.
pub const CLIENT_ID: &str = "client-id";
/// The IP entity type.
pub const IP: &str = "ip";

/// The quota on the bytes of Produce requests, per second.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// The quota on the bytes of Fetch responses, per second.
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// The quota on new connections per second from one IP address.
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";
/// The quota on partitions created or deleted per second (KIP-599).
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
/// Kafka's quota key this broker knows but does not enforce.
const NOT_ENFORCED: [&str; 1] = ["request_percentage"];

/// The windows of a [`Rate`].
pub const SAMPLES: usize = 11;
/// The length of one window, in milliseconds.
pub const WINDOW_MS: i64 = 1_000;
/// The time all windows span: a window older than that measures nothing.
pub const SPAN_MS: i64 = SAMPLES as i64 * WINDOW_MS;
/// The longest throttle: what the answers' `throttle_time_ms` can carry.
pub const MAX_THROTTLE_MS: i64 = i32::MAX as i64;

/// A quota entity: entity type → name, `None` being the type's default
/// entity (`<default>` in kafka-configs.sh).
pub type Entity = BTreeMap<String, Option<String>>;

/// A refusal: the code and the message.
pub type Refusal = (ErrorCode, String);

/// One entry of an AlterClientQuotas request: the entity and its
/// operations (a key with a value sets it, without one removes it).
#[derive(Debug, Clone, PartialEq)]
pub struct Alteration {
    /// The entity as the request lists it (type, name), in order.
    pub entity: Vec<(String, Option<String>)>,
    /// (key, value or removal).
    pub ops: Vec<(String, Option<f64>)>,
}

/// One component of a DescribeClientQuotas filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// This name of the type.
    Exact(String),
    /// The type's default entity.
    Default,
    /// Any entity that has the type.
    Any,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct QuotaFile {
    entries: Vec<StoredEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredEntry {
    entity: Entity,
    quotas: BTreeMap<String, f64>,
}

/// The quotas set on the broker, with the rates measured against them.
#[derive(Debug)]
pub struct QuotaStore {
    quotas: RwLock<BTreeMap<Entity, BTreeMap<String, f64>>>,
    /// Whether any byte-rate quota is set: when none is, requests skip
    /// the accounting.
    any: AtomicBool,
    rates: Mutex<RateTable>,
    path: Option<PathBuf>,
}

impl QuotaStore {
    /// The quotas stored in `path` (if any, and if it exists).
    pub fn open(path: Option<PathBuf>) -> std::io::Result<Self> {
        let mut quotas = BTreeMap::new();
        if let Some(p) = path.as_ref().filter(|p| p.exists()) {
            let file: QuotaFile = serde_json::from_slice(&std::fs::read(p)?).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", p.display()),
                )
            })?;
            for e in file.entries {
                if !e.quotas.is_empty() {
                    quotas.insert(e.entity, e.quotas);
                }
            }
        }
        let any = !quotas.is_empty();
        Ok(Self {
            quotas: RwLock::new(quotas),
            any: AtomicBool::new(any),
            rates: Mutex::new(RateTable::default()),
            path,
        })
    }

    /// Whether any quota is set (when none is, requests skip the
    /// accounting).
    pub fn any_set(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// AlterClientQuotas: one result per entry, in order. The accepted
    /// entries are applied together (and stored) unless `validate_only`;
    /// a refused entry changes nothing.
    pub fn alter(&self, entries: &[Alteration], validate_only: bool) -> Vec<Result<(), Refusal>> {
        let mut current = self.quotas.write();
        let mut next = current.clone();
        let mut seen: Vec<Entity> = Vec::new();
        let mut results = Vec::with_capacity(entries.len());
        for a in entries {
            let r = check_entity(&a.entity).and_then(|entity| {
                if seen.contains(&entity) {
                    return Err(invalid(format!(
                        "Ignoring duplicate entity {}",
                        describe_entity(&entity)
                    )));
                }
                seen.push(entity.clone());
                let changed = check_ops(&entity, &a.ops)?;
                let quotas = next.entry(entity.clone()).or_default();
                for (k, v) in changed {
                    match v {
                        Some(v) => quotas.insert(k, v),
                        None => quotas.remove(&k),
                    };
                }
                if quotas.is_empty() {
                    next.remove(&entity);
                }
                Ok(())
            });
            results.push(r);
        }
        if validate_only || next == *current {
            return results;
        }
        if let Err(e) = self.persist(&next) {
            tracing::error!(error = %e, "could not store the client quotas; the change is refused");
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err((
                    ErrorCode::UNKNOWN_SERVER_ERROR,
                    format!("The quotas could not be stored: {e}"),
                ));
            }
            return results;
        }
        tracing::info!(entities = next.len(), "client quotas altered");
        self.any.store(!next.is_empty(), Ordering::Release);
        *current = next;
        results
    }

    fn persist(&self, quotas: &BTreeMap<Entity, BTreeMap<String, f64>>) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = QuotaFile {
            entries: quotas
                .iter()
                .map(|(entity, quotas)| StoredEntry {
                    entity: entity.clone(),
                    quotas: quotas.clone(),
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        crate::log::write_atomic(path, &bytes)
    }

    /// DescribeClientQuotas: the entities matching every component (and,
    /// when `strict`, having no other type), with their quotas.
    pub fn describe(
        &self,
        filter: &[(String, Match)],
        strict: bool,
    ) -> Vec<(Entity, BTreeMap<String, f64>)> {
        self.quotas
            .read()
            .iter()
            .filter(|(entity, _)| {
                let matches = filter.iter().all(|(t, m)| match (entity.get(t), m) {
                    (None, _) => false,
                    (Some(_), Match::Any) => true,
                    (Some(None), Match::Default) => true,
                    (Some(Some(n)), Match::Exact(want)) => n == want,
                    _ => false,
                });
                matches && (!strict || entity.len() == filter.len())
            })
            .map(|(e, q)| (e.clone(), q.clone()))
            .collect()
    }

    /// The quota `key` that applies to `user` with `client_id`, with the
    /// entity it binds the client to (its rate's key), or `None`.
    pub fn resolve(&self, key: &str, user: &str, client_id: &str) -> Option<(f64, RateKey)> {
        let quotas = self.quotas.read();
        let u = || Some(user.to_string());
        let c = || Some(client_id.to_string());
        // (user component, client-id component): Some(None) is the
        // default entity, None the type absent.
        type Component = Option<Option<String>>;
        let levels: [(Component, Component); 8] = [
            (Some(u()), Some(c())),
            (Some(u()), Some(None)),
            (Some(u()), None),
            (Some(None), Some(c())),
            (Some(None), Some(None)),
            (Some(None), None),
            (None, Some(c())),
            (None, Some(None)),
        ];
        for (uc, cc) in levels {
            let mut entity = Entity::new();
            if let Some(n) = &uc {
                entity.insert(USER.into(), n.clone());
            }
            if let Some(n) = &cc {
                entity.insert(CLIENT_ID.into(), n.clone());
            }
            if let Some(v) = quotas.get(&entity).and_then(|q| q.get(key)) {
                // The clients bound together: those with the same values
                // of the types the entity names (a default entity binds
                // each value on its own).
                let rate_key = RateKey {
                    key: key.to_string(),
                    user: uc.map(|_| user.to_string()),
                    client_id: cc.map(|_| client_id.to_string()),
                    ip: None,
                };
                return Some((*v, rate_key));
            }
        }
        None
    }

    /// The most bytes one answer for `key` should carry for `user` with
    /// `client_id`: ten seconds of its quota (more would be throttled
    /// whatever came before), `None` without a quota.
    pub fn window_bytes(&self, key: &str, user: &str, client_id: &str) -> Option<u64> {
        if !self.any_set() {
            return None;
        }
        let (quota, _) = self.resolve(key, user, client_id)?;
        Some((quota * ((SAMPLES as i64 - 1) * WINDOW_MS) as f64 / 1000.0) as u64)
    }

    /// The `connection_creation_rate` of connections from `ip`: set on
    /// that address, else on the default IP entity (each address then has
    /// its own rate).
    pub fn resolve_ip(&self, ip: &str) -> Option<(f64, RateKey)> {
        let quotas = self.quotas.read();
        for name in [Some(ip.to_string()), None] {
            let entity = Entity::from([(IP.to_string(), name)]);
            if let Some(v) = quotas
                .get(&entity)
                .and_then(|q| q.get(CONNECTION_CREATION_RATE))
            {
                return Some((
                    *v,
                    RateKey {
                        key: CONNECTION_CREATION_RATE.into(),
                        user: None,
                        client_id: None,
                        ip: Some(ip.to_string()),
                    },
                ));
            }
        }
        None
    }

    /// Records a new connection from `ip` at `now_ms`: how long to hold
    /// it before serving it, 0 when under its quota or without one.
    pub fn record_connection(&self, ip: std::net::IpAddr, now_ms: i64) -> i64 {
        if !self.any_set() {
            return 0;
        }
        let Some((quota, rate_key)) = self.resolve_ip(&ip.to_string()) else {
            return 0;
        };
        self.record_rate(rate_key, quota, 1.0, now_ms)
    }

    fn record_rate(&self, rate_key: RateKey, quota: f64, value: f64, now_ms: i64) -> i64 {
        let mut rates = self.rates.lock();
        let throttle = {
            let rate = rates.rates.entry(rate_key).or_default();
            rate.record(value, now_ms);
            rate.throttle_ms(quota, now_ms)
        };
        rates.maybe_purge(now_ms);
        throttle
    }

    /// Partition mutations (KIP-599): `permits` partitions created or
    /// deleted by `user` with `client_id` at `now_ms`, against its
    /// `controller_mutation_rate`, a token bucket of eleven seconds of the
    /// quota refilled at the quota. `strict` (CreateTopics v6+,
    /// DeleteTopics v5+, CreatePartitions v3+, whose answers have a
    /// THROTTLING_QUOTA_EXCEEDED) refuses the mutation when the bucket is
    /// already below zero, with the time it needs to come back to zero; a
    /// mutation is admitted while the bucket is not below zero, even one
    /// that takes it there. Not strict (older versions), every mutation is
    /// admitted and taken.
    pub fn mutate(
        &self,
        user: &str,
        client_id: &str,
        permits: f64,
        strict: bool,
        now_ms: i64,
    ) -> Result<(), i64> {
        if !self.any_set() {
            return Ok(());
        }
        let Some((quota, key)) = self.resolve(CONTROLLER_MUTATION_RATE, user, client_id) else {
            return Ok(());
        };
        let mut rates = self.rates.lock();
        let bucket = rates.buckets.entry(key).or_default();
        bucket.refill(quota, now_ms);
        let outcome = if strict && bucket.tokens < 0.0 {
            Err(bucket.throttle_ms(quota))
        } else {
            bucket.tokens -= permits;
            Ok(())
        };
        rates.maybe_purge(now_ms);
        outcome
    }

    /// How long `user` with `client_id` must wait for its mutation bucket
    /// to come back to zero: the throttle time of a CreateTopics,
    /// DeleteTopics or CreatePartitions answer (0 when not below zero).
    pub fn mutation_throttle_ms(&self, user: &str, client_id: &str, now_ms: i64) -> i64 {
        if !self.any_set() {
            return 0;
        }
        let Some((quota, key)) = self.resolve(CONTROLLER_MUTATION_RATE, user, client_id) else {
            return 0;
        };
        let mut rates = self.rates.lock();
        match rates.buckets.get_mut(&key) {
            Some(b) => {
                b.refill(quota, now_ms);
                b.throttle_ms(quota)
            }
            None => 0,
        }
    }

    /// Records `bytes` of `key` (a byte-rate quota) for `user` with
    /// `client_id` at `now_ms`; the time the client must be throttled, 0
    /// when under its quota or when no quota applies.
    pub fn record(&self, key: &str, user: &str, client_id: &str, bytes: u64, now_ms: i64) -> i64 {
        if !self.any.load(Ordering::Acquire) {
            return 0;
        }
        let Some((quota, rate_key)) = self.resolve(key, user, client_id) else {
            return 0;
        };
        self.record_rate(rate_key, quota, bytes as f64, now_ms)
    }
}

/// Whose rate: the quota key and the values of the types of the entity
/// that set it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RateKey {
    key: String,
    user: Option<String>,
    client_id: Option<String>,
    ip: Option<String>,
}

#[derive(Debug, Default)]
struct RateTable {
    rates: HashMap<RateKey, Rate>,
    buckets: HashMap<RateKey, TokenBucket>,
    records: u64,
}

impl RateTable {
    /// Every 4096 records, drops the rates whose windows all ended (they
    /// measure nothing any more).
    fn maybe_purge(&mut self, now_ms: i64) {
        self.records += 1;
        if self.records.is_multiple_of(4096) {
            self.rates.retain(|_, r| !r.expired(now_ms));
            // A bucket full again holds nothing a new one would not.
            self.buckets.retain(|_, b| !b.full_at(now_ms));
        }
    }
}

/// A token bucket: [`SAMPLES`] windows' worth of the quota at most,
/// refilled at the quota per second, below zero once more was taken than
/// it held.
#[derive(Debug, Clone, Default)]
pub struct TokenBucket {
    tokens: f64,
    /// When it was last refilled; `None` before its first use (it starts
    /// full).
    last_ms: Option<i64>,
    /// The quota it was last refilled at.
    quota: f64,
}

impl TokenBucket {
    fn burst(quota: f64) -> f64 {
        quota * (SPAN_MS as f64 / 1000.0)
    }

    /// Brings the bucket to `now_ms` at `quota` per second.
    pub fn refill(&mut self, quota: f64, now_ms: i64) {
        let burst = Self::burst(quota);
        self.quota = quota;
        match self.last_ms {
            None => self.tokens = burst,
            Some(last) => {
                let elapsed = (now_ms - last).max(0) as f64 / 1000.0;
                self.tokens = (self.tokens + quota * elapsed).min(burst);
            }
        }
        self.last_ms = Some(self.last_ms.map_or(now_ms, |l| l.max(now_ms)));
    }

    /// The time to come back to zero at `quota`, 0 when not below it.
    pub fn throttle_ms(&self, quota: f64) -> i64 {
        if self.tokens >= 0.0 || quota <= 0.0 {
            return 0;
        }
        ((-self.tokens / quota * 1000.0).round() as i64).clamp(0, MAX_THROTTLE_MS)
    }

    fn full_at(&self, now_ms: i64) -> bool {
        let mut b = self.clone();
        b.refill(self.quota, now_ms);
        b.tokens >= Self::burst(self.quota)
    }
}

/// A rate over [`SAMPLES`] windows of [`WINDOW_MS`].
#[derive(Debug, Default, Clone)]
pub struct Rate {
    /// (window start, total), oldest first.
    windows: VecDeque<(i64, f64)>,
}

impl Rate {
    /// Adds `value` at `now_ms`.
    pub fn record(&mut self, value: f64, now_ms: i64) {
        self.purge(now_ms);
        match self.windows.back_mut() {
            Some((start, total)) if now_ms < *start + WINDOW_MS => *total += value,
            _ => {
                // Windows are aligned on the first one, so they tile time.
                let start = match self.windows.back() {
                    Some((last, _)) => last + (now_ms - last) / WINDOW_MS * WINDOW_MS,
                    None => now_ms,
                };
                self.windows.push_back((start, value));
                if self.windows.len() > SAMPLES {
                    self.windows.pop_front();
                }
            }
        }
    }

    fn purge(&mut self, now_ms: i64) {
        while let Some((start, _)) = self.windows.front() {
            if *start + SPAN_MS <= now_ms {
                self.windows.pop_front();
            } else {
                break;
            }
        }
    }

    fn expired(&self, now_ms: i64) -> bool {
        self.windows
            .back()
            .is_none_or(|(start, _)| *start + SPAN_MS <= now_ms)
    }

    /// The span measured at `now_ms` in milliseconds: since the oldest
    /// window began, and at least all windows but one.
    fn span_ms(&self, now_ms: i64) -> i64 {
        let since = self.windows.front().map_or(0, |(start, _)| now_ms - start);
        since.max((SAMPLES as i64 - 1) * WINDOW_MS)
    }

    /// The rate per second at `now_ms`.
    pub fn per_second(&mut self, now_ms: i64) -> f64 {
        self.purge(now_ms);
        let total: f64 = self.windows.iter().map(|(_, t)| t).sum();
        total * 1000.0 / self.span_ms(now_ms) as f64
    }

    /// How long the client must wait for the rate to come back to
    /// `quota` (per second, above 0), at most [`MAX_THROTTLE_MS`]; 0
    /// within it.
    /// Uncapped otherwise, as Kafka's: the windows forget the bytes after
    /// [`SPAN_MS`], so a cap would let a large request through at more than
    /// the quota.
    pub fn throttle_ms(&mut self, quota: f64, now_ms: i64) -> i64 {
        let rate = self.per_second(now_ms);
        if rate <= quota {
            return 0;
        }
        if quota <= 0.0 {
            return MAX_THROTTLE_MS;
        }
        let ms = (rate - quota) / quota * self.span_ms(now_ms) as f64;
        (ms.round() as i64).clamp(0, MAX_THROTTLE_MS)
    }
}

fn invalid(msg: String) -> Refusal {
    (ErrorCode::INVALID_REQUEST, msg)
}

fn describe_entity(entity: &Entity) -> String {
    let parts: Vec<String> = entity
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("<default>")))
        .collect();
    format!("({})", parts.join(", "))
}

/// Checks an entity as Kafka's controller checks it.
fn check_entity(components: &[(String, Option<String>)]) -> Result<Entity, Refusal> {
    if components.is_empty() {
        return Err(invalid("Invalid empty client quota entity".into()));
    }
    let mut entity = Entity::new();
    for (t, name) in components {
        if entity.contains_key(t) {
            return Err(invalid(format!(
                "Invalid empty client quota entity, duplicate entity entry {t}"
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&t.as_str()) {
            return Err(invalid(format!("Unhandled client quota entity type: {t}")));
        }
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {t} not supported")));
        }
        entity.insert(t.clone(), name.clone());
    }
    if entity.contains_key(IP) {
        if entity.len() > 1 {
            return Err(invalid(
                "Invalid quota entity combination, IP entity should not be combined with User or ClientId".into(),
            ));
        }
        if let Some(Some(ip)) = entity.get(IP) {
            let Ok(addr) = ip.parse::<IpAddr>() else {
                return Err(invalid(format!(
                    "{ip} is not a valid IP (this broker takes IP addresses, not host names)"
                )));
            };
            // One spelling per address (as peers' addresses are written).
            entity.insert(IP.into(), Some(addr.to_string()));
        }
    }
    Ok(entity)
}

/// Checks the operations on `entity`: the changes, or why they are
/// refused.
fn check_ops(
    entity: &Entity,
    ops: &[(String, Option<f64>)],
) -> Result<Vec<(String, Option<f64>)>, Refusal> {
    let mut keys: Vec<&str> = Vec::new();
    for (k, _) in ops {
        if keys.contains(&k.as_str()) {
            return Err(invalid(format!(
                "Duplicate quota key {k} not updating quota for this entity {}",
                describe_entity(entity)
            )));
        }
        keys.push(k);
    }
    let ip = entity.contains_key(IP);
    let mut out = Vec::with_capacity(ops.len());
    for (k, v) in ops {
        let known = if ip {
            k == CONNECTION_CREATION_RATE
        } else {
            [
                PRODUCER_BYTE_RATE,
                CONSUMER_BYTE_RATE,
                CONTROLLER_MUTATION_RATE,
            ]
            .contains(&k.as_str())
                || NOT_ENFORCED.contains(&k.as_str())
        };
        if !known {
            return Err(invalid(format!("Invalid configuration key {k}")));
        }
        let Some(v) = v else {
            out.push((k.clone(), None));
            continue;
        };
        if NOT_ENFORCED.contains(&k.as_str()) {
            return Err(invalid(format!(
                "Quota {k} is not enforced by this broker, so it is not set: only {PRODUCER_BYTE_RATE}, {CONSUMER_BYTE_RATE}, {CONTROLLER_MUTATION_RATE} and {CONNECTION_CREATION_RATE} are"
            )));
        }
        // Kafka 4.4's checks and messages; the non-finite check is ours.
        if !v.is_finite() || *v <= 0.0 {
            return Err(invalid(format!("Quota {k} must be greater than 0")));
        }
        // The byte rates are Kafka LONG configs and the connection rate an
        // INT one: whole numbers; the mutation rate is a DOUBLE.
        if k != CONTROLLER_MUTATION_RATE && (v - v.round()).abs() > 1e-6 {
            return Err(invalid(format!("{k} cannot be a fractional value.")));
        }
        out.push((k.clone(), Some(*v)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(parts: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        parts
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
            .collect()
    }

    fn set(entity: &[(&str, Option<&str>)], key: &str, v: f64) -> Alteration {
        Alteration {
            entity: e(entity),
            ops: vec![(key.into(), Some(v))],
        }
    }

    #[test]
    fn precedence_is_kafkas() {
        let s = QuotaStore::open(None).unwrap();
        let k = PRODUCER_BYTE_RATE;
        // From the least to the most specific: each one set overrides
        // the ones before it for alice/app.
        let levels: [&[(&str, Option<&str>)]; 8] = [
            &[(CLIENT_ID, None)],
            &[(CLIENT_ID, Some("app"))],
            &[(USER, None)],
            &[(USER, None), (CLIENT_ID, None)],
            &[(USER, None), (CLIENT_ID, Some("app"))],
            &[(USER, Some("alice"))],
            &[(USER, Some("alice")), (CLIENT_ID, None)],
            &[(USER, Some("alice")), (CLIENT_ID, Some("app"))],
        ];
        assert!(s.resolve(k, "alice", "app").is_none());
        for (i, level) in levels.iter().enumerate() {
            let r = s.alter(&[set(level, k, (i + 1) as f64 * 100.0)], false);
            assert_eq!(r, vec![Ok(())]);
            let (v, _) = s.resolve(k, "alice", "app").unwrap();
            assert_eq!(v, (i + 1) as f64 * 100.0, "level {level:?}");
        }
        // Another user falls through to the default user and client id.
        assert_eq!(s.resolve(k, "bob", "app").unwrap().0, 500.0);
        assert_eq!(s.resolve(k, "bob", "other").unwrap().0, 400.0);
        // The other key is set nowhere.
        assert!(s.resolve(CONSUMER_BYTE_RATE, "alice", "app").is_none());
    }

    #[test]
    fn a_default_binds_each_value_alone_a_name_binds_its_clients_together() {
        let s = QuotaStore::open(None).unwrap();
        s.alter(&[set(&[(USER, None)], CONSUMER_BYTE_RATE, 10.0)], false);
        s.alter(
            &[set(&[(USER, Some("alice"))], PRODUCER_BYTE_RATE, 10.0)],
            false,
        );
        let (_, a) = s.resolve(CONSUMER_BYTE_RATE, "alice", "x").unwrap();
        let (_, b) = s.resolve(CONSUMER_BYTE_RATE, "bob", "x").unwrap();
        assert_ne!(a, b, "each user has its own rate under the default");
        let (_, a1) = s.resolve(PRODUCER_BYTE_RATE, "alice", "one").unwrap();
        let (_, a2) = s.resolve(PRODUCER_BYTE_RATE, "alice", "two").unwrap();
        assert_eq!(a1, a2, "alice's clients share her quota");
    }

    #[test]
    fn refusals_are_kafkas_and_change_nothing() {
        let s = QuotaStore::open(None).unwrap();
        let cases: Vec<(Alteration, &str)> = vec![
            (
                Alteration {
                    entity: vec![],
                    ops: vec![],
                },
                "Invalid empty client quota entity",
            ),
            (
                set(&[("tenant", Some("t"))], PRODUCER_BYTE_RATE, 1.0),
                "Unhandled client quota entity type: tenant",
            ),
            (
                set(&[(USER, Some(""))], PRODUCER_BYTE_RATE, 1.0),
                "Empty user not supported",
            ),
            (
                set(
                    &[(USER, Some("a")), (USER, Some("b"))],
                    PRODUCER_BYTE_RATE,
                    1.0,
                ),
                "duplicate entity entry user",
            ),
            (
                set(
                    &[(IP, Some("1.2.3.4")), (USER, None)],
                    PRODUCER_BYTE_RATE,
                    1.0,
                ),
                "IP entity should not be combined",
            ),
            (
                set(&[(IP, Some("not-an-ip"))], "connection_creation_rate", 1.0),
                "not a valid IP",
            ),
            (
                set(&[(USER, Some("a"))], "no_such_rate", 1.0),
                "Invalid configuration key no_such_rate",
            ),
            (
                set(&[(CLIENT_ID, Some("a"))], "connection_creation_rate", 1.0),
                "Invalid configuration key connection_creation_rate",
            ),
            (
                set(&[(USER, Some("a"))], PRODUCER_BYTE_RATE, 1.5),
                "producer_byte_rate cannot be a fractional value.",
            ),
            (
                set(&[(USER, Some("a"))], PRODUCER_BYTE_RATE, -1.0),
                "Quota producer_byte_rate must be greater than 0",
            ),
            (
                set(&[(USER, Some("a"))], CONSUMER_BYTE_RATE, 0.0),
                "Quota consumer_byte_rate must be greater than 0",
            ),
            (
                set(&[(USER, Some("a"))], "request_percentage", 50.0),
                "not enforced by this broker",
            ),
            (
                set(&[(IP, None)], CONTROLLER_MUTATION_RATE, 5.0),
                "Invalid configuration key controller_mutation_rate",
            ),
            (
                set(&[(IP, None)], CONNECTION_CREATION_RATE, 0.5),
                "connection_creation_rate cannot be a fractional value.",
            ),
            (
                Alteration {
                    entity: e(&[(USER, Some("a"))]),
                    ops: vec![
                        (PRODUCER_BYTE_RATE.into(), Some(1.0)),
                        (PRODUCER_BYTE_RATE.into(), None),
                    ],
                },
                "Duplicate quota key producer_byte_rate",
            ),
        ];
        for (a, want) in cases {
            let r = s.alter(std::slice::from_ref(&a), false);
            match &r[0] {
                Err((code, msg)) => {
                    assert_eq!(*code, ErrorCode::INVALID_REQUEST, "{a:?}");
                    assert!(msg.contains(want), "{a:?}: {msg}");
                }
                Ok(()) => panic!("{a:?} accepted"),
            }
        }
        assert!(s.describe(&[], false).is_empty());
        assert!(!s.any.load(Ordering::Acquire));
    }

    #[test]
    fn a_refused_entry_leaves_the_others_and_a_duplicate_is_refused_alone() {
        let s = QuotaStore::open(None).unwrap();
        let good = set(&[(CLIENT_ID, Some("c"))], PRODUCER_BYTE_RATE, 100.0);
        let bad = set(&[(CLIENT_ID, Some("d"))], PRODUCER_BYTE_RATE, 0.5);
        let r = s.alter(&[good.clone(), bad, good.clone()], false);
        assert!(r[0].is_ok());
        assert!(r[1].is_err());
        assert!(
            r[2].as_ref()
                .unwrap_err()
                .1
                .contains("Ignoring duplicate entity")
        );
        assert_eq!(s.describe(&[], false).len(), 1);
    }

    #[test]
    fn validate_only_changes_nothing_and_removal_forgets_the_entity() {
        let s = QuotaStore::open(None).unwrap();
        let a = set(&[(USER, Some("u"))], PRODUCER_BYTE_RATE, 100.0);
        assert_eq!(s.alter(std::slice::from_ref(&a), true), vec![Ok(())]);
        assert!(s.describe(&[], false).is_empty());
        s.alter(std::slice::from_ref(&a), false);
        assert_eq!(s.describe(&[], false).len(), 1);
        // Removing a key that is not set is accepted, and changes nothing.
        let rm = |k: &str| Alteration {
            entity: e(&[(USER, Some("u"))]),
            ops: vec![(k.into(), None)],
        };
        assert_eq!(s.alter(&[rm(CONSUMER_BYTE_RATE)], false), vec![Ok(())]);
        assert_eq!(s.describe(&[], false).len(), 1);
        // Removing a key Kafka knows (but we do not enforce) is accepted.
        assert_eq!(s.alter(&[rm("request_percentage")], false), vec![Ok(())]);
        assert_eq!(s.alter(&[rm(PRODUCER_BYTE_RATE)], false), vec![Ok(())]);
        assert!(s.describe(&[], false).is_empty());
        assert_eq!(s.record(PRODUCER_BYTE_RATE, "u", "c", 1 << 30, 0), 0);
    }

    #[test]
    fn describe_filters_as_kafka_does() {
        let s = QuotaStore::open(None).unwrap();
        s.alter(
            &[
                set(&[(USER, Some("alice"))], PRODUCER_BYTE_RATE, 1.0),
                set(&[(USER, None)], PRODUCER_BYTE_RATE, 2.0),
                set(
                    &[(USER, Some("alice")), (CLIENT_ID, Some("app"))],
                    PRODUCER_BYTE_RATE,
                    3.0,
                ),
                set(&[(CLIENT_ID, None)], PRODUCER_BYTE_RATE, 4.0),
            ],
            false,
        );
        let values = |f: &[(&str, Match)], strict| {
            let f: Vec<(String, Match)> =
                f.iter().map(|(t, m)| (t.to_string(), m.clone())).collect();
            let mut v: Vec<f64> = s
                .describe(&f, strict)
                .into_iter()
                .map(|(_, q)| q[PRODUCER_BYTE_RATE])
                .collect();
            v.sort_by(f64::total_cmp);
            v
        };
        assert_eq!(values(&[], false), vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(values(&[], true), Vec::<f64>::new());
        assert_eq!(
            values(&[(USER, Match::Exact("alice".into()))], false),
            vec![1.0, 3.0]
        );
        assert_eq!(
            values(&[(USER, Match::Exact("alice".into()))], true),
            vec![1.0]
        );
        assert_eq!(values(&[(USER, Match::Default)], true), vec![2.0]);
        assert_eq!(values(&[(USER, Match::Any)], true), vec![1.0, 2.0]);
        assert_eq!(values(&[(CLIENT_ID, Match::Any)], false), vec![3.0, 4.0]);
        assert_eq!(
            values(
                &[(USER, Match::Any), (CLIENT_ID, Match::Exact("app".into()))],
                true
            ),
            vec![3.0]
        );
    }

    #[test]
    fn the_quotas_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(QUOTAS_FILE);
        let s = QuotaStore::open(Some(path.clone())).unwrap();
        s.alter(&[set(&[(USER, None)], CONSUMER_BYTE_RATE, 2048.0)], false);
        drop(s);
        let s = QuotaStore::open(Some(path)).unwrap();
        assert_eq!(s.resolve(CONSUMER_BYTE_RATE, "x", "y").unwrap().0, 2048.0);
        assert!(s.any.load(Ordering::Acquire));
    }

    #[test]
    fn a_rate_above_its_quota_is_throttled_until_it_comes_back() {
        let mut r = Rate::default();
        // 1000 B/s for 10 s: exactly at a quota of 1000.
        for s in 0..10 {
            r.record(1000.0, s * 1000);
        }
        assert_eq!(r.throttle_ms(1000.0, 9_999), 0);
        // 5000 bytes more: 15000 over 10 s is 1500/s, 50% above: half
        // the span.
        r.record(5000.0, 9_999);
        assert_eq!(r.throttle_ms(1000.0, 9_999), 5_000);
        // After waiting that long the rate is back within the quota.
        assert_eq!(r.throttle_ms(1000.0, 15_000), 0);
        // A burst far above the quota waits as long as the quota needs
        // to pay for it: 1 MB at 1000 B/s over the 10 s span is 100 kB/s,
        // 99 times the quota, 990 s.
        let mut b = Rate::default();
        b.record(1e6, 0);
        assert_eq!(b.throttle_ms(1000.0, 0), 990_000);
        // The longest throttle is what the wire carries.
        let mut z = Rate::default();
        z.record(1e15, 0);
        assert_eq!(z.throttle_ms(1.0, 0), MAX_THROTTLE_MS);
        // The windows expire: after their span nothing is measured.
        assert_eq!(b.per_second(SPAN_MS + 1), 0.0);
        assert!(b.expired(SPAN_MS + 1));
    }

    #[test]
    fn connections_are_counted_per_address_at_its_quota_or_the_default() {
        let s = QuotaStore::open(None).unwrap();
        s.alter(
            &[
                set(&[(IP, Some("10.0.0.1"))], CONNECTION_CREATION_RATE, 1.0),
                set(&[(IP, None)], CONNECTION_CREATION_RATE, 100.0),
            ],
            false,
        );
        assert_eq!(s.resolve_ip("10.0.0.1").unwrap().0, 1.0);
        assert_eq!(s.resolve_ip("10.0.0.2").unwrap().0, 100.0);
        // Ten seconds of the quota at once are let through; the eleventh
        // connection is held a tenth of the span.
        for i in 0..10 {
            assert_eq!(s.record_connection("10.0.0.1".parse().unwrap(), i), 0);
        }
        assert_eq!(s.record_connection("10.0.0.1".parse().unwrap(), 10), 1_000);
        // Another address is measured on its own.
        assert_eq!(s.record_connection("10.0.0.2".parse().unwrap(), 10), 0);
        // The byte rates do not apply to connections, nor the reverse.
        assert!(s.resolve(PRODUCER_BYTE_RATE, "u", "c").is_none());
    }

    #[test]
    fn mutations_draw_on_a_bucket_strict_ones_are_refused_below_zero() {
        let s = QuotaStore::open(None).unwrap();
        // A fractional rate is accepted (a DOUBLE in Kafka).
        let r = s.alter(
            &[set(
                &[(CLIENT_ID, Some("admin"))],
                CONTROLLER_MUTATION_RATE,
                2.5,
            )],
            false,
        );
        assert_eq!(r, vec![Ok(())]);
        // The bucket holds 11 s of the quota: 27.5 partitions. 20 are
        // admitted, then 10 more (the bucket is not below zero before
        // them), leaving -2.5.
        assert_eq!(s.mutate("u", "admin", 20.0, true, 0), Ok(()));
        assert_eq!(s.mutation_throttle_ms("u", "admin", 0), 0);
        assert_eq!(s.mutate("u", "admin", 10.0, true, 0), Ok(()));
        // Below zero: the strict mutation is refused with the time to
        // refill 2.5 tokens at 2.5/s, and takes nothing.
        assert_eq!(s.mutation_throttle_ms("u", "admin", 0), 1_000);
        assert_eq!(s.mutate("u", "admin", 1.0, true, 0), Err(1_000));
        assert_eq!(s.mutate("u", "admin", 1.0, true, 600), Err(400));
        // A permissive one is taken anyway.
        assert_eq!(s.mutate("u", "admin", 5.0, false, 600), Ok(()));
        assert_eq!(s.mutation_throttle_ms("u", "admin", 600), 2_400);
        // Refilled, strict mutations are admitted again.
        assert_eq!(s.mutate("u", "admin", 1.0, true, 3_000), Ok(()));
        // Another client id has no quota.
        assert_eq!(s.mutate("u", "other", 1e9, true, 0), Ok(()));
    }

    #[test]
    fn record_accounts_against_the_entity_that_sets_the_quota() {
        let s = QuotaStore::open(None).unwrap();
        s.alter(
            &[set(&[(USER, Some("alice"))], PRODUCER_BYTE_RATE, 1000.0)],
            false,
        );
        // 10 s of quota in one go from one client: at the quota.
        assert_eq!(s.record(PRODUCER_BYTE_RATE, "alice", "one", 10_000, 0), 0);
        // The same user's other client shares the rate: over.
        assert!(s.record(PRODUCER_BYTE_RATE, "alice", "two", 1_000, 1) > 0);
        // Another user has no quota.
        assert_eq!(s.record(PRODUCER_BYTE_RATE, "bob", "one", 1 << 30, 2), 0);
        // Nor has alice on the other key.
        assert_eq!(s.record(CONSUMER_BYTE_RATE, "alice", "one", 1 << 30, 3), 0);
        assert_eq!(
            s.window_bytes(PRODUCER_BYTE_RATE, "alice", "x"),
            Some(10_000)
        );
        assert_eq!(s.window_bytes(CONSUMER_BYTE_RATE, "alice", "x"), None);
    }
}
