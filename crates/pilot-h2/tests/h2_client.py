"""Edge and hostile HTTP/2 clients for pilot-h2's tests, with Python `h2`
(the hyper-h2 protocol library) and its `hpack`, or raw frames where a
well-behaved library would refuse to misbehave.

Usage: h2_client.py PORT CASE; prints "ok" and exits 0 when the case's
expectations hold, else fails with the reason.
"""
import socket
import struct
import sys

import h2.config
import h2.connection
import h2.events
import h2.settings
import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8

port, case = int(sys.argv[1]), sys.argv[2]


def grpc(message):
    return b"\0" + struct.pack(">I", len(message)) + message


class Raw:
    """A client writing frames by hand and reading the server's."""

    def __init__(self, settings=()):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.answer_pings = True
        self.goaways = []
        self.s.sendall(PREFACE)
        self.send(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in settings))

    def send(self, kind, flags, stream, payload):
        head = struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream)
        self.s.sendall(head + payload)

    def read(self, n):
        while len(self.buf) < n:
            try:
                chunk = self.s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self):
        head = self.read(9)
        if head is None:
            return None
        length = struct.unpack(">I", b"\0" + head[:3])[0]
        kind, flags = head[3], head[4]
        stream = struct.unpack(">I", head[5:9])[0] & 0x7FFFFFFF
        payload = self.read(length) if length else b""
        if kind == SETTINGS and not flags & ACK:
            self.send(SETTINGS, ACK, 0, b"")
            # The server announced HEADER_TABLE_SIZE 0: stop indexing.
            self.enc.header_table_size = 0
        if kind == GOAWAY:
            self.goaways.append(struct.unpack(">II", payload[:8]))
        if kind == PING and not flags & ACK and self.answer_pings:
            self.send(PING, ACK, 0, payload)
        return kind, flags, stream, payload

    def until(self, pred):
        """The first frame satisfying pred; None when the connection closed first."""
        while True:
            f = self.frame()
            if f is None or pred(*f):
                return f

    def handshake(self):
        assert self.until(lambda k, fl, s, p: k == SETTINGS and not fl & ACK), "no SETTINGS"

    def block(self, path="/test.Test/Echo", extra=()):
        fields = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
        return self.enc.encode(fields + list(extra))

    def headers(self, frame):
        return dict(self.dec.decode(frame[3]))

    def closed(self):
        """Whether the server closes the connection (reading until it does)."""
        return self.until(lambda *f: False) is None

    def goaway(self):
        if not self.goaways:
            assert self.until(lambda k, *_: k == GOAWAY) is not None, "closed without GOAWAY"
        return self.goaways[0]


def echo_response(raw, stream):
    """Reads an Echo stream's response: (data bytes, trailers)."""
    data = b""
    while True:
        f = raw.until(lambda k, fl, s, p: s == stream and k in (DATA, HEADERS, RST_STREAM))
        assert f is not None, "closed before the response ended"
        if f[0] == DATA:
            data += f[3]
            if f[3] and not f[1] & END_STREAM:
                try:
                    raw.send(WINDOW_UPDATE, 0, 0, struct.pack(">I", len(f[3])))
                    raw.send(WINDOW_UPDATE, 0, stream, struct.pack(">I", len(f[3])))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server may close once the response is written
        elif f[0] == RST_STREAM:
            raise AssertionError(f"reset {struct.unpack('>I', f[3])[0]}")
        else:
            fields = raw.headers(f)
            if f[1] & END_STREAM:
                return data, fields


def library_client(settings=None):
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    if settings:
        conn.update_settings(settings)
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(conn.data_to_send())
    return conn, s


def request_headers(path):
    return [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]


def library_call(conn, s, path, messages, consume=None):
    """A whole call with the h2 library (which enforces our flow control
    towards it); returns (data, trailers)."""
    stream = conn.get_next_available_stream_id()
    conn.send_headers(stream, request_headers(path))
    body = b"".join(grpc(m) for m in messages)
    conn.send_data(stream, body, end_stream=True)
    s.sendall(conn.data_to_send())
    data, trailers = b"", None
    while trailers is None:
        chunk = s.recv(65536)
        assert chunk, "connection closed"
        for event in conn.receive_data(chunk):
            if isinstance(event, h2.events.DataReceived) and event.stream_id == stream:
                data += event.data
                if consume:
                    consume(conn, event)
                else:
                    conn.acknowledge_received_data(event.flow_controlled_length, stream)
            elif isinstance(event, h2.events.TrailersReceived) and event.stream_id == stream:
                trailers = dict(event.headers)
            elif isinstance(event, h2.events.StreamReset):
                raise AssertionError(f"stream reset {event.error_code}")
        s.sendall(conn.data_to_send())
    return data, trailers


