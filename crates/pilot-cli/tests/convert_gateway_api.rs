//! `pilotctl convert --to gateway-api`: every VirtualService and Gateway
//! of Istio's samples converted by the real binary; what it writes
//! validates; each note names a field the source object has; the exact
//! and noted objects are counted; `--strict` writes nothing and exits 3;
//! the server's objects convert as the files do.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{Discovery, pilotctl};
use pilot_model::{DynConfig, document};
use serde_json::Value;

/// The ports of the bookinfo Services and the samples' other Services, as
/// pilot-discovery's `--services` file gives them.
const SERVICES: &str = "services:\n\
- {hostname: productpage.default.svc.cluster.local, ports: [{name: http, port: 9080, protocol: HTTP}]}\n\
- {hostname: reviews.default.svc.cluster.local, ports: [{name: http, port: 9080, protocol: HTTP}]}\n\
- {hostname: ratings.default.svc.cluster.local, ports: [{name: http, port: 9080, protocol: HTTP}]}\n\
- {hostname: details.default.svc.cluster.local, ports: [{name: http, port: 9080, protocol: HTTP}]}\n\
- {hostname: helloworld.default.svc.cluster.local, ports: [{name: http, port: 5000, protocol: HTTP}]}\n\
- {hostname: httpbin.default.svc.cluster.local, ports: [{name: http, port: 8000, protocol: HTTP}]}\n\
- {hostname: tornado.default.svc.cluster.local, ports: [{name: http, port: 8888, protocol: HTTP}]}\n";

/// `note: KIND NAMESPACE/NAME: PATH: message` as (kind, namespace/name,
/// path); a note on a field not written (`not written, ...`) as the path
/// of the object holding it.
fn notes(stderr: &str) -> Vec<(String, String, String)> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("note: "))
        .map(|l| {
            let (kind, rest) = l.split_once(' ').unwrap();
            let (name, rest) = rest.split_once(": ").unwrap();
            let (path, message) = rest.split_once(": ").unwrap();
            let path = match message.starts_with("not written") {
                true => path.rsplit_once('.').unwrap().0,
                false => path,
            };
            (kind.to_string(), name.to_string(), path.to_string())
        })
        .collect()
}

/// Whether `path` (`spec.http[1].match[0].uri.prefix`) is a field of `object`.
fn has_field(object: &DynConfig, path: &str) -> bool {
    let Some(rest) = path.strip_prefix("spec") else {
        return false;
    };
    let mut value = &object.spec;
    // `.name` or `[index]`, where a name may hold `-` (a header's).
    let mut rest = rest;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let (index, after) = after.split_once(']').unwrap();
            let Some(next) = value.get(index.parse::<usize>().unwrap()) else {
                return false;
            };
            value = next;
            rest = after;
        } else if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let Some(next) = value.get(&after[..end]) else {
                return false;
            };
            value = next;
            rest = &after[end..];
        } else {
            return false;
        }
    }
    !value.is_null()
}

fn sources(dirs: &[&Path]) -> Vec<DynConfig> {
    let registry = pilot_api::default_registry();
    let mut objects = Vec::new();
    for dir in dirs {
        for file in pilot_test_support::corpus_files(dir, &[".yaml"]) {
            let text = std::fs::read_to_string(&file).unwrap();
            objects.extend(document::parse(&file.display().to_string(), &text, &registry).unwrap());
        }
    }
    objects
}

