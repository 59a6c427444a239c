"""The far end of the async store used by the event-loop stall benchmark, in its own process.

It stands in for the Task SDK supervisor / API server: frames are a 4-byte big-endian length
and a JSON body. ``{"op": "set", "key": k, "value": v}`` stores ``v`` (kept as JSON text) and
answers ``{"ok": true}``; ``{"op": "get", "key": k}`` answers ``{"found": true, "value": v}``
(the stored JSON text echoed back, so the value's size matters both ways) or
``{"found": false}``. Prints its port, serves one connection at a time, ends on EOF of stdin.
"""

from __future__ import annotations

import json
import socket
import sys
import threading


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = conn.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _serve(conn: socket.socket) -> None:
    stored: dict[str, bytes] = {}
    with conn:
        while True:
            try:
                size = int.from_bytes(_recv_exact(conn, 4), "big")
                request = json.loads(_recv_exact(conn, size))
            except (ConnectionError, OSError):
                return
            if request["op"] == "set":
                stored[request["key"]] = json.dumps(request["value"]).encode()
                body = b'{"ok": true}'
            elif request["key"] in stored:
                body = b'{"found": true, "value": ' + stored[request["key"]] + b"}"
            else:
                body = b'{"found": false}'
            conn.sendall(len(body).to_bytes(4, "big") + body)


def main() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _serve(conn)

    threading.Thread(target=accept, daemon=True).start()
    print(server.getsockname()[1], flush=True)
    sys.stdin.read()  # until the parent closes our stdin


if __name__ == "__main__":
    main()
