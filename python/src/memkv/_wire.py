"""What the sync and async tools share: configuration, the request, and reading the answer.

The route is `POST {base_url}/v1/memory_stores/{store}/tool` with the tool_use block's `input`
object as the body; the answer is `{"content": ..., "is_error": ...}`, `content` being exactly
what `memkv exec` prints for the same input. HTTP errors carry the Anthropic error envelope.
"""

from __future__ import annotations

import os
import json
import random
from typing import Any, Mapping
from urllib.parse import quote

import httpx2
from anthropic.tools import ToolError

from ._errors import MemkvError, MemkvTimeoutError, MemkvConnectionError

__version__ = "0.1.0"

DEFAULT_TIMEOUT = 30.0
"""Seconds for connecting, and for each read and write of one request."""

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


def tool_path(store: str) -> str:
    """The tool route of one memory store, the store id as ONE percent-encoded path segment:
    everything but letters, digits and `-_~` encoded, `/` and `.` included (an HTTP client
    removes `.` and `..` segments, so a store named `.` would otherwise reach another route)."""
    if not isinstance(store, str) or not store:
        raise ValueError("store must be a non-empty string (the memkv user id)")
    return f"/v1/memory_stores/{quote(store, safe='').replace('.', '%2E')}/tool"


def store_path(store: str) -> str:
    """The memory-stores API route of one store (the tool route without `/tool`)."""
    return tool_path(store).removesuffix("/tool")


CLEARED = "All memory cleared"


def cleared(response: httpx2.Response) -> str:
    """`clear_all_memory`'s answer to memkv's reply to deleting the store: a store that was
    never written (404) has nothing to clear."""
    if response.status_code in (200, 404):
        return CLEARED
    raise http_error(response)


def headers(api_key: str | None) -> dict[str, str]:
    out = {
        "content-type": "application/json",
        "accept": "application/json",
        "user-agent": f"memkv-python/{__version__}",
    }
    if api_key is not None:
        out["x-api-key"] = api_key
    return out


def make_timeout(timeout: float | httpx2.Timeout | None) -> httpx2.Timeout:
    if isinstance(timeout, httpx2.Timeout):
        return timeout
    return httpx2.Timeout(timeout)


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


def retry_after(response: httpx2.Response) -> float | None:
    value = response.headers.get("retry-after")
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


def transport_error(exc: httpx2.HTTPError) -> MemkvConnectionError:
    if isinstance(exc, httpx2.TimeoutException):
        return MemkvTimeoutError(f"{type(exc).__name__}: {exc}", type="timeout_error")
    return MemkvConnectionError(f"{type(exc).__name__}: {exc}", type="connection_error")


def retryable_transport(exc: httpx2.HTTPError) -> bool:
    """A connection never made: nothing was sent, so a retry cannot apply anything twice."""
    return isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout))


def retryable_status(error: MemkvError) -> bool:
    """memkv refused before doing any work (rate limit, overload): a retry is safe."""
    return error.status in RETRYABLE_STATUS


def http_error(response: httpx2.Response) -> MemkvError:
    """A non-200 answer: memkv's Anthropic-style envelope, or whatever else came back."""
    status = response.status_code
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        return MemkvError(
            str(err.get("message", "")),
            status=status,
            type=str(err.get("type", "error")),
            retry_after=retry_after(response),
        )
    text = response.text[:500]
    return MemkvError(text or response.reason_phrase, status=status, type="http_error", retry_after=retry_after(response))


def content_of(response: httpx2.Response) -> str:
    """memkv's content for a successful command; `ToolError(content)` for a model mistake."""
    if response.status_code != 200:
        raise http_error(response)
    try:
        body: Any = response.json()
    except ValueError as exc:
        raise MemkvError(f"answer is not JSON: {exc}", status=200, type="protocol_error") from None
    if not isinstance(body, dict) or not isinstance(body.get("content"), str) or not isinstance(body.get("is_error"), bool):
        raise MemkvError(f"unexpected answer: {str(body)[:200]}", status=200, type="protocol_error")
    if body["is_error"]:
        raise ToolError(body["content"])
    return body["content"]
