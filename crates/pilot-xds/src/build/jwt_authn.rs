//! End-user authentication: the RequestAuthentications that apply to a
//! workload (compiled, [`pilot_routing::RequestAuthentications`]), as
//! Envoy's `envoy.filters.http.jwt_authn` filter on its inbound HTTP
//! listeners, and the clusters through which Envoy fetches remote JWKS.
//!
//! The filter goes before the authorization filters (RBAC, ext_authz):
//! it is put before the first of them, by name. Each JWT rule of each
//! policy applying is one provider, named `ns[NS]-policy[NAME]-rule[I]`;
//! the one requirement, for every request, is any provider or no token at
//! all (Envoy's `allow_missing`), as Istio configures it: a request with a
//! token no provider verifies (bad signature, expired, unknown issuer,
//! audience not accepted) is refused with 401, a request without a token
//! passes, and requiring a token is an AuthorizationPolicy's
//! (`requestPrincipals`). CORS preflight requests pass.
//!
//! A verified token's payload is written into the request's dynamic
//! metadata: filter [`JWT_AUTHN_FILTER`], key [`JWT_PAYLOAD_KEY`], the
//! claims as a struct. The RBAC filters read the principal (`iss/sub`)
//! and claims from there (`rbac/jwt.rs`). Per rule, `forwardOriginalToken`
//! keeps the token in the request (it is removed otherwise),
//! `outputPayloadToHeader` passes the payload on in a header,
//! `outputClaimToHeaders` claims in headers; the claims Istio treats as
//! space-delimited (`scope`, `permission`) are lists in the metadata.
//!
//! Edge proxies (ingress and router gateways) get the filter on every
//! HTTP connection manager of their listeners, for the policies that
//! apply to their namespace and labels; authentication only, since
//! AuthorizationPolicy is not generated for gateways.
//!
//! Keys: an inline `jwks` is the provider's `local_jwks`; a `jwksUri` is
//! fetched by Envoy (`remote_jwks`, timeout the rule's or 5s) through the
//! cluster `jwks|PORT||HOST` pilot generates for the URI's host and port:
//! STATIC for an IP address, STRICT_DNS for a name; for `https`, TLS with
//! the host as SNI, the server's certificate verified with the system's
//! trust bundle and required to name the host.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, HttpUri, TransportSocket, data_source, http_uri, transport_socket,
};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{RouteMatch, route_match};
use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::{
    JwtAuthentication, JwtClaimToHeader, JwtHeader, JwtProvider, JwtRequirement, JwtRequirementOrList,
    RemoteJwks, RequirementRule, jwt_provider, jwt_requirement, requirement_rule,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, SubjectAltNameMatcher, UpstreamTlsContext,
    common_tls_context, subject_alt_name_matcher,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::{Any, Empty};
use pilot_model::Protocol;
use pilot_routing::RoutingModel;
use pilot_routing::request_authentication::{JwksUri, JwtPolicy, JwtRule};
use prost::{Message, Name};

use super::cluster::{dns_cluster, static_cluster};
use super::upstream_tls::SYSTEM_CA_BUNDLE;
use super::util::{any, duration};
use crate::{Proxy, ProxyType};

/// The JWT authentication filter's name.
pub const JWT_AUTHN_FILTER: &str = "envoy.filters.http.jwt_authn";
/// The key, under [`JWT_AUTHN_FILTER`] in a request's dynamic metadata,
/// of the verified token's payload.
pub const JWT_PAYLOAD_KEY: &str = "payload";

/// The filters the JWT filter goes before: authorization's.
const AUTHORIZATION_FILTERS: [&str; 2] = ["envoy.filters.http.rbac", "envoy.filters.http.ext_authz"];
const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
/// Envoy's JWKS fetch timeout when the rule gives none.
const DEFAULT_JWKS_TIMEOUT: Duration = Duration::from_secs(5);
/// The claims whose space-separated values are lists (Istio's).
const SPACE_DELIMITED_CLAIMS: [&str; 2] = ["scope", "permission"];

/// Puts the JWT filter of `policies` into `chain`'s HTTP connection
/// manager, before its authorization filters; nothing for a TCP chain or
/// when no policy has a rule.
pub(crate) fn authenticate(chain: &mut FilterChain, policies: &[&JwtPolicy]) {
    let providers = providers(policies);
    if providers.is_empty() {
        return;
    }
    let Some(first) = chain.filters.first_mut() else {
        return;
    };
    if first.name != HTTP_CONNECTION_MANAGER {
        return;
    }
    let Some(filter::ConfigType::TypedConfig(config)) = &mut first.config_type else {
        return;
    };
    let Ok(mut manager) = HttpConnectionManager::decode(config.value.as_slice()) else {
        return;
    };
    let at = manager
        .http_filters
        .iter()
        .position(|f| AUTHORIZATION_FILTERS.contains(&f.name.as_str()))
        .unwrap_or_else(|| super::listeners::front(&manager.http_filters));
    manager.http_filters.insert(
        at,
        HttpFilter {
            name: JWT_AUTHN_FILTER.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(filter_config(&providers))),
            ..Default::default()
        },
    );
    config.value = manager.encode_to_vec();
}

