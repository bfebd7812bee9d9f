//! Records that replicas share through the store (objects' distribution
//! status, each replica's record of its proxies, their ACK and NACK
//! records) are read by replicas of other releases during a rolling
//! upgrade: the previous release reads what the next one writes, and the
//! next reads what the previous wrote. So a reader ignores fields it does
//! not know, and a field added after a record's first release is optional.
//!
//! Each record is written fully populated, then read back (1) with an
//! unknown field added to every object in it, as a newer writer would
//! add, and (2) without each field in turn: leaving out a field of the
//! record's first release must fail (the test would otherwise not notice
//! a reader that ignores everything), leaving out any other field must
//! read.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use pilot_model::{
    Condition, ConfigStatus, ConnectedProxy, MessageType, NackSummary, ProcessReport, ProxyDistribution,
    ProxyNack, ReplicaRecord, TypeNack, TypeRecord, ValidationMessage, WithheldObject,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// The fields each record had in its first release: the only ones a reader
/// may require. A field added since must be optional (`#[serde(default)]`
/// or an `Option`), and is not listed here.
const FIRST_RELEASE_FIELDS: &[(&str, &[&str])] = &[
    (
        "ConfigStatus",
        &["observedVersion", "proxies", "acked", "nacked", "lastUpdate"],
    ),
    ("NackSummary", &["type", "message", "proxies"]),
    ("Condition", &["type", "status", "lastTransitionTime"]),
    ("ValidationMessage", &["type", "level"]),
    ("MessageType", &["code"]),
    ("ProxyDistribution", &["nodeId"]),
    (
        "WithheldObject",
        &["kind", "namespace", "name", "resourceVersion", "type", "message"],
    ),
    ("ProxyNack", &["revisions", "type", "message"]),
    ("ReplicaRecord", &["replica", "proxies", "published"]),
    ("ConnectedProxy", &["nodeId", "distribution"]),
    ("ProcessReport", &["restarts", "epoch", "lastEvent", "timeMs"]),
    ("TypeRecord", &[]),
    ("TypeNack", &["version", "message"]),
];

fn required(record: &str) -> &'static [&'static str] {
    FIRST_RELEASE_FIELDS
        .iter()
        .find(|(name, _)| *name == record)
        .map(|(_, fields)| *fields)
        .unwrap_or_else(|| panic!("{record} is not listed in FIRST_RELEASE_FIELDS"))
}

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn revisions() -> BTreeMap<String, u64> {
    [
        ("VirtualService".to_string(), 7),
        ("DestinationRule".to_string(), 5),
    ]
    .into_iter()
    .collect()
}

fn withheld() -> WithheldObject {
    WithheldObject {
        kind: "VirtualService".into(),
        namespace: "default".into(),
        name: "reviews".into(),
        resource_version: "7".into(),
        type_: "RDS".into(),
        message: "route: unknown cluster".into(),
    }
}

fn nack() -> ProxyNack {
    ProxyNack {
        revisions: revisions(),
        first_revisions: Some(revisions()),
        type_: "RDS".into(),
        message: "route: unknown cluster".into(),
    }
}

fn distribution() -> ProxyDistribution {
    ProxyDistribution {
        node_id: "sidecar~10.0.0.1~reviews-1.default~default.svc.cluster.local".into(),
        acked: Some(revisions()),
        nack: Some(nack()),
        withheld: vec![withheld()],
    }
}

fn nack_summary() -> NackSummary {
    NackSummary {
        type_: "RDS".into(),
        message: "route: unknown cluster".into(),
        proxies: 3,
    }
}

fn config_status() -> ConfigStatus {
    ConfigStatus {
        observed_version: "7".into(),
        proxies: 10,
        acked: 6,
        nacked: 3,
        withheld: 1,
        nacks: vec![nack_summary()],
        last_update: at(1_700_000_000),
        conditions: vec![condition()],
        validation_messages: vec![validation_message()],
        parents: Vec::new(),
        listeners: Vec::new(),
        addresses: Vec::new(),
        ancestors: Vec::new(),
    }
}

fn condition() -> Condition {
    Condition {
        type_: "Reconciled".into(),
        status: "False".into(),
        reason: "GatewayNotFound".into(),
        message: "bound to the gateway default/public, which does not exist".into(),
        observed_generation: Some(3),
        last_transition_time: at(1_700_000_000),
    }
}

fn message_type() -> MessageType {
    MessageType {
        code: "PLT0210".into(),
        name: "GatewayNotFound".into(),
    }
}

fn validation_message() -> ValidationMessage {
    ValidationMessage {
        type_: message_type(),
        level: "ERROR".into(),
        description: "spec.gateways[0]: bound to the gateway default/public, which does not exist".into(),
    }
}

fn type_nack() -> TypeNack {
    TypeNack {
        version: "4".into(),
        message: "listener: bad filter".into(),
    }
}

fn type_record() -> TypeRecord {
    TypeRecord {
        sent: Some("5".into()),
        acked: Some("3".into()),
        nack: Some(type_nack()),
    }
}

