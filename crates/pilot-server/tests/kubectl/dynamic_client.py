"""The official Kubernetes Python client's dynamic client
(`kubernetes.dynamic.DynamicClient`) against pilot-discovery: discovery,
create, get, list, patch (JSON merge patch and server-side apply), watch,
delete, over TLS with a bearer token. Usage: dynamic_client.py URL CA TOKEN.
Prints one line per step; exits non-zero on the first failure."""

import os
import sys
import tempfile
import threading

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError

url, ca, token = sys.argv[1:4]
configuration = client.Configuration()
configuration.host = url
configuration.ssl_ca_cert = ca
configuration.api_key = {"authorization": "Bearer " + token}
cache = os.path.join(tempfile.mkdtemp(), "discovery.json")
dynamic = DynamicClient(client.ApiClient(configuration), cache_file=cache)
rr = dynamic.resources.get(api_version="config.istio.io/v1alpha2", kind="RouteRule")
assert rr.namespaced and rr.name == "routerules", rr
print("discover", rr.name)

NS = "default"
rule = {
    "apiVersion": "config.istio.io/v1alpha2",
    "kind": "RouteRule",
    "metadata": {"name": "from-dynamic", "labels": {"app": "dynamic"}},
    "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v1"}}]},
}

created = rr.create(body=rule, namespace=NS)
assert created.metadata.resourceVersion and created.metadata.uid, created
print("create", created.metadata.name)

got = rr.get(name="from-dynamic", namespace=NS)
assert got.spec.destination.name == "reviews", got
print("get", got.metadata.resourceVersion)

listed = rr.get(namespace=NS, label_selector="app=dynamic")
assert [i.metadata.name for i in listed.items] == ["from-dynamic"], listed
print("list", len(listed.items))

# A watch from the list's version sees the merge patch below as MODIFIED
# (after any other change made meanwhile: pilot writes each new version's
# distribution status, which a watch sees as MODIFIED too).
events = []


def patched_event(event):
    labels = event["object"].metadata.labels
    return event["type"] == "MODIFIED" and labels is not None and labels.patched == "yes"


def follow():
    for event in rr.watch(namespace=NS, resource_version=listed.metadata.resourceVersion, timeout=60):
        events.append(event)
        if patched_event(event):
            break


follower = threading.Thread(target=follow)
follower.start()
patched = rr.patch(
    body={"metadata": {"labels": {"patched": "yes"}}},
    name="from-dynamic",
    namespace=NS,
    content_type="application/merge-patch+json",
)
assert patched.metadata.labels.patched == "yes", patched
print("patch", patched.metadata.resourceVersion)
follower.join(90)
kinds = [e["type"] for e in events]
assert any(patched_event(e) for e in events), events
print("watch", ",".join(kinds))

# Server-side apply: the route is the creator's (an Update by the client's
# name), so another value conflicts until forced.
applied = dict(rule, spec={"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v2"}}]})
try:
    rr.server_side_apply(body=applied, namespace=NS, field_manager="python-apply")
    raise AssertionError("the apply did not conflict")
except ConflictError as error:
    assert "Apply failed with 1 conflict" in error.body and ".spec.route" in error.body, error.body
applied_now = rr.server_side_apply(body=applied, namespace=NS, field_manager="python-apply", force_conflicts=True)
assert applied_now.spec.route[0].labels.version == "v2", applied_now
managers = sorted((m.manager, m.operation) for m in applied_now.metadata.managedFields)
assert ("python-apply", "Apply") in managers, managers
print("apply", ",".join(f"{m}/{o}" for m, o in managers))

rr.delete(name="from-dynamic", namespace=NS)
try:
    rr.get(name="from-dynamic", namespace=NS)
    raise AssertionError("still there after delete")
except NotFoundError:
    pass
print("delete", "from-dynamic")
