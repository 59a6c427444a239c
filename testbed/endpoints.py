"""Endpoints on 127.0.0.1 for a backend to send to: an HTTP sink that answers every POST, and a TCP
listener that accepts connections and never answers (what a hung OTLP collector looks like).
"""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

T = TypeVar("T")


def read_until_stopped(stop: threading.Event, read: Callable[[], T], keep: Callable[[T], object]) -> None:
    """A reader thread's loop: ``keep(read())`` until ``stop`` is set or the socket is closed
    (``read`` on a socket with a timeout, so that ``stop`` is looked at between reads)."""
    while not stop.is_set():
        try:
            item = read()
        except TimeoutError:
            continue
        except OSError:
            return
        keep(item)


class HttpPostSink:
    """A real HTTP server on 127.0.0.1 (``port``, or a free one) that answers every POST with 200.

    Each body (gunzipped when sent with ``Content-Encoding: gzip``) goes to ``take`` with its
    path; ``posts`` and ``bytes`` count what arrived. ``close`` and ``reopen`` take the
    port down and bring it back (the same port: a sender's endpoint does not change).
    """

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.posts = 0
        self.bytes = 0
        self._server: ThreadingHTTPServer | None = None
        self.reopen()

    def reopen(self) -> None:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sink.posts += 1
                sink.bytes += len(body)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                sink.take(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def take(self, path: str, body: bytes) -> None:
        """One POST's path and body; a receiver that decodes overrides it."""

    @property
    def endpoint(self) -> str:
        """The URL an OTLP/HTTP metrics exporter posts to."""
        return f"http://127.0.0.1:{self.port}/v1/metrics"

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


class SilentTcpServer:
    """Accepts TCP connections on 127.0.0.1 (``port``, or a free one) and never sends a byte back."""

    def __init__(self, port: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.sock.settimeout(0.05)
        self.port: int = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        # Each connection is kept, never read, never answered.
        args = (self._stop, lambda: self.sock.accept()[0], self.accepted.append)
        self._thread = threading.Thread(target=read_until_stopped, args=args, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        for conn in self.accepted:
            conn.close()
        self.sock.close()
