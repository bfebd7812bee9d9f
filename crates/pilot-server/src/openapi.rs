//! The OpenAPI description of this server's routes beside the REST API
//! (the probes, `/metrics`, the `/debug/` pages, the agents' proxy
//! events), which `/openapi.json` documents with the API's own
//! (`pilot_apiserver::ApiOptions::documented_routes`).

use serde_json::{Value, json};

/// This server's routes beside the REST API: path, then its path item.
/// Each operation carries `x-access` (`open`, `read` or `write`), which
/// the API's document turns into `security` and 401/403 responses.
pub(crate) fn routes() -> Vec<(String, Value)> {
    let text = |description: &str| json!({"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}});
    let object = |description: &str| json!({"description": description, "content": {"application/json": {"schema": {"type": "object"}}}});
    let routes = vec![
        (
            "/healthz",
            json!({"get": {"summary": "Liveness", "x-access": "open", "responses": {"200": text("alive")}}}),
        ),
        (
            "/readyz",
            json!({"get": {"summary": "Readiness: every cache has synced", "x-access": "open",
                "responses": {"200": text("ready"), "503": text("not ready")}}}),
        ),
        (
            "/metrics",
            json!({"get": {"summary": "Prometheus metrics (OpenMetrics text)", "x-access": "read", "responses": {"200": {
                "description": "metrics",
                "content": {"application/openmetrics-text": {"schema": {"type": "string"}}},
            }}}}),
        ),
        (
            "/debug/proxy-status",
            json!({"get": {"summary": "Per connected proxy and xDS type: versions sent and ACKed, last NACK, state",
                "x-access": "read", "responses": {"200": object("status")}}}),
        ),
        (
            "/debug/registryz",
            json!({"get": {"summary": "Services of the registries with their instances' labels (for pilotctl analyze)",
                "x-access": "read", "responses": {"200": object("services")}}}),
        ),
        (
            "/debug/quarantine",
            json!({"get": {"summary": "Objects in the configuration store that fail their kind's validation (written around the API), held out of the cache: never pushed to proxies, not served by get, list or watch, until fixed or deleted in the store",
                "x-access": "read", "responses": {"200": {"description": "quarantined objects, by kind, namespace and name",
                "content": {"application/json": {"schema": quarantine_schema()}}}}}}),
        ),
        (
            "/debug/scope",
            json!({"get": {"summary": "Which hosts a connected proxy's scope holds at the latest push and why: the Sidecar or default that decided it, its outbound traffic policy and the egress host entry that imported each host, for pilotctl proxy-config scope",
            "x-access": "read",
            "parameters": [{"name": "proxy", "in": "query", "required": true, "schema": {"type": "string"},
                "description": "a node id (type~ip~id~domain), or the id <pod>.<namespace> of a proxy connected to this replica"}],
            "responses": {
                "200": {"description": "the proxy's scope", "content": {"application/json": {"schema": scope_schema()}}},
                "400": {"description": "no proxy parameter", "content": {
                    "text/plain": {"schema": {"type": "string"}},
                    "application/json": {"schema": error_schema()}}},
                "404": {"description": "no such proxy is connected to this replica", "content": {"application/json": {"schema": error_schema()}}},
                "503": {"description": "no push has happened yet", "content": {"application/json": {"schema": error_schema()}}},
            }}}),
        ),
        (
            "/debug/certificates",
            json!({"get": {"summary": "The workload certificates this replica's CA issued, the latest per identity and requesting address, newest first; with proxy, those its agent requested (from its address, for identities of its namespace), for pilotctl proxy-config secret",
            "x-access": "read",
            "parameters": [{"name": "proxy", "in": "query", "required": false, "schema": {"type": "string"},
                "description": "a node id (type~ip~id~domain), or the id <pod>.<namespace> of a proxy connected to this replica"}],
            "responses": {
                "200": {"description": "issued certificates", "content": {"application/json": {"schema": certificates_schema()}}},
                "400": {"description": "proxy is neither a node id nor the id of a connected proxy", "content": {"application/json": {"schema": error_schema()}}},
            }}}),
        ),
        (
            "/v1/proxy-events",
            json!({"post": {"summary": "pilot-agent reports Envoy's process life (starts, exits, restarts), shown in /debug/proxy-status and /metrics; an xds token may post the node ids it may claim on ADS (403 otherwise)",
            "x-access": "write",
            "requestBody": {"required": true, "content": {"application/json": {"schema": proxy_event_schema()}}},
            "responses": {
                "204": {"description": "recorded"},
                "400": status_response("not a proxy event (the message names the field)"),
                "413": status_response("body over --max-body-bytes"),
                "422": status_response("the node id is not type~ip~id~domain"),
            }}}),
        ),
    ];
    routes
        .into_iter()
        .map(|(path, item)| (path.to_string(), item))
        .collect()
}

/// The body of `GET /debug/quarantine` (`quarantine::listing`).
fn quarantine_schema() -> Value {
    json!({
        "type": "object",
        "required": ["items"],
        "properties": {"items": {"type": "array", "items": {
            "type": "object",
            "required": ["kind", "namespace", "name", "resourceVersion", "reason", "errors"],
            "properties": {
                "kind": {"type": "string"},
                "namespace": {"type": "string"},
                "name": {"type": "string"},
                "resourceVersion": {"type": "string", "nullable": true, "description": "the version the store delivered"},
                "reason": {"type": "string", "enum": ["Invalid", "Undecodable", "Journal"], "description": "Undecodable: the stored value is not an object of the kind; Journal: held back by --data-dir's journal at start (in its quarantine.jsonl)"},
                "errors": {"type": "array", "items": {
                    "type": "object",
                    "required": ["field", "message"],
                    "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                }},
            },
        }}},
    })
}

/// The body of `GET /debug/scope` (`debug::scope::handler`).
fn scope_schema() -> Value {
    json!({
        "type": "object",
        "required": ["proxy", "namespace", "decidedBy", "outboundTrafficPolicy", "hosts"],
        "properties": {
            "proxy": {"type": "string", "description": "the proxy's node id"},
            "namespace": {"type": "string"},
            "decidedBy": {"type": "string", "description": "the Sidecar or default that decided the scope"},
            "outboundTrafficPolicy": {"type": "string", "enum": ["REGISTRY_ONLY", "ALLOW_ANY"]},
            "hosts": {"type": "array", "items": {
                "type": "object",
                "required": ["host", "reason"],
                "properties": {
                    "host": {"type": "string"},
                    "reason": {"type": "string", "description": "the egress host entry that imported it"},
                },
            }},
        },
    })
}

/// `{"error": message}`, the error body of the `/debug` endpoints that
/// take a proxy.
fn error_schema() -> Value {
    json!({"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}})
}

/// The body of `GET /debug/certificates` (`ca::IssuedCertificates::to_json`).
fn certificates_schema() -> Value {
    json!({
        "type": "object",
        "required": ["certificates"],
        "properties": {
            "proxy": {"type": "string", "description": "the node id asked about"},
            "certificates": {"type": "array", "items": {
                "type": "object",
                "required": ["identity", "notAfter", "issuedAt", "caller", "peer"],
                "properties": {
                    "identity": {"type": "string", "description": "the SPIFFE identity certified"},
                    "notAfter": {"type": "string", "format": "date-time"},
                    "issuedAt": {"type": "string", "format": "date-time"},
                    "caller": {"type": "string", "description": "who asked for it"},
                    "peer": {"type": "string", "nullable": true, "description": "the address it was asked from"},
                },
            }},
        },
    })
}

/// The body of `POST /v1/proxy-events` (`pilot_proxy_api::ProxyEvent`).
fn proxy_event_schema() -> Value {
    let optional = |kind: &str, minimum: Option<i64>| {
        let mut schema = json!({"type": [kind, "null"]});
        if let Some(minimum) = minimum {
            schema["minimum"] = json!(minimum);
        }
        schema
    };
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["node", "kind", "epoch", "restarts", "time_ms"],
        "properties": {
            "node": {"type": "string", "description": "the proxy's node id, type~ip~id~domain"},
            "kind": {"type": "string", "enum": ["started", "exited", "restarting", "budget_exhausted", "stopped"]},
            "epoch": {"type": "integer", "minimum": 0, "maximum": u32::MAX},
            "pid": {"type": ["integer", "null"], "minimum": 0, "maximum": u32::MAX},
            "exit_code": {"type": ["integer", "null"], "minimum": i32::MIN, "maximum": i32::MAX},
            "signal": {"type": ["integer", "null"], "minimum": i32::MIN, "maximum": i32::MAX},
            "expected": {"type": "boolean"},
            "message": {"type": ["string", "null"]},
            "restarts": {"type": "integer", "minimum": 0},
            "backoff_ms": optional("integer", Some(0)),
            "time_ms": {"type": "integer", "minimum": 0},
        },
    })
}

/// A response whose body is a Kubernetes `Status` (the API's schema).
fn status_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}}})
}