fn process_report() -> ProcessReport {
    ProcessReport {
        restarts: 2,
        epoch: 3,
        last_exit: Some("signal 9 (SIGKILL)".into()),
        last_exit_message: Some("killed".into()),
        last_event: "started".into(),
        time_ms: 1_700_000_000_000,
    }
}

fn connected_proxy() -> ConnectedProxy {
    ConnectedProxy {
        node_id: "sidecar~10.0.0.1~reviews-1.default~default.svc.cluster.local".into(),
        node_name: None,
        incremental: true,
        types: [("RDS".to_string(), type_record())].into_iter().collect(),
        distribution: distribution(),
        process: Some(process_report()),
    }
}

fn replica_record() -> ReplicaRecord {
    ReplicaRecord {
        replica: "pilot-0".into(),
        rest_address: Some("10.0.0.9:8080".into()),
        xds_address: Some("10.0.0.9:15010".into()),
        proxies: vec![connected_proxy()],
        writer: true,
        published: at(1_700_000_000),
    }
}

/// Adds `futureField` (an object with a nested unknown field, as a newer
/// release's new sub-record would be) to every object in `value`, maps of
/// user-chosen keys excepted (their keys are data, not fields).
fn add_unknown_fields(value: &mut Value, maps: &[&str]) {
    match value {
        Value::Object(object) => {
            for (key, child) in object.iter_mut() {
                if maps.contains(&key.as_str()) {
                    if let Value::Object(entries) = child {
                        for entry in entries.values_mut() {
                            add_unknown_fields(entry, maps);
                        }
                    }
                } else {
                    add_unknown_fields(child, maps);
                }
            }
            object.insert(
                "futureField".into(),
                json!({"since": "a later release", "nested": [1, 2]}),
            );
        }
        Value::Array(items) => items.iter_mut().for_each(|item| add_unknown_fields(item, maps)),
        _ => {}
    }
}

fn check<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    name: &str,
    record: T,
    maps: &[&str],
) {
    let written = serde_json::to_value(&record).unwrap();
    let Value::Object(fields) = &written else {
        panic!("{name} is not written as an object")
    };

    // Every field is written when set: otherwise the removals below would
    // not cover it.
    let required = required(name);
    for field in required {
        assert!(
            fields.contains_key(*field),
            "{name}: first-release field {field} is not written: {written}"
        );
    }

    // A newer release's extra fields, at every level, are ignored.
    let mut newer = written.clone();
    add_unknown_fields(&mut newer, maps);
    let read: T = serde_json::from_value(newer.clone())
        .unwrap_or_else(|err| panic!("{name} written by a newer release was not read: {err}\n{newer}"));
    assert_eq!(
        read, record,
        "{name}: the known fields changed when read beside unknown ones"
    );

    // An older release's record lacks the fields added since.
    for field in fields.keys() {
        let mut older: Map<String, Value> = fields.clone();
        older.remove(field);
        let result = serde_json::from_value::<T>(Value::Object(older));
        if required.contains(&field.as_str()) {
            assert!(
                result.is_err(),
                "{name} without its first-release field {field} was read"
            );
        } else {
            result.unwrap_or_else(|err| {
                panic!("{name} without {field} (a record of a release before {field} existed) was not read: {err}")
            });
        }
    }
}

#[test]
fn distribution_status_is_read_across_releases() {
    check("ConfigStatus", config_status(), &[]);
    check("NackSummary", nack_summary(), &[]);
    check("Condition", condition(), &[]);
    check("ValidationMessage", validation_message(), &[]);
    check("MessageType", message_type(), &[]);
}

#[test]
fn proxy_records_are_read_across_releases() {
    check(
        "ProxyDistribution",
        distribution(),
        &["acked", "revisions", "firstRevisions"],
    );
    check("ProxyNack", nack(), &["revisions", "firstRevisions"]);
    check("WithheldObject", withheld(), &[]);
}

#[test]
fn replica_records_are_read_across_releases() {
    let maps = &["types", "acked", "revisions", "firstRevisions"];
    check("ReplicaRecord", replica_record(), maps);
    check("ConnectedProxy", connected_proxy(), maps);
    check("ProcessReport", process_report(), &[]);
    check("TypeRecord", type_record(), &[]);
    check("TypeNack", type_nack(), &[]);
}

#[test]
fn every_listed_record_is_checked() {
    // The list above and the checks agree: a record added to one and not
    // the other is noticed.
    let checked = [
        "ConfigStatus",
        "NackSummary",
        "Condition",
        "ValidationMessage",
        "MessageType",
        "ProxyDistribution",
        "ProxyNack",
        "WithheldObject",
        "ReplicaRecord",
        "ConnectedProxy",
        "ProcessReport",
        "TypeRecord",
        "TypeNack",
    ];
    let listed: Vec<&str> = FIRST_RELEASE_FIELDS.iter().map(|(name, _)| *name).collect();
    assert_eq!(listed.len(), checked.len());
    for name in checked {
        assert!(listed.contains(&name), "{name} is checked but not listed");
    }
}
