"""What the sync and async tools share: configuration, the request, and reading the answer.

The route is `POST {base_url}/v1/memory_stores/{store}/tool` with the tool_use block's `input`
object as the body; the answer is `{"content": ..., "is_error": ...}`, `content` being exactly
what `memkv exec` prints for the same input. HTTP errors carry the Anthropic error envelope.
"""

from __future__ import annotations

import os
import json
import random
from typing import Any, Mapping, NamedTuple
from urllib.parse import quote

import httpx2
from anthropic.tools import ToolError

from ._errors import MemkvError, MemkvTimeoutError, MemkvConnectionError

from ._version import __version__

DEFAULT_TIMEOUT = 30.0
"""Seconds one request may take in all: connecting, sending it and receiving the whole answer."""

DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024
"""The largest answer body the tools read (8 MiB); a larger one is refused as it arrives.

What memkv answers is bounded by its limits: an error quoting the model's `old_str` back is at
most the request, which memkv caps at `12 * max_file_bytes + 64 KiB` (1.23 MiB with the default
100 KiB files); a `str_replace` snippet, about ten bytes per byte of a file at the size limit
(~1 MiB); a `view`, `view_max_chars` (16,000) characters, six bytes each at worst once
JSON-escaped. 8 MiB leaves room for a server run with `--max-file-bytes` up to about 640 KiB;
pass `max_answer_bytes=` for one with larger files."""

DEFAULT_MAX_RETRIES = 2
"""Retries of a request memkv refused without acting on it (429, 503) or that never connected."""

MAX_RETRY_WAIT = 10.0
"""The longest pause before a retry, whatever `Retry-After` asks."""

RETRYABLE_STATUS = (429, 503)


def resolve_base_url(base_url: str | None) -> str:
    url = base_url if base_url is not None else os.environ.get("MEMKV_URL")
    if not url:
        raise MemkvError(
            "no memkv URL: pass base_url=... or set MEMKV_URL (e.g. http://127.0.0.1:7437)",
            type="configuration_error",
        )
    return url.rstrip("/")


def resolve_api_key(api_key: str | None) -> str | None:
    key = api_key if api_key is not None else os.environ.get("MEMKV_API_KEY")
    return key or None


def check_store(store: str) -> str:
    if not isinstance(store, str) or not store:
        raise ValueError("store must be a non-empty string (the memkv user id)")
    return store


def tool_path(store: str) -> str:
    """The tool route of one memory store, the store id as ONE percent-encoded path segment:
    everything but letters, digits and `-_~` encoded, `/` and `.` included (an HTTP client
    removes `.` and `..` segments, so a store named `.` would otherwise reach another route)."""
    check_store(store)
    return f"/v1/memory_stores/{quote(store, safe='').replace('.', '%2E')}/tool"


def store_path(store: str) -> str:
    """The memory-stores API route of one store (the tool route without `/tool`)."""
    return tool_path(store).removesuffix("/tool")


CLEARED = "All memory cleared"


class Answer(NamedTuple):
    """An HTTP answer read in full (at most `max_answer_bytes` of body)."""

    status: int
    reason: str
    headers: httpx2.Headers
    body: bytes


def cleared(answer: Answer) -> str:
    """`clear_all_memory`'s answer to memkv's reply to deleting the store: a store that was
    never written (404) has nothing to clear."""
    if answer.status in (200, 404):
        return CLEARED
    raise http_error(answer)


def headers(api_key: str | None) -> dict[str, str]:
    out = {
        "content-type": "application/json",
        "accept": "application/json",
        "accept-encoding": "identity",
        "user-agent": f"memkv-python/{__version__}",
    }
    if api_key is not None:
        out["x-api-key"] = api_key
    return out


def make_timeout(timeout: float | httpx2.Timeout | None) -> httpx2.Timeout:
    if isinstance(timeout, httpx2.Timeout):
        return timeout
    return httpx2.Timeout(timeout)


def total_timeout(timeout: float | httpx2.Timeout | None) -> float | None:
    """The bound on a whole request: a number of seconds, or None for an `httpx2.Timeout`
    (httpx's own per-operation timeouts, nothing more) or for no timeout at all."""
    if timeout is None or isinstance(timeout, httpx2.Timeout):
        return None
    if timeout <= 0:
        raise ValueError("timeout must be a positive number of seconds")
    return float(timeout)


def check_max_answer_bytes(max_answer_bytes: int) -> int:
    if not isinstance(max_answer_bytes, int) or max_answer_bytes <= 0:
        raise ValueError("max_answer_bytes must be a positive integer")
    return max_answer_bytes


def too_large(url: str, cap: int, announced: int | None, status: int) -> MemkvError:
    size = f"announces {announced:,} bytes" if announced is not None else "goes on past the limit"
    return MemkvError(
        f"the answer from {url} {size}, more than max_answer_bytes={cap:,}: it is not a memkv tool "
        f"result, so the rest was not read; {UNKNOWN_OUTCOME}",
        status=status,
        type="answer_too_large",
    )


