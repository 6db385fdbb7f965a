//! CreateAcls, DescribeAcls, DeleteAcls over the broker's [`Authorizer`].
//!
//! CreateAcls and DeleteAcls need Alter on the cluster, DescribeAcls needs
//! Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). With
//! ACLs off the broker answers SECURITY_DISABLED, as Kafka without an
//! authorizer.
//!
//! [`Authorizer`]: crate::acl::Authorizer

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{
    AclBinding, AclBindingFilter, AclOperation, PatternFilter, PatternType, Permission, Resource,
    ResourcePattern, ResourceType,
};
use crate::core::BrokerCore;
use sharestream_protocol::ErrorCode;

fn msg(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

/// Protocol codes: ANY = 1 for every enum, MATCH = 2 for pattern types.
const ANY: i8 = 1;
const MATCH: i8 = 2;

/// Turns a filter of the protocol into ours; `Err` for an UNKNOWN code.
fn filter(
    rt: i8,
    name: Option<&StrBytes>,
    pt: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    op: i8,
    perm: i8,
) -> Result<AclBindingFilter, String> {
    let opt = |code: i8, parse: Option<()>| -> Result<bool, String> {
        if code == ANY {
            Ok(false)
        } else if parse.is_some() {
            Ok(true)
        } else {
            Err(format!("unknown code {code} in the filter"))
        }
    };
    let resource_type = if opt(rt, ResourceType::from_code(rt).map(|_| ()))? {
        ResourceType::from_code(rt)
    } else {
        None
    };
    let pattern = match pt {
        ANY => PatternFilter::Any,
        MATCH => PatternFilter::Match,
        c => PatternFilter::Is(PatternType::from_code(c).ok_or("unknown pattern type")?),
    };
    let operation = if opt(op, AclOperation::from_code(op).map(|_| ()))? {
        AclOperation::from_code(op)
    } else {
        None
    };
    let permission = if opt(perm, Permission::from_code(perm).map(|_| ()))? {
        Permission::from_code(perm)
    } else {
        None
    };
    Ok(AclBindingFilter {
        resource_type,
        name: name.map(|n| n.to_string()),
        pattern,
        principal: principal.map(|n| n.to_string()),
        host: host.map(|n| n.to_string()),
        operation,
        permission,
    })
}

/// `None` if the request may go on, else the error to answer.
fn gate(core: &BrokerCore, ctx: &RequestContext, op: AclOperation) -> Option<ErrorCode> {
    if core.security().authorizer().is_none() {
        return Some(ErrorCode::SECURITY_DISABLED);
    }
    (!ctx.allowed(core, op, &Resource::cluster()))
        .then_some(ErrorCode::CLUSTER_AUTHORIZATION_FAILED)
}

pub(crate) fn create_acls(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: CreateAclsRequest,
) -> CreateAclsResponse {
    if let Some(code) = gate(core, ctx, AclOperation::Alter) {
        let results = req
            .creations
            .iter()
            .map(|_| {
                AclCreationResult::default()
                    .with_error_code(code.0)
                    .with_error_message(msg(code.to_string()))
            })
            .collect();
        return CreateAclsResponse::default().with_results(results);
    }
    let auth = core.security().authorizer().expect("gated above");
    let mut parsed: Vec<Result<AclBinding, String>> = Vec::new();
    for c in &req.creations {
        let b = (|| {
            Ok(AclBinding {
                pattern: ResourcePattern {
                    resource_type: ResourceType::from_code(c.resource_type)
                        .ok_or("unknown resource type")?,
                    name: c.resource_name.to_string(),
                    pattern_type: PatternType::from_code(c.resource_pattern_type)
                        .ok_or("the pattern type must be LITERAL or PREFIXED")?,
                },
                principal: c.principal.to_string(),
                host: c.host.to_string(),
                operation: AclOperation::from_code(c.operation).ok_or("unknown operation")?,
                permission: Permission::from_code(c.permission_type)
                    .ok_or("unknown permission type")?,
            })
        })()
        .map_err(|e: &str| e.to_string());
        parsed.push(b);
    }
    let valid: Vec<AclBinding> = parsed.iter().filter_map(|b| b.clone().ok()).collect();
    let mut stored = auth.create_acls(valid).into_iter();
    let results = parsed
        .into_iter()
        .map(|p| {
            let r = match p {
                Err(e) => Err((ErrorCode::INVALID_REQUEST, e)),
                Ok(_) => match stored.next() {
                    Some(Ok(())) => Ok(()),
                    Some(Err(crate::acl::AclError::Invalid(e))) => {
                        Err((ErrorCode::INVALID_REQUEST, e))
                    }
                    Some(Err(e)) => Err((ErrorCode::UNKNOWN_SERVER_ERROR, e.to_string())),
                    None => Err((ErrorCode::UNKNOWN_SERVER_ERROR, "lost result".into())),
                },
            };
            match r {
                Ok(()) => AclCreationResult::default(),
                Err((code, e)) => AclCreationResult::default()
                    .with_error_code(code.0)
                    .with_error_message(msg(e)),
            }
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub(crate) fn describe_acls(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeAclsRequest,
) -> DescribeAclsResponse {
    if let Some(code) = gate(core, ctx, AclOperation::Describe) {
        return DescribeAclsResponse::default()
            .with_error_code(code.0)
            .with_error_message(msg(code.to_string()));
    }
    let f = match filter(
        req.resource_type_filter,
        req.resource_name_filter.as_ref(),
        req.pattern_type_filter,
        req.principal_filter.as_ref(),
        req.host_filter.as_ref(),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(e) => {
            return DescribeAclsResponse::default()
                .with_error_code(ErrorCode::INVALID_REQUEST.0)
                .with_error_message(msg(e));
        }
    };
    let acls = core
        .security()
        .authorizer()
        .expect("gated above")
        .describe_acls(&f);
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for b in acls {
        let d = AclDescription::default()
            .with_principal(StrBytes::from_string(b.principal.clone()))
            .with_host(StrBytes::from_string(b.host.clone()))
            .with_operation(b.operation.code())
            .with_permission_type(b.permission.code());
        let p = &b.pattern;
        match resources.last_mut() {
            Some(r)
                if r.resource_type == p.resource_type.code()
                    && r.resource_name.as_str() == p.name
                    && r.pattern_type == p.pattern_type.code() =>
            {
                r.acls.push(d)
            }
            _ => resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(p.resource_type.code())
                    .with_resource_name(StrBytes::from_string(p.name.clone()))
                    .with_pattern_type(p.pattern_type.code())
                    .with_acls(vec![d]),
            ),
        }
    }
    DescribeAclsResponse::default().with_resources(resources)
}

pub(crate) fn delete_acls(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let each_error = |filters: &[DeleteAclsFilter], code: ErrorCode, m: String| {
        DeleteAclsResponse::default().with_filter_results(
            filters
                .iter()
                .map(|_| {
                    DeleteAclsFilterResult::default()
                        .with_error_code(code.0)
                        .with_error_message(msg(m.clone()))
                })
                .collect(),
        )
    };
    if let Some(code) = gate(core, ctx, AclOperation::Alter) {
        return each_error(&req.filters, code, code.to_string());
    }
    let mut filters = Vec::with_capacity(req.filters.len());
    for f in &req.filters {
        match filter(
            f.resource_type_filter,
            f.resource_name_filter.as_ref(),
            f.pattern_type_filter,
            f.principal_filter.as_ref(),
            f.host_filter.as_ref(),
            f.operation,
            f.permission_type,
        ) {
            Ok(x) => filters.push(x),
            Err(e) => return each_error(&req.filters, ErrorCode::INVALID_REQUEST, e),
        }
    }
    match core
        .security()
        .authorizer()
        .expect("gated above")
        .delete_acls(&filters)
    {
        Err(e) => each_error(&req.filters, ErrorCode::UNKNOWN_SERVER_ERROR, e.to_string()),
        Ok(deleted) => DeleteAclsResponse::default().with_filter_results(
            deleted
                .into_iter()
                .map(|bs| {
                    DeleteAclsFilterResult::default().with_matching_acls(
                        bs.into_iter()
                            .map(|b| {
                                DeleteAclsMatchingAcl::default()
                                    .with_resource_type(b.pattern.resource_type.code())
                                    .with_resource_name(StrBytes::from_string(b.pattern.name))
                                    .with_pattern_type(b.pattern.pattern_type.code())
                                    .with_principal(StrBytes::from_string(b.principal))
                                    .with_host(StrBytes::from_string(b.host))
                                    .with_operation(b.operation.code())
                                    .with_permission_type(b.permission.code())
                            })
                            .collect(),
                    )
                })
                .collect(),
        ),
    }
}
