//! `BackendTLSPolicy`: how a gateway connects over TLS to backends (the
//! hostname to send and verify, the certificate authorities to trust).

use std::collections::BTreeMap;

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at, index};
use super::common::LocalObjectReference;
use super::patterns;
#[cfg(feature = "schema")]
use super::shapes;

/// TLS to the targeted backends.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["targetRefs", "validation"])))]
pub struct BackendTlsPolicy {
    /// The backends (1 to 16 references, required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub target_refs: Vec<PolicyTargetReference>,
    /// How the backend's certificate is verified (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<BackendTlsValidation>,
    /// Implementation-specific TLS options (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = 16), extend("additionalProperties" = {"type": "string", "maxLength": 4096})))]
    pub options: Option<BTreeMap<String, String>>,
}

/// A reference to a policy's target in the policy's namespace, optionally
/// to one section of it (a Service's port name).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["group", "kind", "name"])))]
pub struct PolicyTargetReference {
    /// The target's group (required; `""` is the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The target's kind (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: String,
    /// The target's name (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// A section of the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::SUBDOMAIN))
    )]
    pub section_name: Option<String>,
}

/// How the backend's certificate is verified.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["hostname"])))]
pub struct BackendTlsValidation {
    /// Objects holding the CA certificates to trust (at most 8); exactly
    /// one of this and `wellKnownCACertificates`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 8), extend("x-kubernetes-list-type" = "atomic")))]
    pub ca_certificate_refs: Option<Vec<LocalObjectReference>>,
    /// A well-known set of CA certificates (`System`, or a
    /// domain-prefixed name).
    #[serde(
        default,
        rename = "wellKnownCACertificates",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253), pattern(r"^(System|([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]))$")))]
    pub well_known_ca_certificates: Option<String>,
    /// The hostname to send as SNI and, without subject alternative
    /// names, to verify (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::SUBDOMAIN))
    )]
    pub hostname: String,
    /// Names the certificate must carry instead of `hostname` (at most 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 5), extend("x-kubernetes-list-type" = "atomic")))]
    pub subject_alt_names: Option<Vec<SubjectAltName>>,
}

/// One subject alternative name.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["type"])))]
pub struct SubjectAltName {
    /// Which of `hostname` and `uri` this name is (required).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<SubjectAltNameType>,
    /// A DNS name, with an optional leading wildcard label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::HOSTNAME))
    )]
    pub hostname: Option<String>,
    /// A URI (such as a SPIFFE ID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(min = 1, max = 253),
            pattern(r#"^(([^:/?#]+):)(//([^/?#]*))([^?#]*)(\?([^#]*))?(#(.*))?"#)
        )
    )]
    pub uri: Option<String>,
}

/// The kinds of subject alternative name.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SubjectAltNameType {
    /// A DNS name.
    Hostname,
    /// A URI.
    #[serde(rename = "URI")]
    Uri,
}

pub(crate) fn validate(policy: &BackendTlsPolicy, errors: &mut FieldErrors) {
    let path = "spec.targetRefs";
    checks::items(errors, path, policy.target_refs.len(), 1, 16);
    for (i, target) in policy.target_refs.iter().enumerate() {
        let path = index(path, i);
        super::common::check_group_kind_name(
            errors,
            &path,
            target.group.as_deref(),
            &target.kind,
            &target.name,
        );
        if let Some(section) = &target.section_name {
            checks::section_name(errors, &at(&path, "sectionName"), section);
        }
    }
    check_targets(errors, path, &policy.target_refs);
    match &policy.validation {
        Some(validation) => check_validation(errors, "spec.validation", validation),
        None => errors.push("spec.validation", "is required"),
    }
    checks::options(errors, "spec.options", policy.options.as_ref(), 16);
}

