//! SCRAM credentials (KIP-554): those derived at start from the configured
//! users, overlaid with what AlterUserScramCredentials changed since.
//!
//! A change is kept per (user, mechanism): a new credential or a deletion.
//! With a data directory the changes are written to
//! `scram-credentials.json` (atomically, before the answer) and laid over
//! the configured users at the next start, so a credential set or deleted
//! through the admin API survives restarts, and wins over the same user's
//! configured password for that mechanism. PLAIN keeps checking the
//! configured passwords only, as Kafka's PLAIN (its JAAS users) is apart
//! from its SCRAM credentials.
//!
//! The rules and messages are Kafka 4.4's (checked with kafka-configs.sh
//! and librdkafka's 0081_admin against a 4.4 node): at most one alteration
//! per user in a request (DUPLICATE_RESOURCE), 4096 to 16384 iterations
//! (UNACCEPTABLE_CREDENTIAL), a mechanism of 1 (SCRAM-SHA-256) or 2
//! (SCRAM-SHA-512) (UNSUPPORTED_SASL_MECHANISM), and a deletion of a
//! credential that does not exist is RESOURCE_NOT_FOUND. Nothing more is
//! checked, as in Kafka: a salted password of another length than its
//! hash's, or an empty salt, is stored (kafka-go's own tests upsert an
//! 18-byte SHA-512 salted password, and Kafka 4.4 takes it).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use sharestream_protocol::ErrorCode;
use sharestream_protocol::sasl::{MIN_SCRAM_ITERATIONS, SaslMechanism, ScramCredential};

/// The file of the changes, in the data directory.
pub const SCRAM_FILE: &str = "scram-credentials.json";

/// Kafka's upper bound on a credential's iterations.
pub const MAX_SCRAM_ITERATIONS: u32 = 16_384;

/// A mechanism as the SCRAM admin APIs number it.
pub fn mechanism_of(code: i8) -> Option<SaslMechanism> {
    match code {
        1 => Some(SaslMechanism::ScramSha256),
        2 => Some(SaslMechanism::ScramSha512),
        _ => None,
    }
}

/// The admin APIs' number of a SCRAM mechanism.
pub fn mechanism_code(m: SaslMechanism) -> i8 {
    match m {
        SaslMechanism::ScramSha512 => 2,
        _ => 1,
    }
}

/// One alteration of an AlterUserScramCredentials request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alteration {
    /// Set the credential of `user` for `mechanism`.
    Upsert {
        /// The user.
        user: String,
        /// The mechanism's code (1, 2).
        mechanism: i8,
        /// PBKDF2 iterations.
        iterations: i32,
        /// The salt.
        salt: Vec<u8>,
        /// `Hi(password, salt, iterations)`.
        salted_password: Vec<u8>,
    },
    /// Remove the credential of `user` for `mechanism`.
    Delete {
        /// The user.
        user: String,
        /// The mechanism's code.
        mechanism: i8,
    },
}

impl Alteration {
    fn user(&self) -> &str {
        match self {
            Alteration::Upsert { user, .. } | Alteration::Delete { user, .. } => user,
        }
    }
}

/// A refusal: the code and Kafka's message.
pub type Refusal = (ErrorCode, String);

/// A described user: its (mechanism code, iterations), or why not.
pub type Described = (String, Result<Vec<(i8, i32)>, Refusal>);

/// A credential as the file keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    salt: Vec<u8>,
    iterations: u32,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

/// One change as the file keeps it: `credential` None is a deletion.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Change {
    user: String,
    mechanism: String,
    credential: Option<Stored>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct ChangeFile {
    changes: Vec<Change>,
}

type Key = (String, SaslMechanism);

/// The broker's SCRAM credentials.
#[derive(Debug)]
pub struct ScramStore {
    seeded: HashMap<(SaslMechanism, String), ScramCredential>,
    changes: RwLock<BTreeMap<Key, Option<ScramCredential>>>,
    path: Option<PathBuf>,
}

