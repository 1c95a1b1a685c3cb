"""A total time limit for one request of the sync tool, whatever the server does.

httpx's timeouts bound each connect, each read and each write on its own: a server that sends
one byte a second never trips a 2 s read timeout, and the request lasts as long as the server
likes. The sync tool's own client therefore runs on `DeadlineTransport`, whose network streams
cut every connect, read and write to the time left until the deadline of the request in
progress (a context variable set by `deadline`, so concurrent threads each keep their own). At
the deadline the pending operation fails with httpcore's timeout, which httpx raises as
`httpx2.TimeoutException`. The async tool bounds its requests with `anyio.fail_after` instead.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import httpx2
import httpcore2

_DEADLINE: ContextVar[float | None] = ContextVar("memkv_request_deadline", default=None)

# A write of a request body is cut into pieces of this size, each bounded by the time left:
# one socket write of a large buffer would otherwise get the whole timeout for every partial send.
_WRITE_PIECE = 64 * 1024


@contextmanager
def deadline(seconds: float | None) -> Iterator[float | None]:
    """Every network operation of the calling context's requests ends by `seconds` from now
    (no bound when None). Yields the deadline (`time.monotonic()` based) or None."""
    at = None if seconds is None else time.monotonic() + seconds
    token = _DEADLINE.set(at)
    try:
        yield at
    finally:
        _DEADLINE.reset(token)


def _clamp(timeout: float | None, expired: type[Exception]) -> float | None:
    at = _DEADLINE.get()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise expired("the request's time limit is reached")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamp(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        while True:
            self._inner.write(view[:_WRITE_PIECE], _clamp(timeout, httpcore2.WriteTimeout))
            view = view[_WRITE_PIECE:]
            if not view:
                return

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _clamp(timeout, httpcore2.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        stream = self._inner.connect_tcp(host, port, _clamp(timeout, httpcore2.ConnectTimeout), local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        stream = self._inner.connect_unix_socket(path, _clamp(timeout, httpcore2.ConnectTimeout), socket_options)
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx2.HTTPTransport):
    """httpx2's HTTP transport (default limits and TLS settings, no proxy) over
    `_DeadlineBackend`."""

    def __init__(self) -> None:
        super().__init__()
        limits = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_DeadlineBackend(),
        )
