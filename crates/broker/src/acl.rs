//! The ACL authorizer: Kafka's authorization model, with no I/O but the
//! atomic rewrite of `acls.json` after a change.
//!
//! An ACL binding grants (Allow) or refuses (Deny) one operation on a
//! resource pattern to a principal connecting from a host:
//!
//! - resources: Topic, Group, Cluster (the single resource `kafka-cluster`),
//!   TransactionalId; a pattern is Literal (the name, or `*` for every
//!   resource of the type) or Prefixed (every name starting with it);
//! - principals are `User:<name>`, `User:*` matching everyone; hosts are IP
//!   strings, `*` matching every host;
//! - operations: Read, Write, Create, Delete, Alter, Describe,
//!   ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, and All
//!   which covers each of them.
//!
//! The decision for (principal, host, operation, resource), as Kafka makes
//! it:
//!
//! 1. a super user is allowed everything;
//! 2. a matching Deny binding for the operation (or for All) refuses: deny
//!    wins over any Allow;
//! 3. a matching Allow binding for the operation, for All, or for an
//!    operation that implies it allows: Describe is implied by Read, Write,
//!    Delete and Alter; DescribeConfigs by AlterConfigs. Implication only
//!    widens Allow: a Deny on Read does not refuse Describe;
//! 4. otherwise the request is refused, unless the broker runs with
//!    `allow.everyone.if.no.acl.found` (off by default, as in Kafka) and
//!    no binding at all, of any principal, host or operation, covers the
//!    resource: then it is allowed. Kafka's development clusters and
//!    librdkafka's test clusters run that way, so that a Deny on one topic
//!    refuses it and everything else stays open.
//!
//! Bindings live in a set (creating an existing binding again is a no-op);
//! with a path configured, every change rewrites the file atomically
//! (`write_atomic`), and `open` loads it again.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

/// The name of the single cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The literal name or principal that matches everything.
pub const WILDCARD: &str = "*";

/// The principal matching every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// The principal of unauthenticated connections on a PLAINTEXT listener.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// A kind of resource (`ResourceType` of the Kafka protocol; codes as on the
/// wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ResourceType {
    /// A topic.
    Topic,
    /// A consumer or share group.
    Group,
    /// The cluster.
    Cluster,
    /// A transactional id.
    TransactionalId,
}

impl ResourceType {
    /// The protocol code.
    pub fn code(self) -> i8 {
        match self {
            Self::Topic => 2,
            Self::Group => 3,
            Self::Cluster => 4,
            Self::TransactionalId => 5,
        }
    }

    /// From a protocol code (`None` for ANY/UNKNOWN or types not served).
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            2 => Some(Self::Topic),
            3 => Some(Self::Group),
            4 => Some(Self::Cluster),
            5 => Some(Self::TransactionalId),
            _ => None,
        }
    }
}

impl ResourceType {
    /// The operations reported in an authorized-operations field for a
    /// resource of this type (Kafka's supported operations per type; All is
    /// never reported).
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            Self::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            Self::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            Self::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            Self::TransactionalId => &[Describe, Write],
        }
    }
}

/// The 32-bit field of authorized operations used by Metadata,
/// DescribeCluster and the group describe APIs: bit `1 << code` set for
/// each operation.
pub fn operations_bitfield(ops: impl IntoIterator<Item = AclOperation>) -> i32 {
    ops.into_iter().fold(0, |acc, op| acc | (1 << op.code()))
}

/// The value of an authorized-operations field that was not requested.
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// How a binding's name matches resource names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PatternType {
    /// The exact name; `*` matches every name.
    Literal,
    /// Every name starting with the binding's name.
    Prefixed,
}

impl PatternType {
    /// The protocol code.
    pub fn code(self) -> i8 {
        match self {
            Self::Literal => 3,
            Self::Prefixed => 4,
        }
    }

    /// From a protocol code (`None` for ANY, MATCH and UNKNOWN).
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            3 => Some(Self::Literal),
            4 => Some(Self::Prefixed),
            _ => None,
        }
    }
}

