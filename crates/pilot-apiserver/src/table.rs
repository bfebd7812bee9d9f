//! The `Table` form of a list, a watch event or one object, which kubectl
//! asks for (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) to
//! print `kubectl get`: the columns pilotctl shows (NAME, VERSION, STATUS
//! with the acked and nacked counts, AGE), each row with the object's
//! metadata (or the whole object with `includeObject=Object`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, header};
use pilot_model::{DynConfig, KindSchema};
use serde_json::{Value, json};

/// A client's request for a `Table`, read from its `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableRequest {
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`, as asked.
    version: &'static str,
}

impl TableRequest {
    /// The request, when the first `Table` the client accepts is one this
    /// server writes (`v1` or `v1beta1`).
    pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
        accept.split(',').find_map(|media| {
            let mut parts = media.split(';').map(str::trim);
            if !parts.next()?.eq_ignore_ascii_case("application/json") {
                return None;
            }
            let (mut table, mut group, mut version) = (false, false, None);
            for parameter in parts {
                match parameter.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                    Some(("as", "Table")) => table = true,
                    Some(("g", "meta.k8s.io")) => group = true,
                    Some(("v", "v1")) => version = Some("meta.k8s.io/v1"),
                    Some(("v", "v1beta1")) => version = Some("meta.k8s.io/v1beta1"),
                    _ => {}
                }
            }
            (table && group).then_some(TableRequest { version: version? })
        })
    }
}

/// `objects` as a `Table` of `schema`'s columns at `revision`; with
/// `headers`, the column definitions too (naming `server`, the program
/// that writes the status).
pub(crate) fn table(
    server: &str,
    schema: &KindSchema,
    request: &TableRequest,
    objects: &[Arc<DynConfig>],
    revision: &str,
    headers: bool,
) -> Value {
    let now = SystemTime::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let meta = &object.meta;
            let status = match &meta.status {
                Some(status)
                    if meta.resource_version.as_deref() == Some(status.observed_version.as_str()) =>
                {
                    status.summary()
                }
                _ => "-".to_string(),
            };
            let age = meta
                .creation_timestamp
                .map(|created| human_duration(now.duration_since(created).unwrap_or_default()))
                .unwrap_or_else(|| "<unknown>".to_string());
            let mut metadata = serde_json::to_value(&**object)
                .ok()
                .and_then(|v| v.get("metadata").cloned())
                .unwrap_or(Value::Null);
            if metadata.is_null() {
                metadata = json!({"name": meta.name, "namespace": meta.namespace});
            }
            json!({
                "cells": [meta.name, meta.resource_version.clone().unwrap_or_default(), status, age],
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                },
            })
        })
        .collect();
    let mut table = json!({
        "kind": "Table",
        "apiVersion": request.version,
        "metadata": {"resourceVersion": revision},
        "rows": rows,
    });
    if headers {
        table["columnDefinitions"] = json!([
            {"name": "Name", "type": "string", "format": "name", "priority": 0,
             "description": format!("The name of the {}", schema.kind)},
            {"name": "Version", "type": "string", "format": "", "priority": 0,
             "description": "The object's resourceVersion"},
            {"name": "Status", "type": "string", "format": "", "priority": 0,
             "description": format!("Proxies that ACKed the current version out of those that should have it, and how many NACKed it; - before {server} reports on it")},
            {"name": "Age", "type": "date", "format": "", "priority": 0,
             "description": "Time since the object was created"},
        ]);
    }
    table
}

/// A duration as kubectl prints ages: `45s`, `3m20s`, `25m`, `5h10m`,
/// `3d4h`, `400d`, `2y30d`.
pub(crate) fn human_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        }
    } else if hours < 3 {
        format!("{minutes}m")
    } else if hours < 8 {
        match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        }
    } else if days < 365 * 2 {
        format!("{days}d")
    } else {
        format!("{}y{}d", days / 365, days % 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kubectls_accept_header() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
                .parse()
                .unwrap(),
        );
        assert_eq!(
            TableRequest::from_headers(&headers),
            Some(TableRequest {
                version: "meta.k8s.io/v1"
            })
        );
        headers.insert(header::ACCEPT, "application/json".parse().unwrap());
        assert_eq!(TableRequest::from_headers(&headers), None);
    }

    #[test]
    fn ages_as_kubectl_prints_them() {
        for (seconds, text) in [
            (45, "45s"),
            (200, "3m20s"),
            (1500, "25m"),
            (5 * 3600 + 600, "5h10m"),
            (30 * 3600, "30h"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (400 * 86_400, "400d"),
        ] {
            assert_eq!(human_duration(Duration::from_secs(seconds)), text);
        }
    }
}
