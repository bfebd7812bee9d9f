"""The official Kubernetes Python client (PyPI `kubernetes`) against
pilot-discovery: CustomObjectsApi create, get, list, patch, watch, deletecollection, delete,
over TLS with a bearer token. Usage: custom_objects.py URL CA TOKEN.
Prints one line per step; exits non-zero on the first failure."""

import sys
import threading

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

url, ca, token = sys.argv[1:4]
configuration = client.Configuration()
configuration.host = url
configuration.ssl_ca_cert = ca
configuration.api_key = {"authorization": "Bearer " + token}
api = client.CustomObjectsApi(client.ApiClient(configuration))
G, V, NS, P = "config.istio.io", "v1alpha2", "default", "routerules"

rule = {
    "apiVersion": "config.istio.io/v1alpha2",
    "kind": "RouteRule",
    "metadata": {"name": "from-python", "labels": {"app": "python"}},
    "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v1"}}]},
}

created = api.create_namespaced_custom_object(G, V, NS, P, rule)
assert created["metadata"]["resourceVersion"], created
print("create", created["metadata"]["name"])

got = api.get_namespaced_custom_object(G, V, NS, P, "from-python")
assert got["spec"]["destination"]["name"] == "reviews", got
print("get", got["metadata"]["resourceVersion"])

listed = api.list_namespaced_custom_object(G, V, NS, P, label_selector="app in (python)")
assert [i["metadata"]["name"] for i in listed["items"]] == ["from-python"], listed
print("list", len(listed["items"]))

# A watch from the list's version sees the patch below as MODIFIED (after
# any other change made meanwhile: pilot writes each new version's
# distribution status, which a watch sees as MODIFIED too).
events = []
stream = watch.Watch()


def patched_event(event):
    labels = event["object"]["metadata"].get("labels") or {}
    return event["type"] == "MODIFIED" and labels.get("patched") == "yes"


def follow():
    for event in stream.stream(
        api.list_namespaced_custom_object, G, V, NS, P,
        resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=60,
    ):
        events.append(event)
        if patched_event(event):
            stream.stop()


follower = threading.Thread(target=follow)
follower.start()

patched = api.patch_namespaced_custom_object(
    G, V, NS, P, "from-python", {"metadata": {"labels": {"patched": "yes"}}}
)
assert patched["metadata"]["labels"]["patched"] == "yes", patched
print("patch", patched["metadata"]["resourceVersion"])

follower.join(90)
kinds = [e["type"] for e in events]
assert any(patched_event(e) for e in events), events
print("watch", ",".join(kinds))

# deletecollection with DeleteOptions: a dry run deletes nothing, a
# precondition that does not hold is a conflict, then the real one.
selector = "app=python"
dry = api.delete_collection_namespaced_custom_object(G, V, NS, P, label_selector=selector, dry_run="All")
assert [i["metadata"]["name"] for i in dry["items"]] == ["from-python"], dry
api.get_namespaced_custom_object(G, V, NS, P, "from-python")
try:
    api.delete_collection_namespaced_custom_object(
        G, V, NS, P, label_selector=selector,
        body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="00000000-0000-4000-8000-000000000000")),
    )
    raise AssertionError("a deletecollection with a stale uid deleted")
except ApiException as error:
    assert error.status == 409, error
api.get_namespaced_custom_object(G, V, NS, P, "from-python")
print("deletecollection", "dry run and precondition kept it")

api.delete_namespaced_custom_object(G, V, NS, P, "from-python")
try:
    api.get_namespaced_custom_object(G, V, NS, P, "from-python")
    raise AssertionError("still there after delete")
except ApiException as error:
    assert error.status == 404, error
print("delete", "from-python")
