"""Websockets (PyPI websockets, in the same venv as gRPC) for pilot's
backend-protocol tests: an echo server and a client.

    websocket.py server NAME PORT
    websocket.py client

The server accepts websocket connections on 127.0.0.1:PORT and answers
each message with the same message (a text message as text, a binary one
as binary), except the text message "backend?", which it answers with
NAME. It prints "started" once it listens and runs until stdin closes.

The client reads one URL per line (ws://host:port/path), opens a
websocket to it (the handshake and frames are the library's), sends the
text "Websocket Support!", then the bytes 1 to 7, then "backend?", and
prints one JSON object per URL: "text" and "binary" (the replies, the
binary one as a list of numbers) and "backend", or "error" (what failed).
"""

import json
import sys
import threading

from websockets.sync.client import connect
from websockets.sync.server import serve

TIMEOUT = 5


def server(name, port):
    def echo(connection):
        for message in connection:
            if message == "backend?":
                connection.send(name)
            else:
                connection.send(message)

    with serve(echo, "127.0.0.1", port) as listening:
        threading.Thread(target=listening.serve_forever, daemon=True).start()
        print("started", flush=True)
        # Until the test closes stdin (or the process is killed).
        sys.stdin.read()
        listening.shutdown()


def exchange(url):
    with connect(url, open_timeout=TIMEOUT, close_timeout=TIMEOUT) as connection:
        connection.send("Websocket Support!")
        text = connection.recv(timeout=TIMEOUT)
        connection.send(bytes(range(1, 8)))
        binary = connection.recv(timeout=TIMEOUT)
        connection.send("backend?")
        backend = connection.recv(timeout=TIMEOUT)
    if isinstance(binary, str):
        return {"error": f"a binary message was answered with text {binary!r}"}
    return {"text": text, "binary": list(binary), "backend": backend}


def client():
    for line in sys.stdin:
        url = line.strip()
        try:
            answer = exchange(url)
        except Exception as error:  # what failed is the answer
            answer = {"error": f"{type(error).__name__}: {error}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["server"] and len(sys.argv) == 4:
        server(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1:] == ["client"]:
        client()
    else:
        sys.exit(__doc__)
