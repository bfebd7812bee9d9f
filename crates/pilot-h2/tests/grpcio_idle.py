"""Opens N grpcio connections, each with one Echo stream that exchanged a
message and then stays open and idle; prints "ready", waits for a line on
stdin, then ends the streams and prints "ok".

Usage: grpcio_idle.py PORT N [park]: with "park" the server answers nothing
(its service keeps the streams' handles without a task): the first message
is sent and not awaited, and the calls are cancelled at the end.
"""
import sys
import threading

import grpc

port, count = sys.argv[1], int(sys.argv[2])
park = sys.argv[3:] == ["park"]
stop = threading.Event()
calls = []
channels = []
for i in range(count):
    # A local subchannel pool: one connection per channel.
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
    channels.append(channel)
    method = channel.stream_stream("/test.Test/Echo", request_serializer=None, response_deserializer=None)

    def requests(i=i):
        yield b"hello %d" % i
        stop.wait()

    responses = method(requests(), timeout=120)
    if not park:
        assert next(responses) == b"hello %d" % i
    calls.append(responses)
print("ready", flush=True)
sys.stdin.readline()
stop.set()
for responses in calls:
    if park:
        responses.cancel()
    else:
        assert list(responses) == []
for channel in channels:
    channel.close()
print("ok")
