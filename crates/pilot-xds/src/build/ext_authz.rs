//! An extension provider of the mesh config (`extensionProviders`) as
//! Envoy's external authorization filters, as Istio's authz builder makes
//! them: `envoy.filters.http.ext_authz` for both kinds (an HTTP service,
//! or the gRPC `envoy.service.auth.v3.Authorization` service), and
//! `envoy.filters.network.ext_authz` for a gRPC provider on a TCP port
//! (Envoy's network filter speaks gRPC only, so an HTTP provider has no
//! TCP filter, and CUSTOM policies naming it do nothing on TCP ports, as
//! in Istio).
//!
//! The provider's service is reached through its outbound cluster
//! (`outbound|PORT||HOST`), which the proxy has when the service is in the
//! registry and visible to it. Each filter is consulted only when the
//! RBAC filter before it (`rbac/custom.rs`) wrote, in its shadow rules'
//! dynamic metadata, the id of a CUSTOM rule of this provider
//! (`istio_ext_authz_shadow_effective_policy_id` starting with
//! `istio-ext-authz-PROVIDER-`): `filter_enabled_metadata`.

use envoy_types::pb::envoy::config::core::v3::{
    ApiVersion, GrpcService, HeaderValue, HttpUri, grpc_service, http_uri,
};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::{
    AuthorizationRequest, AuthorizationResponse, BufferSettings, ExtAuthz as HttpExtAuthz, HttpService,
    ext_authz,
};
use envoy_types::pb::envoy::extensions::filters::network::ext_authz::v3::ExtAuthz as NetworkExtAuthz;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListStringMatcher, MetadataMatcher, StringMatcher, ValueMatcher, metadata_matcher, string_matcher,
    value_matcher,
};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;
use envoy_types::pb::google::protobuf::{Any, Duration as ProtoDuration};
use pilot_model::Labels;
use pilot_routing::{EnvoyExtAuthzGrpc, EnvoyExtAuthzHttp, ExtensionProvider, ProviderKind, RequestBody};
use prost::{Message, Name};

/// The HTTP external authorization filter's name.
pub const HTTP_EXT_AUTHZ_FILTER: &str = "envoy.filters.http.ext_authz";
/// The network external authorization filter's name.
pub const NETWORK_EXT_AUTHZ_FILTER: &str = "envoy.filters.network.ext_authz";

/// What the names of the shadow RBAC policies of CUSTOM rules start with,
/// as Istio names them.
pub(crate) const MATCH_PREFIX: &str = "istio-ext-authz";

/// The shadow rules' statistics prefix of the RBAC filters of CUSTOM
/// rules; Envoy also puts it before the dynamic metadata keys they write
/// (`istio_ext_authz_shadow_effective_policy_id`).
pub(crate) const SHADOW_STAT_PREFIX: &str = "istio_ext_authz_";

/// The prefix of the shadow policy names of `provider`'s CUSTOM rules.
pub(crate) fn policy_prefix(provider: &str) -> String {
    format!("{MATCH_PREFIX}-{provider}-")
}

/// The outbound cluster of the provider's service.
pub(crate) fn cluster(provider: &ExtensionProvider) -> String {
    let port = u16::try_from(provider.port()).unwrap_or_default();
    crate::names::outbound_cluster(provider.hostname(), port, &Labels::default())
}

/// The HTTP filter's configuration for `provider` (validated by the mesh
/// config's reader), consulted when the RBAC filter named `rbac_filter`
/// marked the request for it.
pub(crate) fn http_filter(provider: &ExtensionProvider, rbac_filter: &str) -> Option<Any> {
    let enabled = Some(enabled_metadata(rbac_filter, &provider.name));
    let config = match provider.kind()? {
        ProviderKind::Http(http) => http_service(provider, http, enabled),
        ProviderKind::Grpc(grpc) => HttpExtAuthz {
            services: Some(ext_authz::Services::GrpcService(grpc_service(provider, grpc))),
            failure_mode_allow: grpc.fail_open,
            clear_route_cache: grpc.clear_route_cache,
            status_on_error: status(&grpc.status_on_error),
            with_request_body: grpc.include_request_body_in_check.map(body),
            transport_api_version: ApiVersion::V3 as i32,
            filter_enabled_metadata: enabled,
            ..Default::default()
        },
    };
    Some(Any {
        type_url: HttpExtAuthz::type_url(),
        value: config.encode_to_vec(),
    })
}

/// The network filter's configuration for a gRPC `provider`; `None` for
/// an HTTP one (Envoy's network filter has no HTTP service).
pub(crate) fn network_filter(provider: &ExtensionProvider, rbac_filter: &str) -> Option<Any> {
    let ProviderKind::Grpc(grpc) = provider.kind()? else {
        return None;
    };
    let config = NetworkExtAuthz {
        stat_prefix: "tcp.".into(),
        grpc_service: Some(grpc_service(provider, grpc)),
        failure_mode_allow: grpc.fail_open,
        transport_api_version: ApiVersion::V3 as i32,
        filter_enabled_metadata: Some(enabled_metadata(rbac_filter, &provider.name)),
        ..Default::default()
    };
    Some(Any {
        type_url: NetworkExtAuthz::type_url(),
        value: config.encode_to_vec(),
    })
}