/// The RequestAuthentications that apply to an edge proxy (an ingress or
/// router): by its namespace (its domain's first label) and labels, as a
/// `targetRef` to a Kubernetes Gateway selects its pods. None for a
/// sidecar (its inbound listeners get theirs, `rbac::Authorization`).
pub(crate) fn edge_policies<'a>(proxy: &Proxy, model: &'a RoutingModel) -> Vec<&'a JwtPolicy> {
    if proxy.proxy_type == ProxyType::Sidecar {
        return Vec::new();
    }
    let namespace = proxy.domain.split('.').next().unwrap_or_default();
    model.request_authentication().applying(namespace, &proxy.labels)
}

/// Puts the JWT filter of the RequestAuthentications applying to the edge
/// `proxy` into every HTTP connection manager of `listeners`.
pub(crate) fn authenticate_edge(proxy: &Proxy, model: &RoutingModel, listeners: &mut [Listener]) {
    let policies = edge_policies(proxy, model);
    if policies.is_empty() {
        return;
    }
    for listener in listeners {
        for chain in listener
            .filter_chains
            .iter_mut()
            .chain(listener.default_filter_chain.as_mut())
        {
            authenticate(chain, &policies);
        }
    }
}

/// The clusters the remote JWKS of `policies` are fetched through, one
/// per host and port, in name order.
pub(crate) fn clusters<'a>(policies: impl IntoIterator<Item = &'a JwtPolicy>) -> Vec<Cluster> {
    let mut out = BTreeMap::new();
    for policy in policies {
        for rule in &policy.rules {
            if let Some(uri) = remote(rule) {
                out.entry(cluster_name(&uri))
                    .or_insert_with(|| jwks_cluster(&uri));
            }
        }
    }
    out.into_values().collect()
}

/// The URI of a rule's keys when Envoy fetches them (no inline `jwks`).
fn remote(rule: &JwtRule) -> Option<JwksUri> {
    if !rule.jwks.is_empty() || rule.jwks_uri.is_empty() {
        return None;
    }
    JwksUri::parse(&rule.jwks_uri).ok()
}

/// The cluster name of a JWKS URI's host and port.
pub(crate) fn cluster_name(uri: &JwksUri) -> String {
    format!("jwks|{}||{}", uri.port, uri.host)
}