if case == "dynamic_table":
    # The library indexes request headers until it sees our table size 0.
    conn, s = library_client()
    for i in range(3):
        data, trailers = library_call(conn, s, "/test.Test/Echo", [b"hello %d" % i])
        assert data == grpc(b"hello %d" % i), data
        assert trailers["grpc-status"] == "0", trailers
elif case == "small_window":
    # The client's stream window is 10 bytes: the server's DATA must stay
    # within it (h2 fails on any excess) and resume on each update.
    conn, s = library_client({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 10})
    data, trailers = library_call(conn, s, "/test.Test/Sized", [b"30000"])
    assert len(data) == 30005, len(data)
    assert trailers["grpc-status"] == "0", trailers
elif case == "window_from_settings":
    # A window of 0, opened later by SETTINGS_INITIAL_WINDOW_SIZE alone.
    conn, s = library_client({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    stream = conn.get_next_available_stream_id()
    conn.send_headers(stream, request_headers("/test.Test/Sized"))
    conn.send_data(stream, grpc(b"1000"), end_stream=True)
    s.sendall(conn.data_to_send())
    s.settimeout(1.0)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            assert chunk
            for event in conn.receive_data(chunk):
                if isinstance(event, h2.events.DataReceived):
                    data += event.data
            s.sendall(conn.data_to_send())
    except socket.timeout:
        pass
    assert data == b"", f"{len(data)} bytes beyond a window of 0"
    s.settimeout(20)
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535})
    s.sendall(conn.data_to_send())
    done = False
    while not done:
        chunk = s.recv(65536)
        assert chunk, "closed"
        for event in conn.receive_data(chunk):
            if isinstance(event, h2.events.DataReceived):
                data += event.data
            if isinstance(event, h2.events.TrailersReceived):
                done = True
        s.sendall(conn.data_to_send())
    assert len(data) == 1005, len(data)
elif case == "ping":
    raw = Raw()
    raw.handshake()
    raw.send(PING, 0, 0, b"12345678")
    f = raw.until(lambda k, fl, s, p: k == PING and fl & ACK)
    assert f and f[3] == b"12345678", f
elif case == "continuation_and_padding":
    raw = Raw()
    raw.handshake()
    block = raw.block(extra=[("x-filler", "y" * 300)])
    # HEADERS padded, then two CONTINUATIONs.
    pad = 7
    raw.send(HEADERS, PADDED, 1, bytes([pad]) + block[:100] + b"\0" * pad)
    raw.send(CONTINUATION, 0, 1, block[100:200])
    raw.send(CONTINUATION, END_HEADERS, 1, block[200:])
    # DATA padded.
    message = grpc(b"padded hello")
    raw.send(DATA, PADDED | END_STREAM, 1, bytes([20]) + message + b"\0" * 20)
    data, trailers = echo_response(raw, 1)
    assert data == message, data
    assert trailers["grpc-status"] == "0", trailers
elif case == "interleaved":
    raw = Raw()
    raw.handshake()
    raw.send(HEADERS, 0, 1, raw.block()[:10])
    raw.send(PING, 0, 0, b"abcdefgh")
    assert raw.goaway()[1] == 1, "not PROTOCOL_ERROR"
    assert raw.closed()
elif case == "bad_preface":
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    while s.recv(65536):
        pass
elif case == "settings_first":
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    raw = Raw.__new__(Raw)
    raw.s, raw.buf, raw.answer_pings, raw.goaways = s, b"", True, []
    raw.enc, raw.dec = hpack.Encoder(), hpack.Decoder()
    s.sendall(PREFACE)
    raw.send(PING, 0, 0, b"abcdefgh")
    assert raw.goaway()[1] == 1, "not PROTOCOL_ERROR"
elif case == "push_promise":
    raw = Raw()
    raw.handshake()
    raw.send(PUSH_PROMISE, END_HEADERS, 1, struct.pack(">I", 2) + raw.block())
    assert raw.goaway()[1] == 1, "not PROTOCOL_ERROR"