#[test]
fn istios_samples_convert_to_documents_that_validate_with_notes_naming_real_fields() {
    let Some(networking) = pilot_test_support::corpus("istio-samples/networking/valid") else {
        return;
    };
    let Some(bookinfo) = pilot_test_support::corpus("istio-samples/bookinfo-v1") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let services = dir.path().join("services.yaml");
    std::fs::write(&services, SERVICES).unwrap();
    let mut outputs = Vec::new();
    let mut all_notes = Vec::new();
    let mut converted = BTreeSet::new();
    for corpus in [&networking, &bookinfo] {
        let run = pilotctl(
            None,
            &[
                "convert",
                "--to",
                "gateway-api",
                "--services",
                services.to_str().unwrap(),
                "-f",
                corpus.to_str().unwrap(),
            ],
            &[],
            None,
        );
        assert_eq!(run.code, 0, "{run:?}");
        let validate = pilotctl(None, &["validate", "-f", "-"], &[], Some(&run.stdout));
        assert_eq!(validate.code, 0, "{validate:?}");
        let objects = sources(&[corpus]);
        let noted = notes(&run.stderr);
        for (kind, name, path) in &noted {
            // An object named twice is the last one, as `apply` leaves it.
            let source = objects
                .iter()
                .rev()
                .find(|o| &o.meta.kind == kind && format!("{}/{}", o.meta.namespace, o.meta.name) == *name)
                .unwrap_or_else(|| panic!("a note on {kind} {name}, which is not in {}", corpus.display()));
            assert!(
                has_field(source, path),
                "{kind} {name} has no field {path}: {run:?}"
            );
        }
        for object in &objects {
            if ["VirtualService", "Gateway"].contains(&object.meta.kind.as_str()) {
                converted.insert((
                    corpus.display().to_string(),
                    object.meta.kind.clone(),
                    format!("{}/{}", object.meta.namespace, object.meta.name),
                ));
            }
        }
        outputs.push(run.stdout.clone());
        all_notes.extend(
            noted
                .into_iter()
                .map(|(kind, name, path)| (corpus.display().to_string(), kind, name, path)),
        );
    }
    // Every converted object says where it came from.
    let registry = pilot_api::default_registry();
    let written: Vec<DynConfig> = outputs
        .iter()
        .flat_map(|o| document::parse("out.yaml", o, &registry).unwrap())
        .collect();
    let routes = written
        .iter()
        .filter(|o| o.meta.kind.starts_with("HTTPRoute"))
        .count();
    let gateways = written
        .iter()
        .filter(|o| o.meta.kind == "Gateway.gateway.networking.k8s.io")
        .count();
    for object in written
        .iter()
        .filter(|o| o.meta.group == "gateway.networking.k8s.io")
    {
        assert!(
            object.meta.annotations.contains_key("convert.pilot.io/from"),
            "{object:?}"
        );
    }
    let noted: BTreeSet<(String, String, String)> = all_notes
        .iter()
        .map(|(corpus, kind, name, _)| (corpus.clone(), kind.clone(), name.clone()))
        .collect();
    let exact: Vec<_> = converted.difference(&noted).collect();
    let by_path = |suffix: &str| all_notes.iter().filter(|n| n.3.ends_with(suffix)).count();
    let counts = BTreeMap::from([
        ("sources", converted.len()),
        ("exact", exact.len()),
        ("noted", noted.len()),
        ("notes", all_notes.len()),
        ("HTTPRoutes", routes),
        ("Gateways", gateways),
        ("subset notes", by_path(".subset")),
        ("prefix notes", by_path(".uri.prefix")),
        ("selector notes", by_path("spec.selector")),
    ]);
    eprintln!("{counts:?}\nexact: {exact:?}");
    // 24 VirtualServices and Gateways (an object named in several files
    // once); every Gateway has a selector; the bookinfo routes name
    // subsets; the ingress routes' string prefixes; the east-west
    // Gateway's only server is AUTO_PASSTHROUGH (no Gateway written); the
    // TCP and TLS routes and the port match leave three VirtualServices
    // without an HTTPRoute (a note each says so).
    assert_eq!(
        counts,
        BTreeMap::from([
            ("sources", 24),
            ("exact", 3),
            ("noted", 21),
            ("notes", 33),
            ("HTTPRoutes", 13),
            ("Gateways", 7),
            ("subset notes", 11),
            ("prefix notes", 3),
            ("selector notes", 8),
        ])
    );
    let exact: Vec<&str> = exact.iter().map(|(_, _, name)| name.as_str()).collect();
    assert_eq!(
        exact,
        ["default/helloworld", "default/httpbin", "default/tornado"]
    );
}

