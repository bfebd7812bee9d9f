//! `pilotctl convert`: the bookinfo example's v1alpha2 rules to v1 objects
//! that validate, from files, a directory, stdin and a real
//! pilot-discovery; a note per construct with no exact equivalent; the
//! first istioctl's documents.

mod common;

use common::{Discovery, pilotctl};

fn kinds(yaml: &str) -> Vec<String> {
    yaml.lines()
        .filter_map(|l| l.strip_prefix("kind: "))
        .map(str::to_string)
        .collect()
}

#[test]
fn bookinfo_converts_to_objects_that_validate_with_a_note_per_inexact_construct() {
    let run = pilotctl(None, &["convert", "-f", "examples/bookinfo/"], &[], None);
    assert_eq!(run.code, 0, "{run:?}");
    let kinds = kinds(&run.stdout);
    for kind in ["VirtualService", "DestinationRule", "ServiceEntry", "Gateway"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind}: {run:?}");
    }
    assert!(
        !kinds
            .iter()
            .any(|k| ["RouteRule", "DestinationPolicy", "EgressRule", "IngressRule"].contains(&k.as_str())),
        "{run:?}"
    );
    // reviews-default is in two files: the later one counts, once.
    assert_eq!(run.stdout.matches("name: reviews-default").count(), 1, "{run:?}");
    assert!(
        run.stderr.lines().any(|l| l.starts_with(
            "note: RouteRule default/ratings-test-abort: spec.match.source: v1 matches a client by its workload labels"
        )),
        "{run:?}"
    );
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("note: RouteRule default/reviews-timeout: spec.websocketUpgrade: ")),
        "{run:?}"
    );
    let validate = pilotctl(None, &["validate", "-f", "-"], &[], Some(&run.stdout));
    assert_eq!(validate.code, 0, "{validate:?}");

    // -o DIR: a file per object, the same objects.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v1");
    let to_dir = pilotctl(
        None,
        &["convert", "-f", "examples/bookinfo/", "-o", out.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(to_dir.code, 0, "{to_dir:?}");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), kinds.len());
    assert!(out.join("virtualservice-default-reviews.yaml").exists());
    let validate = pilotctl(None, &["validate", "-f", out.to_str().unwrap()], &[], None);
    assert_eq!(validate.code, 0, "{validate:?}");
    assert!(
        validate
            .stdout
            .starts_with(&format!("{} objects valid", kinds.len())),
        "{validate:?}"
    );
}

#[test]
fn the_first_istioctls_documents_convert_from_stdin() {
    let old = "type: route-rule\nname: reviews-jason\nspec:\n  destination: reviews.default.svc.cluster.local\n  \
               match:\n    httpHeaders:\n      cookie: {regex: \"^(.*?;)?(user=jason)(;.*)?$\"}\n  \
               route:\n  - tags: {version: v2}\n---\n\
               type: destination-policy\nname: reviews-cb\nspec:\n  destination: reviews.default.svc.cluster.local\n  \
               tags: {version: v1}\n  circuitBreaker: {simpleCb: {maxConnections: 1}}\n";
    let run = pilotctl(None, &["convert", "-f", "-"], &[], Some(old));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("`type: route-rule` (the first istioctl's format) read as RouteRule reviews-jason"),
        "{run:?}"
    );
    assert_eq!(
        kinds(&run.stdout),
        ["VirtualService", "DestinationRule"],
        "{run:?}"
    );
    assert!(run.stdout.contains("subset: v2"), "{run:?}");
    assert!(run.stdout.contains("maxConnections: 1"), "{run:?}");

    let bad = pilotctl(
        None,
        &["convert", "-f", "-"],
        &[],
        Some("type: mixer-rule\nname: x\nspec: {}\n"),
    );
    assert_eq!(bad.code, 1, "{bad:?}");
    assert!(
        bad.stderr
            .contains("type mixer-rule is not one of the first istioctl's"),
        "{bad:?}"
    );
}

#[test]
fn the_servers_objects_convert_as_the_files_do() {
    let server = Discovery::start(&[]);
    let url = Some(server.url.as_str());
    let applied = pilotctl(url, &["apply", "-f", "examples/bookinfo/"], &[], None);
    assert_eq!(applied.code, 0, "{applied:?}");
    let from_server = pilotctl(url, &["convert", "--from-server"], &[], None);
    assert_eq!(from_server.code, 0, "{from_server:?}");
    let from_files = pilotctl(None, &["convert", "-f", "examples/bookinfo/"], &[], None);
    assert_eq!(
        kinds(&from_server.stdout),
        kinds(&from_files.stdout),
        "{from_server:?}"
    );
    assert!(
        from_server.stdout.contains("name: reviews-test-v3"),
        "{from_server:?}"
    );
    let validate = pilotctl(None, &["validate", "-f", "-"], &[], Some(&from_server.stdout));
    assert_eq!(validate.code, 0, "{validate:?}");

    let usage = pilotctl(None, &["convert"], &[], None);
    assert_eq!(usage.code, 2, "{usage:?}");
}
