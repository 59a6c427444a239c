"""A UDP sink in its own process: reads every datagram on 127.0.0.1 and counts lines.

Run by ``benchmarks.common.UdpSink``. Being another process, its reading never competes
with the measured process for the GIL. Protocol on stdin/stdout: it prints its port first;
then ``count`` answers ``<datagrams> <lines>``, ``reset`` zeroes both, EOF ends it.
"""

from __future__ import annotations

import socket
import sys
import threading


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
    sock.bind(("127.0.0.1", 0))
    counts = [0, 0]
    lock = threading.Lock()

    def receive() -> None:
        while True:
            data = sock.recv(65535)
            with lock:
                counts[0] += 1
                counts[1] += data.count(b"\n") + (0 if data.endswith(b"\n") else 1)

    threading.Thread(target=receive, daemon=True).start()
    print(sock.getsockname()[1], flush=True)
    for line in sys.stdin:
        command = line.strip()
        with lock:
            if command == "count":
                print(f"{counts[0]} {counts[1]}", flush=True)
            elif command == "reset":
                counts[0] = counts[1] = 0
                print("ok", flush=True)


if __name__ == "__main__":
    main()
