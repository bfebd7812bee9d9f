"""A gRPC server for pilot's gRPC tests: the standard health service
(SERVING), /pilot.test.Who/Name, which answers this server's name, and
every other method, which answers a JSON object: this server's name
("backend"), the method called ("method", `/package.Service/Method`) and
the metadata the call arrived with ("metadata": each key, lower case, to
the list of its values in order).

    server.py NAME PORT [--xds] [--tls CERT KEY] [--until-killed]

With --xds the server is xDS-enabled (GRPC_XDS_BOOTSTRAP names pilot): it
serves only once pilot has sent the listener for its address. With --tls
it serves TLS with the certificate chain and key of those PEM files. Prints
"started" once start() returned, then runs until stdin closes (the tests
hold it; then it stops gracefully: calls in flight finish, within
GRACE seconds), or with --until-killed until a signal ends it (a shell's
background job, docs/guide/grpc.md).
"""

import json
import sys
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

# How long calls in flight may take to finish once stdin closes.
GRACE = 10


class Echo(grpc.GenericRpcHandler):
    """Any method but the health service's: says who answered and what
    it got."""

    def __init__(self, name):
        self.name = name

    def service(self, details):
        if details.method.startswith("/grpc.health."):
            return None
        method = details.method

        def echo(request, context):
            metadata = {}
            for key, value in context.invocation_metadata():
                metadata.setdefault(key, []).append(value)
            reply = {"backend": self.name, "method": method, "metadata": metadata}
            return json.dumps(reply).encode()

        return grpc.unary_unary_rpc_method_handler(echo)


def main():
    name, port = sys.argv[1], int(sys.argv[2])
    xds = "--xds" in sys.argv[3:]
    tls = None
    if "--tls" in sys.argv[3:]:
        at = sys.argv.index("--tls")
        with open(sys.argv[at + 1], "rb") as chain, open(sys.argv[at + 2], "rb") as key:
            tls = grpc.ssl_server_credentials([(key.read(), chain.read())])
    until_killed = "--until-killed" in sys.argv[3:]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), xds=xds)
    who = grpc.method_handlers_generic_handler(
        "pilot.test.Who",
        {"Name": grpc.unary_unary_rpc_method_handler(lambda request, context: name.encode())},
    )
    server.add_generic_rpc_handlers((who,))
    checker = health.HealthServicer()
    checker.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    server.add_generic_rpc_handlers((Echo(name),))
    address = f"127.0.0.1:{port}"
    if xds:
        server.add_secure_port(address, grpc.xds_server_credentials(tls or grpc.insecure_server_credentials()))
    elif tls:
        server.add_secure_port(address, tls)
    else:
        server.add_insecure_port(address)
    server.start()
    print("started", flush=True)
    if until_killed:
        server.wait_for_termination()
    else:
        sys.stdin.read()
        server.stop(GRACE).wait()


if __name__ == "__main__":
    main()