/// An operation on a resource (`AclOperation`; codes as on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AclOperation {
    /// Every operation.
    All,
    /// Read.
    Read,
    /// Write.
    Write,
    /// Create.
    Create,
    /// Delete.
    Delete,
    /// Alter.
    Alter,
    /// Describe.
    Describe,
    /// Inter-broker actions.
    ClusterAction,
    /// Describe configs.
    DescribeConfigs,
    /// Alter configs.
    AlterConfigs,
    /// Idempotent produce.
    IdempotentWrite,
}

impl AclOperation {
    /// The protocol code.
    pub fn code(self) -> i8 {
        match self {
            Self::All => 2,
            Self::Read => 3,
            Self::Write => 4,
            Self::Create => 5,
            Self::Delete => 6,
            Self::Alter => 7,
            Self::Describe => 8,
            Self::ClusterAction => 9,
            Self::DescribeConfigs => 10,
            Self::AlterConfigs => 11,
            Self::IdempotentWrite => 12,
        }
    }

    /// From a protocol code (`None` for ANY and UNKNOWN).
    pub fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            2 => Self::All,
            3 => Self::Read,
            4 => Self::Write,
            5 => Self::Create,
            6 => Self::Delete,
            7 => Self::Alter,
            8 => Self::Describe,
            9 => Self::ClusterAction,
            10 => Self::DescribeConfigs,
            11 => Self::AlterConfigs,
            12 => Self::IdempotentWrite,
            _ => return None,
        })
    }

    /// The operations whose Allow also allows `self` (itself and All
    /// included).
    pub fn allowed_by(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            Describe => &[Describe, Read, Write, Delete, Alter, All],
            DescribeConfigs => &[DescribeConfigs, AlterConfigs, All],
            Read => &[Read, All],
            Write => &[Write, All],
            Create => &[Create, All],
            Delete => &[Delete, All],
            Alter => &[Alter, All],
            ClusterAction => &[ClusterAction, All],
            AlterConfigs => &[AlterConfigs, All],
            IdempotentWrite => &[IdempotentWrite, All],
            All => &[All],
        }
    }
}

/// Allow or Deny (`AclPermissionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Permission {
    /// Refuse.
    Deny,
    /// Grant.
    Allow,
}

impl Permission {
    /// The protocol code.
    pub fn code(self) -> i8 {
        match self {
            Self::Deny => 2,
            Self::Allow => 3,
        }
    }

    /// From a protocol code.
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            2 => Some(Self::Deny),
            3 => Some(Self::Allow),
            _ => None,
        }
    }
}

/// A concrete resource a request touches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// Its type.
    pub resource_type: ResourceType,
    /// Its name (`kafka-cluster` for the cluster).
    pub name: String,
}

impl Resource {
    /// A topic.
    pub fn topic(name: impl Into<String>) -> Self {
        Self {
            resource_type: ResourceType::Topic,
            name: name.into(),
        }
    }
    /// A group.
    pub fn group(name: impl Into<String>) -> Self {
        Self {
            resource_type: ResourceType::Group,
            name: name.into(),
        }
    }
    /// A transactional id.
    pub fn transactional_id(name: impl Into<String>) -> Self {
        Self {
            resource_type: ResourceType::TransactionalId,
            name: name.into(),
        }
    }
    /// The cluster.
    pub fn cluster() -> Self {
        Self {
            resource_type: ResourceType::Cluster,
            name: CLUSTER_NAME.to_string(),
        }
    }
}

/// A resource pattern of a binding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourcePattern {
    /// Resource type.
    pub resource_type: ResourceType,
    /// Name, prefix, or `*`.
    pub name: String,
    /// Literal or prefixed.
    pub pattern_type: PatternType,
}

impl ResourcePattern {
    /// Whether this pattern covers `resource`.
    pub fn matches(&self, resource: &Resource) -> bool {
        self.resource_type == resource.resource_type
            && match self.pattern_type {
                PatternType::Literal => self.name == WILDCARD || self.name == resource.name,
                PatternType::Prefixed => resource.name.starts_with(&self.name),
            }
    }
}

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    /// What it applies to.
    pub pattern: ResourcePattern,
    /// `User:<name>` or `User:*`.
    pub principal: String,
    /// A host IP or `*`.
    pub host: String,
    /// The operation.
    pub operation: AclOperation,
    /// Allow or deny.
    pub permission: Permission,
}

