"""A misbehaving HTTP server on a real loopback socket, for the failures memkv never produces:
one that trickles its answer, one that sends (or announces) a huge one, one that hangs up after
reading the request. Every connection is served by its own thread; `stop()` ends them all."""

from __future__ import annotations

import socket
import threading
from typing import Callable
from contextlib import suppress

GIB = 1024**3


def read_request(conn: socket.socket) -> bytes:
    """The request's head and body (by its content-length); b"" when the peer went away first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        body += chunk
    return head + b"\r\n\r\n" + body


class RogueServer:
    """`behave(server, conn)` runs for each connection once its first request was read."""

    def __init__(self, behave: "Callable[[RogueServer, socket.socket], None]") -> None:
        self.behave = behave
        self.stop_event = threading.Event()
        self.sent = 0
        """Body bytes the behaviours reported sending (see `send`)."""
        self.requests = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._acceptor = threading.Thread(target=self._accept, name="rogue-accept", daemon=True)
        self._acceptor.start()

    def send(self, conn: socket.socket, data: bytes) -> bool:
        """Sends `data`; False once the client has gone (or the server stops)."""
        if self.stop_event.is_set():
            return False
        try:
            conn.sendall(data)
        except OSError:
            return False
        with self._lock:
            self.sent += len(data)
        return True

    def _accept(self) -> None:
        while not self.stop_event.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            conn.settimeout(30)
            with self._lock:
                self._conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), name="rogue-conn", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, suppress(OSError):
            if read_request(conn):
                with self._lock:
                    self.requests += 1
                self.behave(self, conn)

    def stop(self) -> None:
        self.stop_event.set()
        with suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._acceptor.join(10)
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(10)
        assert not self._acceptor.is_alive() and not any(t.is_alive() for t in self._threads)

    def __enter__(self) -> "RogueServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def head(status: str = "200 OK", **headers: str | int) -> bytes:
    lines = [f"HTTP/1.1 {status}", "content-type: application/json"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def trickle(every: float = 1.0, length: int = 1000) -> "Callable[[RogueServer, socket.socket], None]":
    """Headers at once, then one body byte every `every` seconds (at most `length` of them)."""

    def behave(server: RogueServer, conn: socket.socket) -> None:
        if not server.send(conn, head(content_length=length)):
            return
        for _ in range(length):
            if server.stop_event.wait(every) or not server.send(conn, b" "):
                return

    return behave


def flood(announce: bool, total: int = GIB) -> "Callable[[RogueServer, socket.socket], None]":
    """A `total`-byte body as fast as the client takes it, announced by content-length or
    (`announce=False`) delimited by closing the connection; stops when the client goes."""

    def behave(server: RogueServer, conn: socket.socket) -> None:
        headers = head(content_length=total) if announce else head(connection="close")
        if not server.send(conn, headers):
            return
        piece = b"x" * 65536
        for _ in range(total // len(piece)):
            if not server.send(conn, piece):
                return

    return behave


def hang_up(server: RogueServer, conn: socket.socket) -> None:
    """Closes the connection without a word once the request is read."""
