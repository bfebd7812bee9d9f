"""A grpcio client for pilot-h2's tests: raw-bytes bidi-streaming calls.

Usage: grpcio_client.py PORT CASE; prints "ok" and exits 0 when the case's
expectations hold, else fails with the reason.
"""
import sys
import threading

import grpc

port, case = sys.argv[1], sys.argv[2]
channel = grpc.insecure_channel(f"127.0.0.1:{port}")
grpc.channel_ready_future(channel).result(timeout=30)


def call(method):
    return channel.stream_stream(
        f"/test.Test/{method}", request_serializer=None, response_deserializer=None
    )


def echo(count, size, tag=0):
    sent = [bytes([(tag + i + j) % 256 for j in range(size)]) for i in range(count)]
    got = list(call("Echo")(iter(sent), timeout=60))
    assert len(got) == count, f"{len(got)} responses to {count} requests"
    for i, (a, b) in enumerate(zip(sent, got)):
        assert a == b, f"response {i} differs ({len(b)} bytes for {len(a)})"


if case == "echo":
    echo(200, 100)
    echo(1, 0)
elif case == "large":
    # Messages larger than the stream window both ways (65,535 by default).
    echo(3, 1_000_000)
    got = list(call("Sized")(iter([b"2000000", b"1"]), timeout=60))
    assert [len(m) for m in got] == [2_000_000, 1], [len(m) for m in got]
    assert got[0] == bytes(i % 251 for i in range(2_000_000))
elif case == "concurrent":
    errors = []

    def run(tag):
        try:
            echo(50, 1000, tag)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
elif case == "status":
    try:
        list(call("Status")(iter([b"x"]), timeout=30))
        raise AssertionError("the call succeeded")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()
        assert e.details() == "bad request: 100% \u00fc\n", repr(e.details())
elif case == "too_large":
    try:
        list(call("Echo")(iter([b"x" * 5000]), timeout=30))
        raise AssertionError("the call succeeded")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.code()
elif case == "unknown":
    try:
        list(call("Nothing")(iter([]), timeout=30))
        raise AssertionError("the call succeeded")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e.code()
elif case == "cancel":
    # A request stream that never ends, cancelled by the client.
    done = threading.Event()

    def requests():
        yield b"hello"
        done.wait(30)

    responses = call("Hold")(requests(), timeout=60)
    # Wait for the server to have the stream (it reports via a side call).
    sys.stdout.write("started\n")
    sys.stdout.flush()
    sys.stdin.readline()
    responses.cancel()
    done.set()
    try:
        next(responses)
        raise AssertionError("a response after cancel")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.CANCELLED, e.code()
else:
    raise SystemExit(f"unknown case {case}")
channel.close()
print("ok")