elif case == "frame_too_large":
    raw = Raw()
    raw.handshake()
    raw.send(HEADERS, END_HEADERS, 1, raw.block(path="/test.Test/Hold"))
    raw.send(DATA, 0, 1, b"\0" * 20000)
    assert raw.goaway()[1] == 6, "not FRAME_SIZE_ERROR"
elif case == "window_overflow":
    raw = Raw()
    raw.handshake()
    raw.send(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF))
    assert raw.goaway()[1] == 3, "not FLOW_CONTROL_ERROR"
elif case == "data_beyond_window":
    # The application reads nothing: more than the 65,535-byte stream
    # window is a stream error FLOW_CONTROL_ERROR, the connection lives on.
    raw = Raw()
    raw.handshake()
    raw.send(HEADERS, END_HEADERS, 1, raw.block(path="/test.Test/Hold"))
    for _ in range(5):
        raw.send(DATA, 0, 1, b"\0" * 16000)
    f = raw.until(lambda k, fl, s, p: k == RST_STREAM and s == 1)
    assert f and struct.unpack(">I", f[3])[0] == 3, f
    raw.send(HEADERS, END_HEADERS, 3, raw.block())
    raw.send(DATA, END_STREAM, 3, grpc(b"still here"))
    data, trailers = echo_response(raw, 3)
    assert data == grpc(b"still here") and trailers["grpc-status"] == "0", (data, trailers)
elif case == "reset_by_client":
    raw = Raw()
    raw.handshake()
    raw.send(HEADERS, END_HEADERS, 1, raw.block(path="/test.Test/Hold"))
    raw.send(DATA, 0, 1, grpc(b"x"))
    raw.send(RST_STREAM, 0, 1, struct.pack(">I", 8))
    raw.send(HEADERS, END_HEADERS | END_STREAM, 3, raw.block(path="/test.Test/Status"))
    data, trailers = echo_response(raw, 3)
    assert trailers["grpc-status"] == "3", trailers
    assert trailers["grpc-message"] == "bad request: 100%25 %C3%BC%0A", trailers
elif case == "too_many_streams":
    raw = Raw()
    raw.handshake()
    for stream in (1, 3, 5):
        raw.send(HEADERS, END_HEADERS, stream, raw.block(path="/test.Test/Hold"))
    f = raw.until(lambda k, fl, s, p: k == RST_STREAM)
    assert f and f[2] == 5 and struct.unpack(">I", f[3])[0] == 7, f
elif case == "header_list_too_large":
    raw = Raw()
    raw.handshake()
    raw.send(HEADERS, END_HEADERS | END_STREAM, 1, raw.block(extra=[("x-big", "z" * 3000)]))
    f = raw.until(lambda k, fl, s, p: k == HEADERS and s == 1)
    assert f and raw.headers(f)[":status"] == "431", f
    # The connection goes on, its HPACK state intact.
    raw.send(HEADERS, END_HEADERS, 3, raw.block())
    raw.send(DATA, END_STREAM, 3, grpc(b"after"))
    data, trailers = echo_response(raw, 3)
    assert data == grpc(b"after"), data
elif case == "unknown_and_priority":
    raw = Raw()
    raw.handshake()
    raw.send(0xFA, 0xFF, 0, b"ignore me")
    raw.send(PRIORITY, 0, 1, struct.pack(">IB", 0, 16))
    raw.send(HEADERS, END_HEADERS | 0x20, 1, struct.pack(">IB", 0, 16) + raw.block())
    raw.send(DATA, END_STREAM, 1, grpc(b"prioritised"))
    data, trailers = echo_response(raw, 1)
    assert data == grpc(b"prioritised"), data
elif case == "client_goaway":
    raw = Raw()
    raw.handshake()
    raw.send(HEADERS, END_HEADERS, 1, raw.block())
    raw.send(GOAWAY, 0, 0, struct.pack(">II", 0, 0))
    raw.send(DATA, END_STREAM, 1, grpc(b"last"))
    data, trailers = echo_response(raw, 1)
    assert data == grpc(b"last"), data
    assert raw.closed(), "still open with no stream left after GOAWAY"
