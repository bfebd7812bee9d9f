"""A gRPC client for pilot's proxyless tests, driven line by line on stdin
so that one process (one xDS client, one channel per target) lives through
rule changes. Each command prints one JSON line:

    health TARGET                 -> {"status": "SERVING"} or {"error": CODE, "message": ...}
    count TARGET N [KEY=VALUE]    -> {"counts": {NAME: n}, "errors": {CODE: n}, "messages": [...]}
                                     (N calls of /pilot.test.Who/Name, with the header if given)
    load TARGET                   -> {"loading": TARGET} (calls, one after another, in the background)
    stop                          -> what `count` answers, for every call since `load`
    echo TARGET METHOD [KEY=VALUE ...]
                                  -> what the server answered (server.py: {"backend", "method", "metadata"})
                                     or {"error": CODE, "message": ...}
    calls TARGET METHOD N [KEY=VALUE ...]
                                  -> {"counts": {BACKEND: n}, "errors": {CODE: n}, "messages": [...]}
                                     (N calls of METHOD, /package.Service/Method, counted by the
                                     "backend" of server.py's answer)

TARGET is e.g. xds:///greeter.default.svc.cluster.local:50551 (the
bootstrap comes from GRPC_XDS_BOOTSTRAP) or 127.0.0.1:PORT; ADDRESS@AUTHORITY
dials ADDRESS with AUTHORITY as the calls' :authority (a sidecar routes by it).
"""

import json
import sys
import threading

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

# A deadline only turns a hang into an error the test reports.
DEADLINE = 30
channels = {}


def channel(target):
    if target not in channels:
        address, _, authority = target.partition("@")
        options = [("grpc.default_authority", authority)] if authority else []
        channels[target] = grpc.insecure_channel(address, options=options)
    return channels[target]


def pairs(words):
    return [tuple(word.split("=", 1)) for word in words] or None


def echo(target, method, metadata):
    try:
        return json.loads(channel(target).unary_unary(method)(b"", timeout=DEADLINE, metadata=metadata))
    except grpc.RpcError as error:
        return {"error": error.code().name, "message": error.details()}


def calls(target, method, n, metadata):
    call = channel(target).unary_unary(method)
    counts, errors, messages = {}, {}, []
    for _ in range(n):
        try:
            backend = json.loads(call(b"", timeout=DEADLINE, metadata=metadata))["backend"]
            counts[backend] = counts.get(backend, 0) + 1
        except grpc.RpcError as error:
            errors[error.code().name] = errors.get(error.code().name, 0) + 1
            if len(messages) < 3:
                messages.append(error.details())
    return {"counts": counts, "errors": errors, "messages": messages}


def health_check(target):
    stub = health_pb2_grpc.HealthStub(channel(target))
    try:
        reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=DEADLINE)
        return {"status": health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}
    except grpc.RpcError as error:
        return {"error": error.code().name, "message": error.details()}


def count(target, n, header):
    call = channel(target).unary_unary("/pilot.test.Who/Name")
    metadata = [tuple(header.split("=", 1))] if header else None
    counts, errors, messages = {}, {}, []
    for _ in range(n):
        try:
            name = call(b"", timeout=DEADLINE, metadata=metadata).decode()
            counts[name] = counts.get(name, 0) + 1
        except grpc.RpcError as error:
            errors[error.code().name] = errors.get(error.code().name, 0) + 1
            if len(messages) < 3:
                messages.append(error.details())
    return {"counts": counts, "errors": errors, "messages": messages}


class Load:
    """Calls /pilot.test.Who/Name on one target without pause until stopped."""

    def __init__(self, target):
        self.call = channel(target).unary_unary("/pilot.test.Who/Name")
        self.counts, self.errors, self.messages = {}, {}, []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopping.is_set():
            try:
                name = self.call(b"", timeout=DEADLINE).decode()
                self.counts[name] = self.counts.get(name, 0) + 1
            except grpc.RpcError as error:
                self.errors[error.code().name] = self.errors.get(error.code().name, 0) + 1
                if len(self.messages) < 3:
                    self.messages.append(error.details())

    def stop(self):
        self.stopping.set()
        self.thread.join()
        return {"counts": self.counts, "errors": self.errors, "messages": self.messages}


def main():
    load = None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "health":
            result = health_check(words[1])
        elif words[0] == "count":
            result = count(words[1], int(words[2]), words[3] if len(words) > 3 else None)
        elif words[0] == "echo":
            result = echo(words[1], words[2], pairs(words[3:]))
        elif words[0] == "calls":
            result = calls(words[1], words[2], int(words[3]), pairs(words[4:]))
        elif words[0] == "load" and load is None:
            load = Load(words[1])
            result = {"loading": words[1]}
        elif words[0] == "stop" and load is not None:
            result = load.stop()
            load = None
        else:
            result = {"error": "BAD_COMMAND", "message": line.strip()}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
