"""The tool objects on their own, against a real `memkv serve`: the six methods, the SDK's
`ToolError` for model mistakes, and `MemkvError` for everything the model did not cause."""

from __future__ import annotations

import time
import socket
import asyncio
import subprocess
from typing import Any, Iterator
from pathlib import Path

import httpx2
import pytest
from memkv_cli import tree_paths
from anthropic.tools import ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818ViewCommand,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
)

import memkv
from memkv import MemkvError, MemkvMemoryTool, MemkvTimeoutError, AsyncMemkvMemoryTool, MemkvConnectionError


def test_the_six_methods_take_the_sdks_command_models(server: memkv.LocalServer) -> None:
    with server.tool("dana") as tool:
        assert (
            tool.create(BetaMemoryTool20250818CreateCommand(command="create", path="/memories/a.md", file_text="x\ny\n"))
            == "File created successfully at: /memories/a.md"
        )
        assert tool.str_replace(
            BetaMemoryTool20250818StrReplaceCommand(command="str_replace", path="/memories/a.md", old_str="y", new_str="z")
        ).startswith("The memory file has been edited.")
        assert (
            tool.insert(
                BetaMemoryTool20250818InsertCommand(command="insert", path="/memories/a.md", insert_line=2, insert_text="w\n")
            )
            == "The file /memories/a.md has been edited."
        )
        assert tool.view(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/a.md", view_range=[2, 3])) == (
            "Here's the content of /memories/a.md with line numbers:\n     2\tz\n     3\tw"
        )
        assert (
            tool.rename(BetaMemoryTool20250818RenameCommand(command="rename", old_path="/memories/a.md", new_path="/memories/b.md"))
            == "Successfully renamed /memories/a.md to /memories/b.md"
        )
        assert tool.delete(BetaMemoryTool20250818DeleteCommand(command="delete", path="/memories/b.md")) == (
            "Successfully deleted /memories/b.md"
        )
        # The base class's dispatch from a raw input reaches the same methods.
        assert tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path="/memories")).endswith("\n0B\t/memories")
        assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}


def test_a_model_mistake_raises_tool_error_with_memkvs_exact_content(server: memkv.LocalServer) -> None:
    with server.tool("dana") as tool:
        with pytest.raises(ToolError) as caught:
            tool.call({"command": "view", "path": "/memories/nope.md"})
        assert caught.value.content == (
            "The path /memories/nope.md does not exist. Please provide a valid path."
        )
        with pytest.raises(ToolError) as caught:
            tool.call({"command": "create", "path": "/etc/passwd", "file_text": "x"})
        assert isinstance(caught.value.content, str) and caught.value.content.startswith("Error")