impl AclBinding {
    fn applies_to(&self, principal: &str, host: &str, resource: &Resource) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == WILDCARD || self.host == host)
            && self.pattern.matches(resource)
    }
}

/// Which pattern types a filter selects (`PatternType` ANY, MATCH, or one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type, name compared exactly.
    Any,
    /// Every binding that would apply to the named resource: the literal
    /// name, the literal wildcard, and prefixes of the name.
    Match,
    /// Exactly this pattern type.
    Is(PatternType),
}

/// A filter over bindings (DescribeAcls, DeleteAcls); `None` = any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    /// Resource type.
    pub resource_type: Option<ResourceType>,
    /// Resource name.
    pub name: Option<String>,
    /// Pattern types.
    pub pattern: PatternFilter,
    /// Principal.
    pub principal: Option<String>,
    /// Host.
    pub host: Option<String>,
    /// Operation.
    pub operation: Option<AclOperation>,
    /// Permission.
    pub permission: Option<Permission>,
}

impl AclBindingFilter {
    /// Matches every binding.
    pub fn any() -> Self {
        Self {
            resource_type: None,
            name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// Whether `b` passes the filter.
    pub fn matches(&self, b: &AclBinding) -> bool {
        let p = &b.pattern;
        if self.resource_type.is_some_and(|t| t != p.resource_type) {
            return false;
        }
        let name_ok = match (&self.pattern, &self.name) {
            (PatternFilter::Match, Some(n)) => match p.pattern_type {
                PatternType::Literal => p.name == *n || p.name == WILDCARD,
                PatternType::Prefixed => n.starts_with(&p.name),
            },
            (PatternFilter::Is(t), n) => {
                p.pattern_type == *t && n.as_ref().is_none_or(|n| *n == p.name)
            }
            (_, n) => n.as_ref().is_none_or(|n| *n == p.name),
        };
        name_ok
            && self.principal.as_ref().is_none_or(|x| *x == b.principal)
            && self.host.as_ref().is_none_or(|x| *x == b.host)
            && self.operation.is_none_or(|x| x == b.operation)
            && self.permission.is_none_or(|x| x == b.permission)
    }
}

/// Why a binding cannot be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    /// The binding is malformed (Kafka's INVALID_REQUEST).
    #[error("invalid ACL: {0}")]
    Invalid(String),
    /// Storing the ACLs failed.
    #[error("cannot persist ACLs: {0}")]
    Storage(String),
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct AclFile {
    acls: Vec<AclBinding>,
}

/// The authorizer: bindings, super users, persistence.
#[derive(Debug)]
pub struct Authorizer {
    acls: RwLock<BTreeSet<AclBinding>>,
    super_users: HashSet<String>,
    path: Option<PathBuf>,
    /// `allow.everyone.if.no.acl.found`.
    allow_if_no_acl: bool,
}

impl Authorizer {
    /// An in-memory authorizer.
    pub fn new(super_users: impl IntoIterator<Item = String>) -> Self {
        Self {
            acls: RwLock::new(BTreeSet::new()),
            super_users: super_users.into_iter().collect(),
            path: None,
            allow_if_no_acl: false,
        }
    }

    /// `allow.everyone.if.no.acl.found`: a resource that no binding covers
    /// is open to everyone (module docs, rule 4).
    pub fn allow_everyone_if_no_acl_found(mut self, on: bool) -> Self {
        self.allow_if_no_acl = on;
        self
    }

    /// An authorizer persisted in `path` (loaded if it exists).
    pub fn open(
        path: impl Into<PathBuf>,
        super_users: impl IntoIterator<Item = String>,
    ) -> std::io::Result<Self> {
        let path = path.into();
        let mut acls = BTreeSet::new();
        if path.exists() {
            let bytes = std::fs::read(&path)?;
            let file: AclFile = serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?;
            acls.extend(file.acls);
        }
        Ok(Self {
            acls: RwLock::new(acls),
            super_users: super_users.into_iter().collect(),
            path: Some(path),
            allow_if_no_acl: false,
        })
    }

    /// Where the bindings are stored, if anywhere.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether `principal` is a super user.
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// The decision for `principal` connecting from `host` doing
    /// `operation` on `resource` (see the module docs).
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource: &Resource,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let acls = self.acls.read();
        let applicable = || {
            acls.iter()
                .filter(|b| b.applies_to(principal, host, resource))
        };
        let denied = applicable().any(|b| {
            b.permission == Permission::Deny
                && (b.operation == operation || b.operation == AclOperation::All)
        });
        if denied {
            return false;
        }
        let allowed_by = operation.allowed_by();
        applicable().any(|b| b.permission == Permission::Allow && allowed_by.contains(&b.operation))
            || (self.allow_if_no_acl && !acls.iter().any(|b| b.pattern.matches(resource)))
    }

    /// Whether `principal` may do `operation` on at least one resource of
    /// `resource_type` (Kafka's authorizeByResourceType, used where any
    /// topic will do, e.g. idempotent InitProducerId): some Allow binding
    /// must exist that no Deny binding of the same principal covers
    /// entirely (a literal `*` Deny, or a Prefixed Deny whose prefix starts
    /// the allowed name).
    pub fn authorize_any(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        // As Kafka's authorizeByResourceType begins: a resource of the type
        // with a name no binding names would do (with
        // allow.everyone.if.no.acl.found, one no binding covers is open).
        if self.allow_if_no_acl {
            let unnamed = Resource {
                resource_type,
                name: "hardcode".to_string(),
            };
            if self.authorize(principal, host, operation, &unnamed) {
                return true;
            }
        }
        let acls = self.acls.read();
        let mine = |b: &&AclBinding| {
            b.pattern.resource_type == resource_type
                && (b.principal == principal || b.principal == WILDCARD_PRINCIPAL)
                && (b.host == WILDCARD || b.host == host)
        };
        let denies: Vec<&AclBinding> = acls
            .iter()
            .filter(mine)
            .filter(|b| {
                b.permission == Permission::Deny
                    && (b.operation == operation || b.operation == AclOperation::All)
            })
            .collect();
        let allowed_by = operation.allowed_by();
        acls.iter()
            .filter(mine)
            .filter(|b| b.permission == Permission::Allow && allowed_by.contains(&b.operation))
            .any(|allow| {
                !denies.iter().any(|d| {
                    let dp = &d.pattern;
                    let ap = &allow.pattern;
                    match dp.pattern_type {
                        PatternType::Literal => {
                            dp.name == WILDCARD
                                || (ap.pattern_type == PatternType::Literal && ap.name == dp.name)
                        }
                        PatternType::Prefixed => ap.name.starts_with(&dp.name),
                    }
                })
            })
    }

    /// Checks a binding before it is stored.
    pub fn validate(binding: &AclBinding) -> Result<(), AclError> {
        if !binding.principal.starts_with("User:") || binding.principal.len() <= 5 {
            return Err(AclError::Invalid(format!(
                "principal {:?} is not User:<name>",
                binding.principal
            )));
        }
        if binding.host.is_empty() {
            return Err(AclError::Invalid("empty host".into()));
        }
        let p = &binding.pattern;
        if p.name.is_empty() {
            return Err(AclError::Invalid("empty resource name".into()));
        }
        if p.resource_type == ResourceType::Cluster && p.name != CLUSTER_NAME {
            return Err(AclError::Invalid(format!(
                "the cluster resource is named {CLUSTER_NAME}"
            )));
        }
        if p.pattern_type == PatternType::Prefixed && p.name == WILDCARD {
            return Err(AclError::Invalid(
                "a prefixed pattern cannot be the wildcard".into(),
            ));
        }
        use AclOperation::*;
        // Kafka's supported operations per type (groups have configs
        // since share and consumer groups got them), and All.
        let valid = binding.operation == All
            || p.resource_type
                .supported_operations()
                .contains(&binding.operation);
        if !valid {
            return Err(AclError::Invalid(format!(
                "{:?} is not an operation on {:?}",
                binding.operation, p.resource_type
            )));
        }
        Ok(())
    }

    /// Stores bindings; one result per binding, in order. Valid bindings
    /// are stored even when others in the same call are refused.
    pub fn create_acls(&self, bindings: Vec<AclBinding>) -> Vec<Result<(), AclError>> {
        let mut results: Vec<Result<(), AclError>> = bindings.iter().map(Self::validate).collect();
        let mut acls = self.acls.write();
        let before = acls.clone();
        let mut changed = false;
        for (b, r) in bindings.into_iter().zip(&results) {
            if r.is_ok() {
                changed |= acls.insert(b);
            }
        }
        if changed && let Err(e) = self.persist(&acls) {
            *acls = before;
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(AclError::Storage(e.to_string()));
            }
        }
        results
    }