def check_answer_head(response: httpx2.Response, url: str, cap: int) -> None:
    """Refuses, before reading its body, an answer that announces more than `cap` bytes or comes
    compressed (the tools ask for `identity`; memkv never compresses, and a compressed body
    could unpack to any size)."""
    value = response.headers.get("content-length", "").strip()
    if value.isdigit() and int(value) > cap:
        raise too_large(url, cap, int(value), response.status_code)
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise MemkvError(
            f"the answer from {url} is compressed ({encoding}), which memkv never does; {UNKNOWN_OUTCOME}",
            status=response.status_code,
            type="protocol_error",
        )


def encode(input: object) -> bytes:
    """The command's input object as JSON, strings unchanged (no ASCII escaping)."""
    return json.dumps(input, ensure_ascii=False, separators=(",", ":"), default=command_input).encode("utf-8")


def command_input(command: object) -> object:
    """A command as the SDK hands it to the six methods (a model built from the tool_use input,
    extra keys kept) or as a plain mapping, back to the input object."""
    if isinstance(command, Mapping):
        return dict(command)
    to_dict = getattr(command, "to_dict", None)
    if callable(to_dict):
        return to_dict(mode="json", exclude_unset=True)
    raise TypeError(f"not a memory command: {type(command).__name__}")


def retry_after(headers: httpx2.Headers) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def retry_wait(attempt: int, error: MemkvError) -> float:
    """The pause before retry number `attempt + 1`: `Retry-After` if given, else exponential
    backoff, plus up to a quarter more at random so that callers refused together do not all
    come back at the same instant."""
    base = error.retry_after if error.retry_after is not None else 0.25 * (2**attempt)
    return min(base * (1 + random.random() / 4), MAX_RETRY_WAIT)


UNKNOWN_OUTCOME = "the command may or may not have been applied (wholly or not at all: each memkv command is one transaction)"
"""What a caller knows of a command whose request was sent but whose answer never came."""


def transport_error(exc: httpx2.HTTPError, url: str, total: float | None) -> MemkvConnectionError:
    """The error for a request that got no (complete) answer, saying where it went and whether
    anything can have been applied: nothing when no connection was made."""
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, (httpx2.ConnectTimeout, httpx2.PoolTimeout)):
        return MemkvTimeoutError(f"cannot connect to {url} in time ({what}); nothing was sent", type="timeout_error")
    if isinstance(exc, httpx2.TimeoutException):
        within = f" within {total:g} s" if total is not None else " in time"
        return MemkvTimeoutError(f"no complete answer from {url}{within} ({what}); {UNKNOWN_OUTCOME}", type="timeout_error")
    if isinstance(exc, httpx2.ConnectError):
        return MemkvConnectionError(f"cannot reach {url} ({what}); nothing was sent", type="connection_error")
    return MemkvConnectionError(
        f"the connection to {url} failed after the request was sent ({what}); {UNKNOWN_OUTCOME}",
        type="connection_error",
    )


def deadline_passed(url: str, total: float) -> MemkvTimeoutError:
    return MemkvTimeoutError(f"no complete answer from {url} within {total:g} s; {UNKNOWN_OUTCOME}", type="timeout_error")


def retryable_transport(exc: httpx2.HTTPError) -> bool:
    """A connection never made: nothing was sent, so a retry cannot apply anything twice."""
    return isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout))


def retryable_status(error: MemkvError) -> bool:
    """memkv refused before doing any work (rate limit, overload): a retry is safe."""
    return error.status in RETRYABLE_STATUS


def _json(body: bytes) -> Any:
    return json.loads(body.decode("utf-8"))


def http_error(answer: Answer) -> MemkvError:
    """A non-200 answer: memkv's Anthropic-style envelope, or whatever else came back."""
    status = answer.status
    try:
        body: Any = _json(answer.body)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        return MemkvError(
            str(err.get("message", "")),
            status=status,
            type=str(err.get("type", "error")),
            retry_after=retry_after(answer.headers),
        )
    text = answer.body[:500].decode("utf-8", "replace")
    return MemkvError(text or answer.reason, status=status, type="http_error", retry_after=retry_after(answer.headers))


def content_of(answer: Answer) -> str:
    """memkv's content for a successful command; `ToolError(content)` for a model mistake."""
    if answer.status != 200:
        raise http_error(answer)
    try:
        body: Any = _json(answer.body)
    except ValueError as exc:
        raise MemkvError(f"answer is not JSON: {exc}", status=200, type="protocol_error") from None
    if not isinstance(body, dict) or not isinstance(body.get("content"), str) or not isinstance(body.get("is_error"), bool):
        raise MemkvError(f"unexpected answer: {str(body)[:200]}", status=200, type="protocol_error")
    if body["is_error"]:
        raise ToolError(body["content"])
    return body["content"]