fn http_service(
    provider: &ExtensionProvider,
    http: &EnvoyExtAuthzHttp,
    filter_enabled_metadata: Option<MetadataMatcher>,
) -> HttpExtAuthz {
    let request_headers = if http.include_request_headers_in_check.is_empty() {
        &http.include_headers_in_check
    } else {
        &http.include_request_headers_in_check
    };
    let headers_to_add: Vec<HeaderValue> = http
        .include_additional_headers_in_check
        .iter()
        .map(|(key, value)| HeaderValue {
            key: key.clone(),
            value: value.clone(),
            ..Default::default()
        })
        .collect();
    let response = [
        &http.headers_to_upstream_on_allow,
        &http.headers_to_downstream_on_deny,
        &http.headers_to_downstream_on_allow,
    ]
    .iter()
    .any(|h| !h.is_empty())
    .then(|| AuthorizationResponse {
        allowed_upstream_headers: headers(&http.headers_to_upstream_on_allow),
        allowed_client_headers: headers(&http.headers_to_downstream_on_deny),
        allowed_client_headers_on_success: headers(&http.headers_to_downstream_on_allow),
        ..Default::default()
    });
    let service = HttpService {
        server_uri: Some(HttpUri {
            // Required by Envoy, not used to connect: the cluster is.
            uri: format!("http://{}", provider.hostname()),
            timeout: Some(duration(
                http.timeout
                    .map_or(std::time::Duration::from_secs(600), |t| t.as_std()),
            )),
            http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(cluster(provider))),
        }),
        path_prefix: http.path_prefix.clone(),
        authorization_request: (!headers_to_add.is_empty()).then(|| AuthorizationRequest {
            headers_to_add,
            ..Default::default()
        }),
        authorization_response: response,
        ..Default::default()
    };
    HttpExtAuthz {
        services: Some(ext_authz::Services::HttpService(service)),
        allowed_headers: headers(request_headers),
        failure_mode_allow: http.fail_open,
        clear_route_cache: http.clear_route_cache,
        status_on_error: status(&http.status_on_error),
        with_request_body: http.include_request_body_in_check.map(body),
        transport_api_version: ApiVersion::V3 as i32,
        filter_enabled_metadata,
        ..Default::default()
    }
}

fn grpc_service(provider: &ExtensionProvider, grpc: &EnvoyExtAuthzGrpc) -> GrpcService {
    let cluster = cluster(provider);
    GrpcService {
        // Envoy takes the authority from the cluster name unless given,
        // and `|` is not allowed in one: the service's hostname, as Istio.
        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
            grpc_service::EnvoyGrpc {
                authority: provider.hostname().to_string(),
                cluster_name: cluster,
                ..Default::default()
            },
        )),
        timeout: grpc.timeout.map(|t| duration(t.as_std())),
        ..Default::default()
    }
}

/// Header names, or `prefix*` / `*suffix` patterns, case-insensitive.
fn headers(names: &[String]) -> Option<ListStringMatcher> {
    if names.is_empty() {
        return None;
    }
    let patterns = names
        .iter()
        .map(|name| {
            let pattern = if let Some(prefix) = name.strip_suffix('*') {
                string_matcher::MatchPattern::Prefix(prefix.to_string())
            } else if let Some(suffix) = name.strip_prefix('*') {
                string_matcher::MatchPattern::Suffix(suffix.to_string())
            } else {
                string_matcher::MatchPattern::Exact(name.clone())
            };
            StringMatcher {
                match_pattern: Some(pattern),
                ignore_case: true,
            }
        })
        .collect();
    Some(ListStringMatcher { patterns })
}

/// `statusOnError` (validated: a status Envoy knows); Envoy's default
/// (403) when empty.
fn status(code: &str) -> Option<HttpStatus> {
    code.parse::<i32>().ok().map(|code| HttpStatus { code })
}

fn body(body: RequestBody) -> BufferSettings {
    BufferSettings {
        max_request_bytes: body.max_request_bytes,
        allow_partial_message: body.allow_partial_message,
        pack_as_bytes: body.pack_as_bytes,
    }
}

fn duration(d: std::time::Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or_default(),
    }
}

/// Enabled when the RBAC filter `rbac_filter`'s shadow rules matched a
/// CUSTOM rule of `provider`.
fn enabled_metadata(rbac_filter: &str, provider: &str) -> MetadataMatcher {
    MetadataMatcher {
        filter: rbac_filter.to_string(),
        path: vec![metadata_matcher::PathSegment {
            segment: Some(metadata_matcher::path_segment::Segment::Key(format!(
                "{SHADOW_STAT_PREFIX}shadow_effective_policy_id"
            ))),
        }],
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::StringMatch(StringMatcher {
                // `ns[` follows the provider's name in its policies' names:
                // provider `a` never matches provider `a-b`'s policies.
                match_pattern: Some(string_matcher::MatchPattern::Prefix(format!(
                    "{}ns[",
                    policy_prefix(provider)
                ))),
                ignore_case: false,
            })),
        }),
        ..Default::default()
    }
}