    /// Bindings passing `filter`, in a stable order.
    pub fn describe_acls(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.acls
            .read()
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect()
    }

    /// Removes the bindings passing each filter; for each filter, the
    /// bindings it removed (a binding matched by two filters is reported
    /// under the first).
    pub fn delete_acls(
        &self,
        filters: &[AclBindingFilter],
    ) -> Result<Vec<Vec<AclBinding>>, AclError> {
        let mut acls = self.acls.write();
        let before = acls.clone();
        let mut out = Vec::with_capacity(filters.len());
        for f in filters {
            let hit: Vec<AclBinding> = acls.iter().filter(|b| f.matches(b)).cloned().collect();
            for b in &hit {
                acls.remove(b);
            }
            out.push(hit);
        }
        if out.iter().any(|v| !v.is_empty())
            && let Err(e) = self.persist(&acls)
        {
            *acls = before;
            return Err(AclError::Storage(e.to_string()));
        }
        Ok(out)
    }

    /// Number of stored bindings.
    pub fn len(&self) -> usize {
        self.acls.read().len()
    }

    /// Whether no binding is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn persist(&self, acls: &BTreeSet<AclBinding>) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = AclFile {
            acls: acls.iter().cloned().collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        crate::log::write_atomic(path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AclOperation::*;

    fn bind(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        principal: &str,
        op: AclOperation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: rt,
                name: name.into(),
                pattern_type: pt,
            },
            principal: principal.into(),
            host: WILDCARD.into(),
            operation: op,
            permission: perm,
        }
    }

    fn allow(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        who: &str,
        op: AclOperation,
    ) -> AclBinding {
        bind(rt, name, pt, who, op, Permission::Allow)
    }

    fn deny(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        who: &str,
        op: AclOperation,
    ) -> AclBinding {
        bind(rt, name, pt, who, op, Permission::Deny)
    }

    fn auth(bindings: Vec<AclBinding>) -> Authorizer {
        let a = Authorizer::new(["User:admin".to_string()]);
        assert!(a.create_acls(bindings).iter().all(|r| r.is_ok()));
        a
    }

    const H: &str = "127.0.0.1";

    #[test]
    fn nothing_is_allowed_without_acls_but_super_users_are() {
        let a = auth(vec![]);
        assert!(!a.authorize("User:alice", H, Read, &Resource::topic("t")));
        assert!(!a.authorize("User:alice", H, Describe, &Resource::cluster()));
        assert!(a.authorize("User:admin", H, Read, &Resource::topic("t")));
        assert!(a.authorize("User:admin", H, Alter, &Resource::cluster()));
    }

    #[test]
    fn allow_everyone_opens_only_resources_that_no_binding_covers() {
        use PatternType::{Literal, Prefixed};
        use ResourceType::{Cluster, Topic, TransactionalId};
        let open = |bindings: Vec<AclBinding>| {
            let a = Authorizer::new(Vec::<String>::new()).allow_everyone_if_no_acl_found(true);
            assert!(a.create_acls(bindings).iter().all(|r| r.is_ok()));
            a
        };
        let a = open(vec![]);
        assert!(a.authorize("User:alice", H, Read, &Resource::topic("t")));
        assert!(a.authorize("User:alice", H, Alter, &Resource::cluster()));
        assert!(a.authorize_any("User:alice", H, Write, Topic));
        // A Deny of everyone on one topic: that topic is refused, the
        // others stay open (librdkafka's 0115 and 0119 rely on it).
        let a = open(vec![deny(Topic, "secret", Literal, "User:*", All)]);
        assert!(!a.authorize("User:alice", H, Write, &Resource::topic("secret")));
        assert!(a.authorize("User:alice", H, Write, &Resource::topic("public")));
        // A binding of another principal, or for another operation, still
        // closes the resource: only its own Allow opens it.
        let a = open(vec![
            allow(Topic, "orders", Literal, "User:bob", Read),
            allow(Topic, "pay", Prefixed, "User:alice", Write),
            allow(Cluster, CLUSTER_NAME, Literal, "User:bob", Alter),
        ]);
        assert!(!a.authorize("User:alice", H, Read, &Resource::topic("orders")));
        assert!(a.authorize("User:bob", H, Read, &Resource::topic("orders")));
        assert!(!a.authorize("User:alice", H, Read, &Resource::topic("payments")));
        assert!(a.authorize("User:alice", H, Write, &Resource::topic("payments")));
        assert!(a.authorize("User:alice", H, Read, &Resource::topic("other")));
        assert!(!a.authorize("User:alice", H, Alter, &Resource::cluster()));
        // A wildcard binding covers every resource of its type.
        let a = open(vec![allow(
            TransactionalId,
            "*",
            Literal,
            "User:bob",
            Write,
        )]);
        let tx = Resource::transactional_id("t1");
        assert!(!a.authorize("User:alice", H, Write, &tx));
        assert!(!a.authorize_any("User:alice", H, Write, TransactionalId));
        assert!(a.authorize_any("User:alice", H, Write, Topic));
        // Off (Kafka's default), nothing opens without a binding.
        let closed = Authorizer::new(Vec::<String>::new());
        assert!(!closed.authorize("User:alice", H, Read, &Resource::topic("t")));
        assert!(!closed.authorize_any("User:alice", H, Write, Topic));
    }

    #[test]
    fn literal_patterns_match_the_exact_name_and_wildcard_matches_all() {
        let a = auth(vec![
            allow(
                ResourceType::Topic,
                "orders",
                PatternType::Literal,
                "User:alice",
                Read,
            ),
            allow(
                ResourceType::Topic,
                "*",
                PatternType::Literal,
                "User:bob",
                Write,
            ),
        ]);
        assert!(a.authorize("User:alice", H, Read, &Resource::topic("orders")));
        assert!(!a.authorize("User:alice", H, Read, &Resource::topic("orders2")));
        assert!(!a.authorize("User:alice", H, Read, &Resource::group("orders")));
        assert!(a.authorize("User:bob", H, Write, &Resource::topic("anything")));
        assert!(!a.authorize("User:bob", H, Read, &Resource::topic("anything")));
    }

    #[test]
    fn prefixed_patterns_match_names_starting_with_the_prefix() {
        let a = auth(vec![allow(
            ResourceType::Topic,
            "orders.",
            PatternType::Prefixed,
            "User:alice",
            Read,
        )]);
        assert!(a.authorize("User:alice", H, Read, &Resource::topic("orders.eu")));
        assert!(a.authorize("User:alice", H, Read, &Resource::topic("orders.")));
        assert!(!a.authorize("User:alice", H, Read, &Resource::topic("orders")));
        assert!(!a.authorize("User:alice", H, Read, &Resource::topic("x.orders.eu")));
        // A prefixed "*" is not a wildcard (and is refused at creation).
        assert!(
            a.create_acls(vec![allow(
                ResourceType::Topic,
                "*",
                PatternType::Prefixed,
                "User:bob",
                Read
            )])[0]
                .is_err()
        );
    }

    #[test]
    fn deny_wins_over_allow_whatever_the_pattern() {
        let a = auth(vec![
            allow(
                ResourceType::Topic,
                "*",
                PatternType::Literal,
                "User:*",
                All,
            ),
            deny(
                ResourceType::Topic,
                "secret.",
                PatternType::Prefixed,
                "User:alice",
                Read,
            ),
        ]);
        assert!(a.authorize("User:alice", H, Read, &Resource::topic("public")));
        assert!(!a.authorize("User:alice", H, Read, &Resource::topic("secret.x")));
        assert!(a.authorize("User:alice", H, Write, &Resource::topic("secret.x")));
        assert!(a.authorize("User:bob", H, Read, &Resource::topic("secret.x")));
        // Deny All refuses every operation, super users excepted.
        let b = auth(vec![
            allow(
                ResourceType::Group,
                "g",
                PatternType::Literal,
                "User:alice",
                Read,
            ),
            deny(
                ResourceType::Group,
                "*",
                PatternType::Literal,
                "User:*",
                All,
            ),
        ]);
        assert!(!b.authorize("User:alice", H, Read, &Resource::group("g")));
        assert!(b.authorize("User:admin", H, Read, &Resource::group("g")));
    }

    #[test]
    fn describe_is_implied_by_read_write_delete_alter_and_describe_configs_by_alter_configs() {
        for op in [Read, Write, Delete, Alter, All] {
            let a = auth(vec![allow(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                "User:u",
                op,
            )]);
            assert!(
                a.authorize("User:u", H, Describe, &Resource::topic("t")),
                "{op:?}"
            );
        }
        for op in [Create, DescribeConfigs, AlterConfigs] {
            let a = auth(vec![allow(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                "User:u",
                op,
            )]);
            assert!(
                !a.authorize("User:u", H, Describe, &Resource::topic("t")),
                "{op:?}"
            );
        }
        let a = auth(vec![allow(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:u",
            AlterConfigs,
        )]);
        assert!(a.authorize("User:u", H, DescribeConfigs, &Resource::topic("t")));
        // Implication goes one way only.
        let b = auth(vec![allow(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:u",
            Describe,
        )]);
        assert!(!b.authorize("User:u", H, Read, &Resource::topic("t")));
        // A deny on Read does not deny Describe implied by an allowed Write.
        let c = auth(vec![
            allow(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                "User:u",
                Write,
            ),
            deny(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                "User:u",
                Read,
            ),
        ]);
        assert!(c.authorize("User:u", H, Describe, &Resource::topic("t")));
        assert!(!c.authorize("User:u", H, Read, &Resource::topic("t")));
    }

    #[test]
    fn hosts_are_matched() {
        let mut b = allow(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:u",
            Read,
        );
        b.host = "10.0.0.1".into();
        let a = auth(vec![b]);
        assert!(a.authorize("User:u", "10.0.0.1", Read, &Resource::topic("t")));
        assert!(!a.authorize("User:u", H, Read, &Resource::topic("t")));
    }

    #[test]
    fn authorize_any_needs_an_allow_not_covered_by_a_deny() {
        let a = auth(vec![allow(
            ResourceType::Topic,
            "out.",
            PatternType::Prefixed,
            "User:u",
            Write,
        )]);
        assert!(a.authorize_any("User:u", H, Write, ResourceType::Topic));
        assert!(!a.authorize_any("User:u", H, Read, ResourceType::Topic));
        assert!(!a.authorize_any("User:v", H, Write, ResourceType::Topic));
        a.create_acls(vec![deny(
            ResourceType::Topic,
            "out",
            PatternType::Prefixed,
            "User:u",
            Write,
        )]);
        assert!(!a.authorize_any("User:u", H, Write, ResourceType::Topic));
    }

    #[test]
    fn invalid_bindings_are_refused_one_by_one() {
        let a = auth(vec![]);
        let r = a.create_acls(vec![
            allow(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                "alice",
                Read,
            ),
            allow(
                ResourceType::Cluster,
                "other",
                PatternType::Literal,
                "User:a",
                Alter,
            ),
            allow(
                ResourceType::Group,
                "g",
                PatternType::Literal,
                "User:a",
                Write,
            ),
            allow(
                ResourceType::TransactionalId,
                "tx",
                PatternType::Literal,
                "User:a",
                Write,
            ),
            allow(
                ResourceType::Cluster,
                CLUSTER_NAME,
                PatternType::Literal,
                "User:a",
                IdempotentWrite,
            ),
        ]);
        assert!(r[0].is_err() && r[1].is_err() && r[2].is_err());
        assert!(r[3].is_ok() && r[4].is_ok());
        assert_eq!(a.len(), 2);
    }

    #[test]
    fn filters_select_by_any_match_and_exact_pattern() {
        let a = auth(vec![
            allow(
                ResourceType::Topic,
                "orders",
                PatternType::Literal,
                "User:a",
                Read,
            ),
            allow(
                ResourceType::Topic,
                "ord",
                PatternType::Prefixed,
                "User:a",
                Read,
            ),
            allow(
                ResourceType::Topic,
                "*",
                PatternType::Literal,
                "User:b",
                Write,
            ),
            allow(
                ResourceType::Group,
                "orders",
                PatternType::Literal,
                "User:a",
                Read,
            ),
        ]);
        let mut f = AclBindingFilter::any();
        assert_eq!(a.describe_acls(&f).len(), 4);
        f.resource_type = Some(ResourceType::Topic);
        f.name = Some("orders".into());
        assert_eq!(a.describe_acls(&f).len(), 1);
        f.pattern = PatternFilter::Match;
        assert_eq!(a.describe_acls(&f).len(), 3);
        f.pattern = PatternFilter::Is(PatternType::Prefixed);
        assert_eq!(a.describe_acls(&f).len(), 0);
        f.name = Some("ord".into());
        assert_eq!(a.describe_acls(&f).len(), 1);
        let mut g = AclBindingFilter::any();
        g.principal = Some("User:b".into());
        assert_eq!(a.describe_acls(&g).len(), 1);
        g.principal = None;
        g.operation = Some(Read);
        g.permission = Some(Permission::Allow);
        assert_eq!(a.describe_acls(&g).len(), 3);
    }

    #[test]
    fn delete_reports_per_filter_and_revokes() {
        let a = auth(vec![
            allow(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                "User:a",
                Read,
            ),
            allow(
                ResourceType::Topic,
                "u",
                PatternType::Literal,
                "User:a",
                Read,
            ),
        ]);
        assert!(a.authorize("User:a", H, Read, &Resource::topic("t")));
        let mut f1 = AclBindingFilter::any();
        f1.name = Some("t".into());
        let out = a.delete_acls(&[f1.clone(), f1]).unwrap();
        assert_eq!(out[0].len(), 1);
        assert!(out[1].is_empty());
        assert!(!a.authorize("User:a", H, Read, &Resource::topic("t")));
        assert!(a.authorize("User:a", H, Read, &Resource::topic("u")));
    }

    #[test]
    fn acls_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acls.json");
        {
            let a = Authorizer::open(&path, []).unwrap();
            a.create_acls(vec![
                allow(
                    ResourceType::Topic,
                    "t",
                    PatternType::Literal,
                    "User:a",
                    Read,
                ),
                deny(
                    ResourceType::Topic,
                    "t",
                    PatternType::Literal,
                    "User:b",
                    Read,
                ),
            ]);
            let mut f = AclBindingFilter::any();
            f.principal = Some("User:b".into());
            a.delete_acls(&[f]).unwrap();
        }
        let a = Authorizer::open(&path, []).unwrap();
        assert_eq!(a.len(), 1);
        assert!(a.authorize("User:a", H, Read, &Resource::topic("t")));
        // A corrupt file is an error, not an empty ACL set (fail closed).
        std::fs::write(&path, b"{not json").unwrap();
        assert!(Authorizer::open(&path, []).is_err());
    }

    #[test]
    fn authorized_operations_bitfield_uses_protocol_codes() {
        assert_eq!(operations_bitfield([Read]), 1 << 3);
        assert_eq!(operations_bitfield([Read, Describe]), (1 << 3) | (1 << 8));
        assert_eq!(operations_bitfield([]), 0);
        for rt in [
            ResourceType::Topic,
            ResourceType::Group,
            ResourceType::Cluster,
            ResourceType::TransactionalId,
        ] {
            assert!(!rt.supported_operations().contains(&All));
        }
        assert!(
            ResourceType::Cluster
                .supported_operations()
                .contains(&IdempotentWrite)
        );
        assert!(!ResourceType::Group.supported_operations().contains(&Write));
    }

    #[test]
    fn codes_round_trip() {
        for c in 2..=12 {
            assert_eq!(AclOperation::from_code(c).unwrap().code(), c);
        }
        for c in 2..=5 {
            assert_eq!(ResourceType::from_code(c).unwrap().code(), c);
        }
        assert_eq!(PatternType::from_code(3), Some(PatternType::Literal));
        assert_eq!(PatternType::from_code(4), Some(PatternType::Prefixed));
        assert_eq!(Permission::from_code(2), Some(Permission::Deny));
        assert_eq!(Permission::from_code(3), Some(Permission::Allow));
        assert_eq!(AclOperation::from_code(1), None);
    }
}