/// Istio's own test data and validation datasets (the valid documents of
/// `istio-v1`): every file pilot reads converts, what is written validates
/// and every note names a field of its object.
#[test]
fn istios_test_data_converts_to_documents_that_validate() {
    let Some(dir) = pilot_test_support::corpus("istio-v1") else {
        return;
    };
    let registry = pilot_api::default_registry();
    let mut counts = BTreeMap::from([("files", 0), ("refused by pilot", 0), ("exact", 0), ("noted", 0)]);
    for file in pilot_test_support::corpus_files(&dir, &[".yaml"]) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        if name.starts_with("invalid")
            || !(text.contains("kind: VirtualService") || text.contains("kind: Gateway"))
        {
            continue;
        }
        *counts.get_mut("files").unwrap() += 1;
        let Ok(objects) = document::parse(&name, &text, &registry) else {
            *counts.get_mut("refused by pilot").unwrap() += 1;
            continue;
        };
        let path = file.to_str().unwrap();
        let run = pilotctl(None, &["convert", "--to", "gateway-api", "-f", path], &[], None);
        assert_eq!(run.code, 0, "{name}: {run:?}");
        if !run.stdout.is_empty() {
            let validate = pilotctl(None, &["validate", "-f", "-"], &[], Some(&run.stdout));
            assert_eq!(validate.code, 0, "{name}: {validate:?}\n{run:?}");
        }
        let noted = notes(&run.stderr);
        for (kind, object, field) in &noted {
            let source = objects
                .iter()
                .rev()
                .find(|o| &o.meta.kind == kind && format!("{}/{}", o.meta.namespace, o.meta.name) == *object)
                .unwrap_or_else(|| panic!("{name}: a note on {kind} {object}, which it does not hold"));
            assert!(
                has_field(source, field),
                "{name}: {kind} {object} has no field {field}: {run:?}"
            );
        }
        *counts
            .get_mut(if noted.is_empty() { "exact" } else { "noted" })
            .unwrap() += 1;
    }
    eprintln!("{counts:?}");
    // One file names an object `BACKEND`, which pilot refuses; no services
    // are given, and every file has a destination without a port, a
    // subset, a host that is no Service or a match on the client or port:
    // none converts exactly.
    assert_eq!(
        counts,
        BTreeMap::from([
            ("files", 61),
            ("refused by pilot", 1),
            ("exact", 0),
            ("noted", 60)
        ])
    );
}

const EXACT: &str = "\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: reviews-v2, port: {number: 9080}}}]
  - route: [{destination: {host: reviews-v1, port: {number: 9080}}}]
";

#[test]
fn strict_writes_nothing_and_exits_3_when_anything_is_not_exact() {
    let exact = pilotctl(
        None,
        &["convert", "--to", "gateway-api", "--strict", "-f", "-"],
        &[],
        Some(EXACT),
    );
    assert_eq!(exact.code, 0, "{exact:?}");
    assert!(exact.stdout.contains("kind: HTTPRoute"), "{exact:?}");
    assert!(
        exact
            .stderr
            .contains("1 objects converted to 1 (1 exact, 0 with notes; 0 notes)"),
        "{exact:?}"
    );
    let faulty = EXACT.replace(
        "  - route: [{destination: {host: reviews-v1",
        "  - fault: {abort: {httpStatus: 500, percentage: {value: 10}}}\n    route: [{destination: {host: reviews-v1",
    );
    let strict = pilotctl(
        None,
        &["convert", "--to", "gateway-api", "--strict", "-f", "-"],
        &[],
        Some(&faulty),
    );
    assert_eq!(strict.code, 3, "{strict:?}");
    assert!(strict.stdout.is_empty(), "{strict:?}");
    assert!(
        strict.stderr.lines().any(|l| l
            == "note: VirtualService default/reviews: spec.http[1].fault: fault injection is not expressible in an HTTPRoute: left out"),
        "{strict:?}"
    );
    // --strict is the v1 conversion's too: bookinfo's v1alpha2 rules have notes.
    let v1 = pilotctl(
        None,
        &["convert", "--strict", "-f", "examples/bookinfo/"],
        &[],
        None,
    );
    assert_eq!(v1.code, 3, "{v1:?}");
    assert!(v1.stdout.is_empty(), "{v1:?}");
    let lenient = pilotctl(
        None,
        &["convert", "--to", "gateway-api", "-f", "-"],
        &[],
        Some(&faulty),
    );
    assert_eq!(lenient.code, 0, "{lenient:?}");
    assert!(
        lenient
            .stdout
            .contains("convert.pilot.io/notes: \"spec.http[1].fault: fault injection is not expressible"),
        "{lenient:?}"
    );
}