elif case in ("keepalive_unanswered", "keepalive_answered"):
    raw = Raw()
    raw.answer_pings = case == "keepalive_answered"
    raw.handshake()
    pings = 0
    while pings < 3:
        f = raw.until(lambda k, fl, s, p: k == PING and not fl & ACK)
        if f is None:
            break
        pings += 1
    if raw.answer_pings:
        assert pings == 3, pings
    else:
        assert pings == 1, pings
        assert raw.closed()
elif case in ("graceful", "max_connection_age_graceful"):
    # An open stream when the server shuts down (or reaches its maximum
    # age): GOAWAY naming it, the stream finishes, then the server closes.
    raw = Raw()
    raw.handshake()
    raw.send(HEADERS, END_HEADERS, 1, raw.block())
    raw.send(DATA, 0, 1, grpc(b"one"))
    f = raw.until(lambda k, fl, s, p: k == DATA and s == 1)
    assert f and f[3] == grpc(b"one"), f
    if case == "graceful":
        print("open", flush=True)
    last, code = raw.goaway()
    assert (last, code) == (1, 0), (last, code)
    # A new stream after GOAWAY is ignored.
    raw.send(HEADERS, END_HEADERS | END_STREAM, 3, raw.block())
    raw.send(DATA, END_STREAM, 1, grpc(b"two"))
    data, trailers = echo_response(raw, 1)
    assert data == grpc(b"two"), data
    assert trailers["grpc-status"] == "0", trailers
    assert raw.closed()
elif case == "stream_rules":
    # Each rule on a connection of its own: (what the client sends, what the
    # server must answer: ("goaway", code) or ("reset", stream, code) or
    # ("status", stream, http status)).
    def rst_code(raw, stream):
        f = raw.until(lambda k, fl, s, p: k == RST_STREAM and s == stream)
        assert f is not None, "closed without RST_STREAM"
        return struct.unpack(">I", f[3])[0]

    def rule(name, send, expect):
        raw = Raw()
        raw.handshake()
        send(raw)
        if expect[0] == "goaway":
            got = raw.goaway()[1]
            assert got == expect[1], f"{name}: GOAWAY {got}, not {expect[1]}"
        elif expect[0] == "reset":
            got = rst_code(raw, expect[1])
            assert got == expect[2], f"{name}: RST_STREAM {got}, not {expect[2]}"
        else:
            f = raw.until(lambda k, fl, s, p: k == HEADERS and s == expect[1])
            assert f is not None, f"{name}: no response"
            got = raw.headers(f)[":status"]
            assert got == expect[2], f"{name}: status {got}, not {expect[2]}"

    hold = lambda raw, flags=END_HEADERS: raw.send(HEADERS, flags, 1, raw.block(path="/test.Test/Hold"))
    rule("DATA on an idle stream", lambda raw: raw.send(DATA, 0, 1, b"x"), ("goaway", 1))
    rule("HEADERS on an even stream", lambda raw: raw.send(HEADERS, END_HEADERS, 2, raw.block()), ("goaway", 1))
    rule("CONTINUATION alone", lambda raw: raw.send(CONTINUATION, END_HEADERS, 1, raw.block()), ("goaway", 1))
    rule("RST_STREAM on an idle stream", lambda raw: raw.send(RST_STREAM, 0, 1, struct.pack(">I", 8)), ("goaway", 1))
    rule(
        "trailers without END_STREAM",
        lambda raw: (hold(raw), raw.send(HEADERS, END_HEADERS, 1, raw.enc.encode([("x-trailer", "1")]))),
        ("reset", 1, 1),
    )
    rule(
        "DATA after END_STREAM",
        lambda raw: (hold(raw, END_HEADERS | END_STREAM), raw.send(DATA, 0, 1, grpc(b"late"))),
        ("reset", 1, 5),
    )
    rule(
        "WINDOW_UPDATE of 0 on a stream",
        lambda raw: (hold(raw), raw.send(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0))),
        ("reset", 1, 1),
    )
    rule(
        "a stream window beyond 2^31-1",
        lambda raw: (hold(raw), raw.send(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0x7FFFFFFF))),
        ("reset", 1, 3),
    )
    rule(
        "SETTINGS_INITIAL_WINDOW_SIZE overflowing an open stream",
        lambda raw: (
            hold(raw),
            raw.send(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0x7FFFFFFF - 65535)),
            raw.send(SETTINGS, 0, 0, struct.pack(">HI", 4, 65536)),
        ),
        ("goaway", 3),
    )
    rule(
        "an uppercase field name",
        lambda raw: raw.send(HEADERS, END_HEADERS, 1, raw.block(extra=[("X-Upper", "1")])),
        ("reset", 1, 1),
    )
    rule(
        "a connection-specific field",
        lambda raw: raw.send(HEADERS, END_HEADERS, 1, raw.block(extra=[("connection", "keep-alive")])),
        ("reset", 1, 1),
    )
    rule(
        "no :path",
        lambda raw: raw.send(
            HEADERS, END_HEADERS, 1, raw.enc.encode([(":method", "POST"), (":scheme", "http")])
        ),
        ("reset", 1, 1),
    )
    rule(
        "GET",
        lambda raw: raw.send(
            HEADERS,
            END_HEADERS | END_STREAM,
            1,
            raw.enc.encode([(":method", "GET"), (":scheme", "http"), (":path", "/")]),
        ),
        ("status", 1, "405"),
    )
    rule(
        "not gRPC",
        lambda raw: raw.send(
            HEADERS,
            END_HEADERS | END_STREAM,
            1,
            raw.enc.encode([(":method", "POST"), (":scheme", "http"), (":path", "/"), ("content-type", "text/plain")]),
        ),
        ("status", 1, "415"),
    )