impl ScramStore {
    /// The configured users' credentials, with the changes stored in
    /// `path` (if any, and if it exists) laid over them.
    pub fn open(
        seeded: HashMap<(SaslMechanism, String), ScramCredential>,
        path: Option<PathBuf>,
    ) -> std::io::Result<Self> {
        let mut changes = BTreeMap::new();
        if let Some(p) = path.as_ref().filter(|p| p.exists()) {
            let bad = |why: String| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {why}", p.display()),
                )
            };
            let file: ChangeFile =
                serde_json::from_slice(&std::fs::read(p)?).map_err(|e| bad(e.to_string()))?;
            for c in file.changes {
                let m = SaslMechanism::from_name(&c.mechanism)
                    .filter(|m| *m != SaslMechanism::Plain)
                    .ok_or_else(|| bad(format!("unknown SCRAM mechanism {}", c.mechanism)))?;
                let credential = c.credential.map(|s| ScramCredential {
                    salt: s.salt,
                    iterations: s.iterations,
                    stored_key: s.stored_key,
                    server_key: s.server_key,
                });
                changes.insert((c.user, m), credential);
            }
        }
        Ok(Self {
            seeded,
            changes: RwLock::new(changes),
            path,
        })
    }

    /// The credential of `user` for `m`, if it has one.
    pub fn get(&self, m: SaslMechanism, user: &str) -> Option<ScramCredential> {
        match self.changes.read().get(&(user.to_string(), m)) {
            Some(changed) => changed.clone(),
            None => self.seeded.get(&(m, user.to_string())).cloned(),
        }
    }

    /// Every user with a credential, with its (mechanism, iterations),
    /// users and mechanisms in order.
    fn all(&self) -> BTreeMap<String, Vec<(SaslMechanism, u32)>> {
        let changes = self.changes.read();
        let mut out: BTreeMap<String, Vec<(SaslMechanism, u32)>> = BTreeMap::new();
        for ((m, user), c) in &self.seeded {
            if !changes.contains_key(&(user.clone(), *m)) {
                out.entry(user.clone())
                    .or_default()
                    .push((*m, c.iterations));
            }
        }
        for ((user, m), c) in changes.iter() {
            if let Some(c) = c {
                out.entry(user.clone())
                    .or_default()
                    .push((*m, c.iterations));
            }
        }
        for v in out.values_mut() {
            v.sort_by_key(|(m, _)| mechanism_code(*m));
        }
        out
    }

    /// DescribeUserScramCredentials: `None` (or no user) describes every
    /// user with a credential; otherwise each user named, in order, with
    /// its (mechanism code, iterations) or why not.
    pub fn describe(&self, users: Option<&[String]>) -> Vec<Described> {
        let all = self.all();
        let infos = |v: &Vec<(SaslMechanism, u32)>| {
            v.iter()
                .map(|(m, i)| (mechanism_code(*m), *i as i32))
                .collect::<Vec<_>>()
        };
        let Some(users) = users.filter(|u| !u.is_empty()) else {
            return all.iter().map(|(u, v)| (u.clone(), Ok(infos(v)))).collect();
        };
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for u in users {
            *seen.entry(u.as_str()).or_default() += 1;
        }
        let mut out = Vec::new();
        let mut answered = std::collections::HashSet::new();
        for u in users {
            if !answered.insert(u.as_str()) {
                continue;
            }
            let r = if seen[u.as_str()] > 1 {
                Err((
                    ErrorCode::DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single request"
                        .to_string(),
                ))
            } else {
                match all.get(u) {
                    Some(v) => Ok(infos(v)),
                    None => Err((
                        ErrorCode::RESOURCE_NOT_FOUND,
                        "Attempt to describe a user credential that does not exist".to_string(),
                    )),
                }
            };
            out.push((u.clone(), r));
        }
        out
    }

    /// AlterUserScramCredentials: one result per user, in the order the
    /// users first appear. The valid users' alterations are applied (and
    /// persisted) together; a refused user changes nothing.
    pub fn alter(&self, alterations: &[Alteration]) -> Vec<(String, Result<(), Refusal>)> {
        let mut order: Vec<&str> = Vec::new();
        let mut count: HashMap<&str, usize> = HashMap::new();
        for a in alterations {
            let n = count.entry(a.user()).or_default();
            if *n == 0 {
                order.push(a.user());
            }
            *n += 1;
        }
        let mut changes = self.changes.write();
        let mut next = changes.clone();
        let mut results: Vec<(String, Result<(), Refusal>)> = Vec::new();
        for user in order {
            let refused = |code: ErrorCode, m: &str| Err((code, m.to_string()));
            let r = if count[user] > 1 {
                refused(
                    ErrorCode::DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request",
                )
            } else {
                let a = alterations
                    .iter()
                    .find(|a| a.user() == user)
                    .expect("counted above");
                self.check_and_apply(a, &mut next)
            };
            results.push((user.to_string(), r));
        }
        if next != *changes {
            if let Err(e) = self.persist(&next) {
                tracing::error!(error = %e, "could not persist the SCRAM credentials; the change is refused");
                for (_, r) in results.iter_mut().filter(|(_, r)| r.is_ok()) {
                    *r = Err((
                        ErrorCode::UNKNOWN_SERVER_ERROR,
                        format!("The credentials could not be stored: {e}"),
                    ));
                }
                return results;
            }
            *changes = next;
        }
        results
    }

    fn check_and_apply(
        &self,
        a: &Alteration,
        next: &mut BTreeMap<Key, Option<ScramCredential>>,
    ) -> Result<(), Refusal> {
        let refused = |code: ErrorCode, m: String| Err((code, m));
        let user = a.user();
        if user.is_empty() {
            return refused(
                ErrorCode::UNACCEPTABLE_CREDENTIAL,
                "Username must not be empty".into(),
            );
        }
        let code = match a {
            Alteration::Upsert { mechanism, .. } | Alteration::Delete { mechanism, .. } => {
                *mechanism
            }
        };
        let Some(m) = mechanism_of(code) else {
            return refused(
                ErrorCode::UNSUPPORTED_SASL_MECHANISM,
                "Unknown SCRAM mechanism".into(),
            );
        };
        let key = (user.to_string(), m);
        match a {
            Alteration::Delete { .. } => {
                let exists = match next.get(&key) {
                    Some(c) => c.is_some(),
                    None => self.seeded.contains_key(&(m, user.to_string())),
                };
                if !exists {
                    return refused(
                        ErrorCode::RESOURCE_NOT_FOUND,
                        "Attempt to delete a user credential that does not exist".into(),
                    );
                }
                next.insert(key, None);
            }
            Alteration::Upsert {
                iterations,
                salt,
                salted_password,
                ..
            } => {
                if *iterations < MIN_SCRAM_ITERATIONS as i32 {
                    return refused(
                        ErrorCode::UNACCEPTABLE_CREDENTIAL,
                        "Too few iterations".into(),
                    );
                }
                if *iterations > MAX_SCRAM_ITERATIONS as i32 {
                    return refused(
                        ErrorCode::UNACCEPTABLE_CREDENTIAL,
                        "Too many iterations".into(),
                    );
                }
                // Neither the salt nor the salted password is checked
                // further, as in Kafka (its controller checks the name,
                // the mechanism and the iterations): the salted password
                // is an HMAC key, which may have any length (kafka-go's
                // tests send 18 bytes for SHA-512).
                let c = ScramCredential::from_salted(
                    m,
                    salted_password,
                    salt.clone(),
                    *iterations as u32,
                );
                next.insert(key, Some(c));
            }
        }
        Ok(())
    }

    fn persist(&self, changes: &BTreeMap<Key, Option<ScramCredential>>) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = ChangeFile {
            changes: changes
                .iter()
                .map(|((user, m), c)| Change {
                    user: user.clone(),
                    mechanism: m.name().to_string(),
                    credential: c.as_ref().map(|c| Stored {
                        salt: c.salt.clone(),
                        iterations: c.iterations,
                        stored_key: c.stored_key.clone(),
                        server_key: c.server_key.clone(),
                    }),
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        crate::log::write_atomic(path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA256: i8 = 1;
    const SHA512: i8 = 2;

    fn upsert(user: &str, mechanism: i8, iterations: i32, password: &str) -> Alteration {
        let m = mechanism_of(mechanism).unwrap_or(SaslMechanism::ScramSha256);
        let salt = b"salt".to_vec();
        Alteration::Upsert {
            user: user.into(),
            mechanism,
            iterations,
            salted_password: ScramCredential::salt_password(
                m,
                password,
                &salt,
                iterations.max(1) as u32,
            ),
            salt,
        }
    }

    fn delete(user: &str, mechanism: i8) -> Alteration {
        Alteration::Delete {
            user: user.into(),
            mechanism,
        }
    }

    fn seeded() -> HashMap<(SaslMechanism, String), ScramCredential> {
        [(
            (SaslMechanism::ScramSha256, "admin".to_string()),
            ScramCredential::generate(SaslMechanism::ScramSha256, "admin-secret", 4096),
        )]
        .into_iter()
        .collect()
    }

    fn code(r: &Result<(), Refusal>) -> ErrorCode {
        r.as_ref().err().map_or(ErrorCode::NONE, |e| e.0)
    }

    #[test]
    fn kafkas_rules_for_alterations() {
        let s = ScramStore::open(seeded(), None).unwrap();
        let r = s.alter(&[
            upsert("a", SHA256, 4095, "pw"),
            upsert("b", SHA256, 16_385, "pw"),
            upsert("c", 3, 8192, "pw"),
            upsert("d", SHA256, 8192, "pw"),
            upsert("d", SHA512, 8192, "pw"),
            delete("e", SHA256),
            upsert("", SHA256, 8192, "pw"),
            upsert("f", SHA512, 8192, "pw"),
        ]);
        let got: Vec<(&str, ErrorCode, String)> = r
            .iter()
            .map(|(u, r)| {
                (
                    u.as_str(),
                    code(r),
                    r.clone().err().map(|e| e.1).unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "a",
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    "Too few iterations".into()
                ),
                (
                    "b",
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    "Too many iterations".into()
                ),
                (
                    "c",
                    ErrorCode::UNSUPPORTED_SASL_MECHANISM,
                    "Unknown SCRAM mechanism".into()
                ),
                (
                    "d",
                    ErrorCode::DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request".into()
                ),
                (
                    "e",
                    ErrorCode::RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist".into()
                ),
                (
                    "",
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    "Username must not be empty".into()
                ),
                ("f", ErrorCode::NONE, String::new()),
            ]
        );
        // Only f was applied.
        let d = s.describe(None);
        let users: Vec<&str> = d.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(users, vec!["admin", "f"]);
        assert_eq!(d[1].1, Ok(vec![(SHA512, 8192)]));
        // A salted password of another length than the hash's, and an
        // empty salt, are taken as Kafka takes them.
        let r = s.alter(&[Alteration::Upsert {
            user: "g".into(),
            mechanism: SHA512,
            iterations: 4096,
            salt: Vec::new(),
            salted_password: b"my-salted-password".to_vec(),
        }]);
        assert_eq!(code(&r[0].1), ErrorCode::NONE);
    }

    #[test]
    fn describe_names_each_user_once_or_says_why_not() {
        let s = ScramStore::open(seeded(), None).unwrap();
        s.alter(&[upsert("admin", SHA512, 8192, "x")]);
        let d = s.describe(Some(&[
            "admin".into(),
            "nobody".into(),
            "twice".into(),
            "twice".into(),
        ]));
        assert_eq!(d.len(), 3);
        assert_eq!(
            d[0],
            ("admin".into(), Ok(vec![(SHA256, 4096), (SHA512, 8192)]))
        );
        assert_eq!(
            d[1].1.as_ref().unwrap_err().0,
            ErrorCode::RESOURCE_NOT_FOUND
        );
        assert_eq!(
            d[1].1.as_ref().unwrap_err().1,
            "Attempt to describe a user credential that does not exist"
        );
        assert_eq!(
            d[2].1.as_ref().unwrap_err().0,
            ErrorCode::DUPLICATE_RESOURCE
        );
    }

    /// A credential set through the API is the one SCRAM checks; a deleted
    /// configured one is gone; both survive a reopen from the file.
    #[test]
    fn changes_win_over_the_configured_users_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SCRAM_FILE);
        let s = ScramStore::open(seeded(), Some(path.clone())).unwrap();
        let before = s.get(SaslMechanism::ScramSha256, "admin").unwrap();
        let r = s.alter(&[
            upsert("carol", SHA256, 8192, "carol-pw"),
            delete("admin", SHA256),
        ]);
        assert!(r.iter().all(|(_, r)| r.is_ok()), "{r:?}");
        let carol = s.get(SaslMechanism::ScramSha256, "carol").unwrap();
        assert_eq!(
            carol,
            ScramCredential::derive(
                SaslMechanism::ScramSha256,
                "carol-pw",
                b"salt".to_vec(),
                8192
            )
        );
        assert!(s.get(SaslMechanism::ScramSha256, "admin").is_none());
        let reopened = ScramStore::open(seeded(), Some(path)).unwrap();
        assert_eq!(
            reopened.get(SaslMechanism::ScramSha256, "carol"),
            Some(carol)
        );
        assert!(reopened.get(SaslMechanism::ScramSha256, "admin").is_none());
        assert_ne!(before.salt, Vec::<u8>::new());
        let d = reopened.describe(Some(&["admin".into()]));
        assert_eq!(
            d[0].1.as_ref().unwrap_err().0,
            ErrorCode::RESOURCE_NOT_FOUND
        );
    }
}
