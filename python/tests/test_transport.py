"""The tools against servers that misbehave on a real loopback socket (rogue.py), the failures
memkv never produces: the timeout bounds a whole request, an answer is capped at
`max_answer_bytes`, and each transport error names the URL and says whether the command can
have been applied."""

from __future__ import annotations

import time
import socket
import asyncio
import tracemalloc
from typing import Any, Callable, Awaitable

import httpx2
import pytest

import memkv
from memkv import MemkvError, MemkvMemoryTool, MemkvTimeoutError, AsyncMemkvMemoryTool, MemkvConnectionError
from rogue import GIB, RogueServer, flood, trickle, hang_up

VIEW = {"command": "view", "path": "/memories"}
UNKNOWN = "the command may or may not have been applied"
MIB = 1024 * 1024


def timed(call: Callable[[], Any]) -> tuple[BaseException, float]:
    start = time.monotonic()
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        return exc, time.monotonic() - start
    raise AssertionError("no error")


def run_async(make: Callable[[], Awaitable[Any]]) -> Callable[[], Any]:
    return lambda: asyncio.run(make())  # type: ignore[arg-type]


def test_the_timeout_bounds_the_whole_request_against_a_trickling_server() -> None:
    """Headers at once, then one body byte a second: no single read ever waits 2 s, yet the
    call ends 2 s after it started, for the sync tool, the async tool, and a sync tool on an
    httpx2.Client of the caller's (checked between reads: within one more byte)."""
    with RogueServer(trickle(every=1.0)) as server:
        with MemkvMemoryTool("dana", base_url=server.url, api_key="k", timeout=2) as tool:
            error, took = timed(lambda: tool.call(VIEW))
        assert isinstance(error, MemkvTimeoutError), error
        assert 1.9 <= took < 2.8, took
        assert error.type == "timeout_error" and error.status is None
        assert server.url in str(error) and "within 2 s" in str(error) and UNKNOWN in str(error)

        async def go() -> None:
            async with AsyncMemkvMemoryTool("dana", base_url=server.url, api_key="k", timeout=2) as tool:
                await tool.call(VIEW)

        error, took = timed(run_async(go))
        assert isinstance(error, MemkvTimeoutError), error
        assert 1.9 <= took < 2.8, took
        assert server.url in str(error) and UNKNOWN in str(error)

        with httpx2.Client(timeout=30) as own, MemkvMemoryTool(
            "dana", base_url=server.url, api_key="k", timeout=2, http_client=own
        ) as tool:
            error, took = timed(lambda: tool.call(VIEW))
        assert isinstance(error, MemkvTimeoutError), error
        assert 1.9 <= took < 3.8, took
        # None of the timeouts was retried: one request each.
        assert server.requests == 3


def test_a_clear_all_memory_is_bounded_too() -> None:
    with RogueServer(trickle(every=1.0)) as server:
        with MemkvMemoryTool("dana", base_url=server.url, api_key="k", timeout=1.5) as tool:
            error, took = timed(tool.clear_all_memory)
    assert isinstance(error, MemkvTimeoutError) and 1.4 <= took < 2.3, (error, took)