def test_async_tool(server: memkv.LocalServer) -> None:
    async def go() -> list[Any]:
        async with server.async_tool("dana") as tool:
            created = await tool.call({"command": "create", "path": "/memories/a.md", "file_text": "hi\n"})
            viewed = await tool.view(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/a.md"))
            try:
                await tool.call({"command": "delete", "path": "/memories/zz.md"})
            except ToolError as exc:
                return [created, viewed, exc.content]
            raise AssertionError("no ToolError")

    created, viewed, error = asyncio.run(go())
    assert created == "File created successfully at: /memories/a.md"
    assert viewed == "Here's the content of /memories/a.md with line numbers:\n     1\thi"
    assert error == "Error: The path /memories/zz.md does not exist"


def test_clear_all_memory_deletes_the_whole_store_and_only_it(server: memkv.LocalServer) -> None:
    with server.tool("dana") as dana, server.tool("erin") as erin:
        dana.call({"command": "create", "path": "/memories/a/b.md", "file_text": "x\n"})
        erin.call({"command": "create", "path": "/memories/keep.md", "file_text": "y\n"})
        assert dana.clear_all_memory() == "All memory cleared"
        assert dana.call({"command": "view", "path": "/memories"}).endswith("\n0B\t/memories")
        # Nothing left to clear is no error.
        assert dana.clear_all_memory() == "All memory cleared"
        assert erin.call({"command": "view", "path": "/memories"}).endswith("\n2B\t/memories/keep.md")

    async def go() -> str:
        async with server.async_tool("erin") as tool:
            return await tool.clear_all_memory()

    assert asyncio.run(go()) == "All memory cleared"
    with server.tool("erin") as erin:
        assert erin.call({"command": "view", "path": "/memories"}).endswith("\n0B\t/memories")


def test_url_and_key_default_to_the_environment(server: memkv.LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMKV_URL", server.base_url + "/")
    monkeypatch.setenv("MEMKV_API_KEY", server.api_key)
    with MemkvMemoryTool("dana") as tool:
        assert tool.base_url == server.base_url
        assert tool.call({"command": "create", "path": "/memories/env.md", "file_text": "e\n"}).startswith("File created")
    monkeypatch.delenv("MEMKV_URL")
    with pytest.raises(MemkvError) as caught:
        MemkvMemoryTool("dana")
    assert caught.value.type == "configuration_error" and "MEMKV_URL" in str(caught.value)


def test_a_bad_key_is_an_authentication_error_and_changes_nothing(server: memkv.LocalServer, memkv_bin: str) -> None:
    for key in ["not-a-key", None]:
        with MemkvMemoryTool("dana", base_url=server.base_url, api_key=key) as tool:
            if key is None:
                tool._headers.pop("x-api-key", None)
            with pytest.raises(MemkvError) as caught:
                tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x\n"})
        assert caught.value.status == 401
        assert caught.value.type == "authentication_error"
        assert "HTTP 401 authentication_error" in str(caught.value)
    with server.tool("dana") as tool:
        assert tool.call({"command": "view", "path": "/memories"}).endswith("\n0B\t/memories")


def test_a_store_key_opens_its_own_store_only_until_revoked(server: memkv.LocalServer, memkv_bin: str) -> None:
    added = subprocess.run(
        [memkv_bin, "--db", str(server.db_path), "keys", "add", "--store", "alice"], capture_output=True, timeout=30, check=True
    )
    key = added.stdout.decode().strip().splitlines()[-1]
    with MemkvMemoryTool("alice", base_url=server.base_url, api_key=key) as alice:
        assert alice.call({"command": "create", "path": "/memories/a.md", "file_text": "x\n"}).startswith("File created")
    with MemkvMemoryTool("bob", base_url=server.base_url, api_key=key) as bob:
        with pytest.raises(MemkvError) as caught:
            bob.call({"command": "create", "path": "/memories/a.md", "file_text": "x\n"})
    assert (caught.value.status, caught.value.type) == (404, "not_found_error")
    # Revoked while the server runs: refused once the server looks at its keys file again
    # (at most a second later).
    key_id = added.stdout.decode().split()[1]
    subprocess.run([memkv_bin, "--db", str(server.db_path), "keys", "revoke", key_id], capture_output=True, timeout=30, check=True)
    refused = None
    with MemkvMemoryTool("alice", base_url=server.base_url, api_key=key) as alice:
        deadline = time.monotonic() + 5
        while refused is None and time.monotonic() < deadline:
            try:
                alice.call({"command": "view", "path": "/memories/a.md"})
                time.sleep(0.1)
            except MemkvError as exc:
                refused = exc
    assert refused is not None, "the revoked key still works after 5 s"
    assert (refused.status, refused.type) == (401, "authentication_error")
    server.stop()
    assert tree_paths(memkv_bin, server.db_path, "alice") == ["/memories/a.md"]
    assert tree_paths(memkv_bin, server.db_path, "bob") == []


def test_a_server_that_is_gone_is_a_connection_error(db: Path, memkv_bin: str) -> None:
    with memkv.serve_local(db, binary=memkv_bin) as gone:
        pass
    tool = MemkvMemoryTool("dana", base_url=gone.base_url, api_key=gone.api_key, max_retries=1)
    with tool, pytest.raises(MemkvConnectionError) as caught:
        tool.call({"command": "view", "path": "/memories"})
    assert caught.value.status is None and caught.value.type == "connection_error"


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """A loopback socket that accepts connections and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_no_answer_in_time_is_a_timeout_error(silent_listener: str) -> None:
    with MemkvMemoryTool("dana", base_url=silent_listener, api_key="k", timeout=0.3) as tool:
        start = time.monotonic()
        with pytest.raises(MemkvTimeoutError) as caught:
            tool.call({"command": "view", "path": "/memories"})
    assert time.monotonic() - start < 5
    assert caught.value.type == "timeout_error" and isinstance(caught.value, MemkvConnectionError)

    async def go() -> None:
        async with AsyncMemkvMemoryTool("dana", base_url=silent_listener, api_key="k", timeout=0.3) as tool:
            await tool.call({"command": "view", "path": "/memories"})

    with pytest.raises(MemkvTimeoutError):
        asyncio.run(go())


def test_store_ids_are_one_path_segment() -> None:
    tool = MemkvMemoryTool("team/a b?#%.é", base_url="http://127.0.0.1:9/", api_key="k")
    assert tool._url == "http://127.0.0.1:9/v1/memory_stores/team%2Fa%20b%3F%23%25%2E%C3%A9/tool"
    tool.close()
    for store, segment in [(".", "%2E"), ("..", "%2E%2E"), ("a_b-c~", "a_b-c~")]:
        with MemkvMemoryTool(store, base_url="http://127.0.0.1:9", api_key="k") as tool:
            assert tool._url == f"http://127.0.0.1:9/v1/memory_stores/{segment}/tool"
    with pytest.raises(ValueError):
        MemkvMemoryTool("", base_url="http://127.0.0.1:9", api_key="k")


def test_one_tool_object_serves_concurrent_callers(server: memkv.LocalServer) -> None:
    """Threads sharing one tool (one connection pool), and tasks sharing one async tool: each
    call gets the answer it would have had alone."""
    from concurrent.futures import ThreadPoolExecutor

    def work(tool: MemkvMemoryTool, n: int) -> list[str]:
        path = f"/memories/t{n}.md"
        return [
            tool.call({"command": "create", "path": path, "file_text": f"thread {n}\n"}),
            tool.call({"command": "str_replace", "path": path, "old_str": "thread", "new_str": "worker"}),
            tool.call({"command": "view", "path": path}),
        ]

    with server.tool("dana") as tool, ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda n: work(tool, n), range(16)))
    for n, (created, replaced, viewed) in enumerate(results):
        assert created == f"File created successfully at: /memories/t{n}.md"
        assert replaced.startswith("The memory file has been edited.")
        assert viewed == f"Here's the content of /memories/t{n}.md with line numbers:\n     1\tworker {n}"

    async def go() -> list[str]:
        async with server.async_tool("dana") as tool:
            return await asyncio.gather(*(tool.call({"command": "view", "path": f"/memories/t{n}.md"}) for n in range(16)))

    assert asyncio.run(go()) == [viewed for _, _, viewed in results]


def test_an_overloaded_server_is_retried_after_its_retry_after(db: Path, memkv_bin: str) -> None:
    """With one request in flight at most, concurrent writers get 503 overloaded_error with
    `Retry-After: 1`; without retries that is the caller's MemkvError, with them every write
    lands exactly once."""
    from concurrent.futures import ThreadPoolExecutor

    with memkv.serve_local(db, binary=memkv_bin, serve_options=["--max-in-flight", "1"]) as server:

        def hammer(n: int) -> MemkvError | None:
            with server.tool("dana", max_retries=0) as tool:
                for i in range(20):
                    try:
                        tool.call({"command": "create", "path": f"/memories/h{n}/{i}.md", "file_text": "x\n"})
                    except MemkvError as exc:
                        return exc
            return None

        refused: list[MemkvError] = []
        deadline = time.monotonic() + 20
        while not refused and time.monotonic() < deadline:
            with ThreadPoolExecutor(6) as pool:
                refused = [e for e in pool.map(hammer, range(6)) if e is not None]
        assert refused, "no 503 from a server with --max-in-flight 1 and 6 concurrent writers"
        assert all((e.status, e.type, e.retry_after) == (503, "overloaded_error", 1.0) for e in refused)

        def write(n: int) -> list[str]:
            with server.tool("dana", max_retries=10) as tool:
                return [
                    tool.call({"command": "create", "path": f"/memories/r{n}/{i}.md", "file_text": f"{n} {i}\n"})
                    for i in range(3)
                ]

        def overloaded() -> int:
            metrics = httpx2.get(server.base_url + "/metrics", headers={"x-api-key": server.api_key}, trust_env=False)
            [line] = [line for line in metrics.text.splitlines() if line.startswith("memkv_overloaded_total ")]
            return int(line.split()[1])

        before = overloaded()
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(write, range(4)))
        assert results == [[f"File created successfully at: /memories/r{n}/{i}.md" for i in range(3)] for n in range(4)]
        # Refusals happened, and were retried: every write above succeeded.
        assert overloaded() > before