#[test]
fn the_servers_objects_and_ports_convert_as_the_files_do() {
    let dir = tempfile::tempdir().unwrap();
    let services = dir.path().join("services.yaml");
    std::fs::write(&services, SERVICES).unwrap();
    // No port written: the registry's (the file's, the server's) is used.
    let without_ports = "apiVersion: networking.istio.io/v1\nkind: VirtualService\n\
                         metadata: {name: ratings, namespace: default}\n\
                         spec:\n  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings}}]\n";
    let server = Discovery::start(&["--services", services.to_str().unwrap()]);
    let url = Some(server.url.as_str());
    let applied = pilotctl(url, &["apply", "-f", "-"], &[], Some(without_ports));
    assert_eq!(applied.code, 0, "{applied:?}");
    let from_server = pilotctl(
        url,
        &["convert", "--to", "gateway-api", "--from-server"],
        &[],
        None,
    );
    assert_eq!(from_server.code, 0, "{from_server:?}");
    let from_files = pilotctl(
        None,
        &[
            "convert",
            "--to",
            "gateway-api",
            "--services",
            services.to_str().unwrap(),
            "-f",
            "-",
        ],
        &[],
        Some(without_ports),
    );
    assert_eq!(from_files.code, 0, "{from_files:?}");
    let routes = |yaml: &str| -> Vec<Value> {
        document::parse("out.yaml", yaml, &pilot_api::default_registry())
            .unwrap()
            .into_iter()
            .filter(|o| o.meta.kind.starts_with("HTTPRoute"))
            .map(|o| o.spec)
            .collect()
    };
    assert_eq!(routes(&from_server.stdout), routes(&from_files.stdout));
    let routes = routes(&from_files.stdout);
    assert_eq!(routes.len(), 1, "{from_files:?}");
    assert_eq!(
        routes[0]["rules"][0]["backendRefs"][0]["port"], 9080,
        "{from_files:?}"
    );
    assert!(!from_files.stderr.contains("note:"), "{from_files:?}");
    let unknown = pilotctl(
        None,
        &["convert", "--to", "gateway-api", "-f", "-"],
        &[],
        Some(without_ports),
    );
    assert!(
        unknown.stderr.contains(
            "note: VirtualService default/ratings: spec.http[0].route[0].destination.port: not written, and \
             ratings.default.svc.cluster.local's port is not known"
        ),
        "{unknown:?}"
    );
}

/// The command of docs/guide/gateway-api.md ("Coming from
/// VirtualService"): its note and summary as the guide shows them, and an
/// HTTPRoute that compiles to the routes of the guide's own HTTPRoute
/// (the same rules, on every port of the Service instead of 9080).
#[test]
fn the_guides_virtual_service_converts_to_the_guides_route() {
    let run = pilotctl(
        None,
        &[
            "convert",
            "--to",
            "gateway-api",
            "-f",
            "examples/gateway-api/reviews-virtual-service.yaml",
            "--services",
            "examples/gateway-api/services.yaml",
        ],
        &[],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stderr.lines().collect::<Vec<_>>(),
        [
            "note: VirtualService default/reviews: spec.http[1].retries: retries are not in the Gateway API's standard HTTPRoute: left out (no retries)",
            "1 objects converted to 1 (0 exact, 1 with notes; 1 note)",
        ],
        "{run:?}"
    );
    let registry = pilot_api::default_registry();
    let root = pilot_test_support::workspace();
    let guide = std::fs::read_to_string(root.join("examples/gateway-api/reviews-route.yaml")).unwrap();
    let routes = |text: &str| {
        let objects = document::parse("route.yaml", text, &registry).unwrap();
        let model = pilot_routing::RoutingConfigs::from_configs(&objects)
            .unwrap()
            .compile();
        let mut routes = model.http_routes("reviews.default.svc.cluster.local").to_vec();
        for m in routes.iter_mut().flat_map(|r| &mut r.matches) {
            m.port = None;
        }
        routes
    };
    let converted = routes(&run.stdout);
    assert_eq!(converted.len(), 3, "{converted:#?}");
    assert_eq!(converted, routes(&guide));
}

/// v1alpha2 rules go through their v1 conversion: the notes of both, and
/// no claim of exactness for a rule whose v1 form has a note.
#[test]
fn v1alpha2_rules_convert_through_v1() {
    let run = pilotctl(
        None,
        &["convert", "--to", "gateway-api", "-f", "examples/bookinfo/"],
        &[],
        None,
    );
    assert_eq!(run.code, 0, "{run:?}");
    let validate = pilotctl(None, &["validate", "-f", "-"], &[], Some(&run.stdout));
    assert_eq!(validate.code, 0, "{validate:?}");
    assert!(run.stdout.contains("kind: HTTPRoute"), "{run:?}");
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("note: RouteRule default/ratings-test-abort: spec.match.source: ")),
        "{run:?}"
    );
    assert!(
        run.stderr.lines().any(|l| l.starts_with(
            "note: VirtualService default/ratings: spec.http[1].fault: fault injection is not expressible"
        )),
        "{run:?}"
    );
    let summary = run.stderr.lines().last().unwrap();
    assert!(summary.starts_with("11 objects converted to 11 ("), "{run:?}");
    assert!(!summary.contains("exact"), "{run:?}");
}
