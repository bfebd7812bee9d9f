//! Configuration survives a restart of pilot-discovery: on etcd, and on the
//! memory store with --data-dir. Without --data-dir it does not.

use pilot_system_tests::{Store, discovery};
use pilot_test_support::{EtcdServer, eventually, pilotctl};

/// Applies bookinfo, restarts the server with the same flags, and checks
/// every object is back at the same version; then writes after the restart.
fn survives_restart(store: &Store) {
    let server = discovery(store, &[]);
    let applied = pilotctl(
        Some(&server.url),
        &["apply", "-f", "examples/bookinfo/"],
        &[],
        None,
    );
    assert_eq!(applied.code, 0, "{applied:?}");
    let deleted = pilotctl(Some(&server.url), &["delete", "rr", "reviews-timeout"], &[], None);
    assert_eq!(deleted.code, 0, "{deleted:?}");
    // Wait for the server's first status writes (no proxies: 0/0), so
    // that what is compared is what the store keeps.
    let mut before = pilotctl(Some(&server.url), &["get", "rr", "-o", "yaml"], &[], None);
    eventually("every rule to carry its status", || {
        before = pilotctl(Some(&server.url), &["get", "rr", "-o", "yaml"], &[], None);
        before.stdout.matches("observedVersion:").count() == before.stdout.matches("\nkind:").count()
    });
    assert_eq!(before.code, 0, "{before:?}");
    assert!(before.stdout.contains("name: reviews-default"), "{before:?}");
    assert!(!before.stdout.contains("name: reviews-timeout"), "{before:?}");
    server.terminate();

    let server = discovery(store, &[]);
    let after = pilotctl(Some(&server.url), &["get", "rr", "-o", "yaml"], &[], None);
    assert_eq!(after.code, 0, "{after:?}");
    assert_eq!(
        after.stdout, before.stdout,
        "the rules (and their versions) changed across a restart"
    );
    // Versions go on from where they were: a stale replace is still refused,
    // a fresh one accepted. Each replace changes the objects (an annotation):
    // a replace that changes nothing is not a write, as in Kubernetes.
    let changed = after.stdout.replace(
        "\n  namespace: default\n",
        "\n  namespace: default\n  annotations:\n    restarted: \"yes\"\n",
    );
    assert_ne!(changed, after.stdout, "the rules are in namespace default");
    let replaced = pilotctl(Some(&server.url), &["replace", "-f", "-"], &[], Some(&changed));
    assert_eq!(replaced.code, 0, "{replaced:?}");
    let stale = pilotctl(Some(&server.url), &["replace", "-f", "-"], &[], Some(&changed));
    assert_eq!(stale.code, 1, "{stale:?}");
    assert!(
        stale.stderr.contains("was changed since you read it"),
        "{stale:?}"
    );
    server.terminate();
}

#[test]
fn etcd_store_survives_a_restart() {
    let etcd = EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    survives_restart(&Store::Etcd(&endpoint));
}

#[test]
fn memory_store_with_data_dir_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    survives_restart(&Store::DataDir(dir.path()));
}

#[test]
fn memory_store_without_data_dir_starts_empty() {
    let server = discovery(&Store::Memory, &[]);
    let applied = pilotctl(
        Some(&server.url),
        &["apply", "-f", "examples/bookinfo/"],
        &[],
        None,
    );
    assert_eq!(applied.code, 0, "{applied:?}");
    server.terminate();
    let server = discovery(&Store::Memory, &[]);
    let got = pilotctl(Some(&server.url), &["get", "rr"], &[], None);
    assert_eq!((got.code, got.stdout.as_str()), (0, ""), "{got:?}");
    assert_eq!(got.stderr.trim(), "No routerules found in namespace default.");
}