def peak_while(call: Callable[[], Any]) -> tuple[BaseException, int]:
    """The error `call` raises and the peak of Python allocations meanwhile (tracemalloc)."""
    tracemalloc.start()
    try:
        error, _ = timed(call)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return error, peak


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_announced_huge_answer_is_refused_before_its_body_is_read(flavour: str) -> None:
    with RogueServer(flood(announce=True)) as server:
        if flavour == "sync":
            tool = MemkvMemoryTool("dana", base_url=server.url, api_key="k")
            call: Callable[[], Any] = lambda: tool.call(VIEW)
        else:

            async def go() -> None:
                async with AsyncMemkvMemoryTool("dana", base_url=server.url, api_key="k") as tool:
                    await tool.call(VIEW)

            call = run_async(go)
        error, peak = peak_while(call)
        if flavour == "sync":
            tool.close()
        sent = server.sent
    assert isinstance(error, MemkvError) and not isinstance(error, MemkvConnectionError), error
    assert (error.status, error.type) == (200, "answer_too_large")
    assert f"announces {GIB:,} bytes" in str(error) and "max_answer_bytes=8,388,608" in str(error)
    assert server.url in str(error) and UNKNOWN in str(error)
    # The client hung up at the headers: the server got out what the socket buffers hold.
    assert sent < 64 * MIB, sent
    assert peak < 4 * MIB, peak


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_unannounced_huge_answer_is_cut_at_max_answer_bytes(flavour: str) -> None:
    cap = 2 * MIB
    with RogueServer(flood(announce=False)) as server:
        if flavour == "sync":
            tool = MemkvMemoryTool("dana", base_url=server.url, api_key="k", max_answer_bytes=cap)
            call: Callable[[], Any] = lambda: tool.call(VIEW)
        else:

            async def go() -> None:
                async with AsyncMemkvMemoryTool("dana", base_url=server.url, api_key="k", max_answer_bytes=cap) as tool:
                    await tool.call(VIEW)

            call = run_async(go)
        error, peak = peak_while(call)
        if flavour == "sync":
            tool.close()
        sent = server.sent
    assert isinstance(error, MemkvError) and error.type == "answer_too_large", error
    assert "goes on past the limit" in str(error) and "max_answer_bytes=2,097,152" in str(error)
    assert sent < 64 * MIB, sent
    assert peak < 2 * cap + 2 * MIB, peak


def test_real_answers_pass_the_cap_and_a_small_cap_refuses_them(server: memkv.LocalServer) -> None:
    text = "line\n" * 1000
    with server.tool("dana") as tool:
        assert tool.call({"command": "create", "path": "/memories/big.md", "file_text": text}).startswith("File created")
        assert tool.call({"command": "view", "path": "/memories/big.md"}).endswith("  1000\tline")
    with server.tool("dana", max_answer_bytes=1000) as tool:
        with pytest.raises(MemkvError) as caught:
            tool.call({"command": "view", "path": "/memories/big.md"})
    assert caught.value.type == "answer_too_large"
    with pytest.raises(ValueError):
        server.tool("dana", max_answer_bytes=0)


def dead_url() -> str:
    """A loopback port nothing listens on: bound, noted, and closed again."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_connection_refused_names_the_url_and_says_nothing_was_sent() -> None:
    url = dead_url()
    with MemkvMemoryTool("dana", base_url=url, api_key="k", max_retries=0) as tool:
        with pytest.raises(MemkvConnectionError) as caught:
            tool.call(VIEW)
    message = str(caught.value)
    assert caught.value.type == "connection_error" and not isinstance(caught.value, MemkvTimeoutError)
    assert f"cannot reach {url}/v1/memory_stores/dana/tool" in message, message
    assert "Connection refused" in message and "nothing was sent" in message, message

    async def go() -> None:
        async with AsyncMemkvMemoryTool("dana", base_url=url, api_key="k", max_retries=0) as tool:
            await tool.call(VIEW)

    with pytest.raises(MemkvConnectionError) as caught:
        asyncio.run(go())
    assert f"cannot reach {url}/" in str(caught.value) and "nothing was sent" in str(caught.value)


def test_a_connection_closed_after_the_request_leaves_the_outcome_unknown() -> None:
    with RogueServer(hang_up) as server:
        with MemkvMemoryTool("dana", base_url=server.url, api_key="k") as tool:
            with pytest.raises(MemkvConnectionError) as caught:
                tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x"})
        requests = server.requests
    message = str(caught.value)
    assert caught.value.type == "connection_error" and server.url in message
    assert "after the request was sent" in message and UNKNOWN in message, message
    # Not retried: the write may have been applied.
    assert requests == 1


def test_a_timeout_object_keeps_httpx_per_operation_meaning() -> None:
    """`httpx2.Timeout` sets httpx's own timeouts and no total: each read waits at most 0.5 s,
    so a server that never answers is a timeout after 0.5 s."""
    with RogueServer(lambda server, conn: server.stop_event.wait(30)) as server:
        with MemkvMemoryTool("dana", base_url=server.url, api_key="k", timeout=httpx2.Timeout(0.5)) as tool:
            error, took = timed(lambda: tool.call(VIEW))
    assert isinstance(error, MemkvTimeoutError) and took < 3, (error, took)
    with pytest.raises(ValueError):
        MemkvMemoryTool("dana", base_url="http://127.0.0.1:9", api_key="k", timeout=0)