fn jwks_cluster(uri: &JwksUri) -> Cluster {
    let name = cluster_name(uri);
    let mut cluster = if uri.host_is_ip() {
        static_cluster(&name, &uri.host, uri.port)
    } else {
        dns_cluster(&name, &uri.host, uri.port, Protocol::Http)
    };
    if uri.tls {
        let san = if uri.host_is_ip() {
            subject_alt_name_matcher::SanType::IpAddress
        } else {
            subject_alt_name_matcher::SanType::Dns
        };
        let context = UpstreamTlsContext {
            sni: if uri.host_is_ip() {
                String::new()
            } else {
                uri.host.clone()
            },
            common_tls_context: Some(CommonTlsContext {
                validation_context_type: Some(common_tls_context::ValidationContextType::ValidationContext(
                    CertificateValidationContext {
                        trusted_ca: Some(DataSource {
                            specifier: Some(data_source::Specifier::Filename(SYSTEM_CA_BUNDLE.into())),
                            ..Default::default()
                        }),
                        match_typed_subject_alt_names: vec![SubjectAltNameMatcher {
                            san_type: san as i32,
                            matcher: Some(StringMatcher {
                                match_pattern: Some(string_matcher::MatchPattern::Exact(uri.host.clone())),
                                ignore_case: false,
                            }),
                            ..Default::default()
                        }],
                        ..Default::default()
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        };
        cluster.transport_socket = Some(TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
        });
    }
    cluster
}

/// The providers of `policies`, by name.
fn providers(policies: &[&JwtPolicy]) -> BTreeMap<String, JwtProvider> {
    let mut out = BTreeMap::new();
    for policy in policies {
        for (index, rule) in policy.rules.iter().enumerate() {
            let name = format!("ns[{}]-policy[{}]-rule[{index}]", policy.namespace, policy.name);
            out.insert(name, provider(rule));
        }
    }
    out
}

fn provider(rule: &JwtRule) -> JwtProvider {
    let jwks = if !rule.jwks.is_empty() {
        Some(jwt_provider::JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(data_source::Specifier::InlineString(rule.jwks.clone())),
            ..Default::default()
        }))
    } else {
        remote(rule).map(|uri| {
            jwt_provider::JwksSourceSpecifier::RemoteJwks(RemoteJwks {
                http_uri: Some(HttpUri {
                    uri: rule.jwks_uri.clone(),
                    timeout: Some(duration(
                        rule.timeout.map(|t| t.as_std()).unwrap_or(DEFAULT_JWKS_TIMEOUT),
                    )),
                    http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(cluster_name(&uri))),
                }),
                ..Default::default()
            })
        })
    };
    JwtProvider {
        issuer: rule.issuer.clone(),
        audiences: rule.audiences.clone(),
        forward: rule.forward_original_token,
        from_headers: rule
            .from_headers
            .iter()
            .map(|h| JwtHeader {
                name: h.name.clone(),
                value_prefix: h.prefix.clone(),
            })
            .collect(),
        from_params: rule.from_params.clone(),
        from_cookies: rule.from_cookies.clone(),
        forward_payload_header: rule.output_payload_to_header.clone(),
        payload_in_metadata: JWT_PAYLOAD_KEY.into(),
        normalize_payload_in_metadata: Some(jwt_provider::NormalizePayload {
            space_delimited_claims: SPACE_DELIMITED_CLAIMS
                .iter()
                .map(|c| c.to_string())
                .chain(rule.space_delimited_claims.iter().cloned())
                .collect(),
        }),
        claim_to_headers: rule
            .output_claim_to_headers
            .iter()
            .map(|c| JwtClaimToHeader {
                header_name: c.header.clone(),
                claim_name: c.claim.clone(),
                ..Default::default()
            })
            .collect(),
        jwks_source_specifier: jwks,
        ..Default::default()
    }
}

/// The filter's configuration: the providers, and for every path any of
/// them or no token. The providers map is encoded one entry at a time, in
/// name order, so equal configurations give equal bytes (the generated
/// type keeps them in a `HashMap`; protobuf merges the entries).
fn filter_config(providers: &BTreeMap<String, JwtProvider>) -> Any {
    let mut requirements: Vec<JwtRequirement> = providers
        .keys()
        .map(|name| JwtRequirement {
            requires_type: Some(jwt_requirement::RequiresType::ProviderName(name.clone())),
        })
        .collect();
    requirements.push(JwtRequirement {
        requires_type: Some(jwt_requirement::RequiresType::AllowMissing(Empty {})),
    });
    let mut value = JwtAuthentication {
        rules: vec![RequirementRule {
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            requirement_type: Some(requirement_rule::RequirementType::Requires(JwtRequirement {
                requires_type: Some(jwt_requirement::RequiresType::RequiresAny(JwtRequirementOrList {
                    requirements,
                })),
            })),
        }],
        bypass_cors_preflight: true,
        ..Default::default()
    }
    .encode_to_vec();
    for (name, provider) in providers {
        value.extend(
            JwtAuthentication {
                providers: HashMap::from([(name.clone(), provider.clone())]),
                ..Default::default()
            }
            .encode_to_vec(),
        );
    }
    Any {
        type_url: JwtAuthentication::type_url(),
        value,
    }
}