elif case == "backpressure":
    # A window of 0: the service's sends stop once its queue is full; the
    # test reads the service's progress, then a line on stdin opens the
    # windows and every message arrives.
    raw = Raw(settings=[(4, 0)])
    raw.handshake()
    raw.send(HEADERS, END_HEADERS | END_STREAM, 1, raw.block(path="/test.Test/Flood"))
    print("open", flush=True)
    sys.stdin.readline()
    raw.send(SETTINGS, 0, 0, struct.pack(">HI", 4, 0x7FFFFFFF))
    raw.send(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535))
    total = 0
    while True:
        f = raw.until(lambda k, fl, s, p: s == 1 and k in (DATA, HEADERS, RST_STREAM))
        assert f is not None and f[0] != RST_STREAM, f
        if f[0] == DATA:
            total += len(f[3])
        elif f[1] & END_STREAM:
            assert raw.headers(f)["grpc-status"] == "0"
            break
    assert total == 10 * 100_005, total
elif case == "rapid_reset":
    # Streams opened and reset at once, over and over: the server ends the
    # connection with ENHANCE_YOUR_CALM rather than keep calling its service.
    raw = Raw()
    raw.handshake()
    try:
        for i in range(1100):
            stream = 2 * i + 1
            raw.send(HEADERS, END_HEADERS, stream, raw.block(path="/test.Test/Hold"))
            raw.send(RST_STREAM, 0, stream, struct.pack(">I", 8))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server closed, its GOAWAY is in our receive buffer
    assert raw.goaway()[1] == 11, raw.goaways
elif case == "grace":
    # Shutdown with a stream that never ends: GOAWAY, then the connection
    # closes when the grace ends.
    raw = Raw()
    raw.handshake()
    raw.send(HEADERS, END_HEADERS, 1, raw.block(path="/test.Test/Hold"))
    print("open", flush=True)
    assert raw.goaway() == (1, 0), raw.goaways
    assert raw.closed()
elif case == "headers_early":
    # A stream whose service sends its HEADERS before any message: they
    # come while the client still sends (no END_STREAM), and once the
    # client ends its side the stream ends with trailers, not trailers-only.
    raw = Raw()
    raw.handshake()
    raw.send(HEADERS, END_HEADERS, 1, raw.block(path="/test.Test/Headers"))
    f = raw.until(lambda k, fl, s, p: s == 1 and k in (DATA, HEADERS, RST_STREAM))
    assert f is not None and f[0] == HEADERS and not f[1] & END_STREAM, f
    head = raw.headers(f)
    assert head[":status"] == "200" and "grpc-status" not in head, head
    raw.send(DATA, END_STREAM, 1, b"")
    f = raw.until(lambda k, fl, s, p: s == 1 and k in (DATA, HEADERS, RST_STREAM))
    assert f is not None and f[0] == HEADERS and f[1] & END_STREAM, f
    assert raw.headers(f)["grpc-status"] == "0", raw.headers(f)
else:
    raise SystemExit(f"unknown case {case}")
print("ok")