/// Several references to one target each name a section, and no two the
/// same one.
fn check_targets(errors: &mut FieldErrors, path: &str, targets: &[PolicyTargetReference]) {
    let same = |a: &PolicyTargetReference, b: &PolicyTargetReference| {
        a.group == b.group && a.kind == b.kind && a.name == b.name
    };
    let section = |t: &PolicyTargetReference| t.section_name.clone().unwrap_or_default();
    let (mut unspecific, mut duplicate) = (false, false);
    for (i, t1) in targets.iter().enumerate() {
        for t2 in targets[i + 1..].iter().filter(|t2| same(t1, t2)) {
            unspecific |= section(t1).is_empty() != section(t2).is_empty();
            duplicate |= section(t1) == section(t2);
        }
    }
    if unspecific {
        errors.push(
            path,
            "references to the same target must all name a sectionName or none of them",
        );
    }
    if duplicate {
        errors.push(
            path,
            "two references to the same target name the same sectionName (or none): each must name its own",
        );
    }
}

fn check_validation(errors: &mut FieldErrors, path: &str, validation: &BackendTlsValidation) {
    let refs = at(path, "caCertificateRefs");
    checks::items(
        errors,
        &refs,
        checks::list(&validation.ca_certificate_refs).len(),
        0,
        8,
    );
    for (i, reference) in checks::list(&validation.ca_certificate_refs).iter().enumerate() {
        reference.check(errors, &index(&refs, i));
    }
    let well_known = validation.well_known_ca_certificates.as_deref().unwrap_or("");
    if let Some(value) = &validation.well_known_ca_certificates {
        let at_value = at(path, "wellKnownCACertificates");
        checks::length(errors, &at_value, value, 1, 253);
        if !value.is_empty() && !patterns::is_well_known_ca(value) {
            errors.push(
                at_value,
                format!("{value:?} is not a well-known CA set: \"System\" or a domain-prefixed name (example.com/name)"),
            );
        }
    }
    match (
        checks::list(&validation.ca_certificate_refs).is_empty(),
        well_known.is_empty(),
    ) {
        (false, false) => errors.push(
            path,
            "caCertificateRefs and wellKnownCACertificates exclude each other: give only one",
        ),
        (true, true) => errors.push(
            path,
            "needs the CA certificates to trust: caCertificateRefs or wellKnownCACertificates",
        ),
        _ => {}
    }
    checks::precise_hostname(errors, &at(path, "hostname"), &validation.hostname);
    let sans = at(path, "subjectAltNames");
    checks::items(
        errors,
        &sans,
        checks::list(&validation.subject_alt_names).len(),
        0,
        5,
    );
    for (i, san) in checks::list(&validation.subject_alt_names).iter().enumerate() {
        check_san(errors, &index(&sans, i), san);
    }
}

fn check_san(errors: &mut FieldErrors, path: &str, san: &SubjectAltName) {
    checks::required(errors, &at(path, "type"), san.kind.as_ref());
    if let Some(host) = &san.hostname {
        checks::hostname(errors, &at(path, "hostname"), host);
    }
    if let Some(uri) = &san.uri {
        let at_uri = at(path, "uri");
        checks::length(errors, &at_uri, uri, 1, 253);
        if !uri.is_empty() && !patterns::is_san_uri(uri) {
            errors.push(
                at_uri,
                format!(
                    "{uri:?} is not a URI: a scheme, \"://\", then the rest (spiffe://trust.domain/path)"
                ),
            );
        }
    }
    let Some(kind) = san.kind else { return };
    let host = san.hostname.as_deref().unwrap_or("");
    let uri = san.uri.as_deref().unwrap_or("");
    match kind {
        SubjectAltNameType::Hostname if host.is_empty() => errors.push(
            path,
            "a subject alternative name of type Hostname needs a hostname",
        ),
        SubjectAltNameType::Uri if uri.is_empty() => {
            errors.push(path, "a subject alternative name of type URI needs a uri")
        }
        _ => {}
    }
    if kind != SubjectAltNameType::Hostname && !host.is_empty() {
        errors.push(
            path,
            "only a subject alternative name of type Hostname may have a hostname",
        );
    }
    if kind != SubjectAltNameType::Uri && !uri.is_empty() {
        errors.push(path, "only a subject alternative name of type URI may have a uri");
    }
}
