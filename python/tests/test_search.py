"""memory_search for the SDK's tool runners (`MemkvSearchTool`, `AsyncMemkvSearchTool`) and the
plain client call, against a real `memkv serve`: the tool_result blocks the real runner sends,
byte for byte what `memkv exec` answers the same blocks; memkv's own definition of the tool."""

from __future__ import annotations

import json
import asyncio
import subprocess
from typing import Any
from pathlib import Path

import pytest
from agents import PROMPT, client, async_client
from anthropic.tools import ToolError
from memkv_cli import exec_lines, expected_blocks
from scripted_api import MODEL, final, tool_use, scripted_api

import memkv
from memkv import MemkvSearchTool

NOTES = {"/memories/notes/tz.md": "# Time\nlives in Paris\nTZ: Europe/Paris\n", "/memories/trips.md": "Rome in May\nParis in June\n"}
# One turn: the memory tool writes, memory_search finds, in every mode, and a refused search.
TURN: list[tuple[str, str, dict[str, Any]]] = [
    *[
        (f"toolu_c{i}", "memory", {"command": "create", "path": path, "file_text": text})
        for i, (path, text) in enumerate(NOTES.items())
    ],
    ("toolu_s1", "memory_search", {"query": "paris europe"}),
    ("toolu_s2", "memory_search", {"query": "Paris", "mode": "literal", "context": 1}),
    ("toolu_s3", "memory_search", {"query": "^tz", "mode": "regex", "case_insensitive": True}),
    ("toolu_s4", "memory_search", {"query": "(", "mode": "regex"}),
    ("toolu_s5", "memory_search", {"query": "london", "path_prefix": "/memories/notes"}),
]


def test_the_definition_is_memkvs(memkv_bin: str) -> None:
    done = subprocess.run([memkv_bin, "search", "--tool-definition"], capture_output=True, timeout=60, check=True)
    assert json.loads(done.stdout) == memkv.SEARCH_TOOL_DEFINITION
    with MemkvSearchTool("dana", base_url="http://127.0.0.1:9") as tool:
        assert tool.to_dict() == memkv.SEARCH_TOOL_DEFINITION
        assert tool.name == "memory_search"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_runner_sends_what_memkv_exec_answers(mode: str, server: memkv.LocalServer, memkv_bin: str, tmp_path: Path) -> None:
    blocks = [tool_use(id, input, name=name) for id, name, input in TURN]
    with scripted_api([blocks, final()]) as api:
        args = {"model": MODEL, "max_tokens": 1024, "messages": PROMPT, "max_iterations": 3}
        if mode == "sync":
            with server.tool("dana") as memory, server.search_tool("dana") as search, client(api) as sdk:
                sdk.beta.messages.tool_runner(**args, tools=[memory, search]).until_done()
        else:

            async def go() -> None:
                async with server.async_tool("dana") as memory, server.async_search_tool("dana") as search, async_client(api) as sdk:
                    await sdk.beta.messages.tool_runner(**args, tools=[memory, search]).until_done()

            asyncio.run(go())
    assert api.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}, memkv.SEARCH_TOOL_DEFINITION]
    # The same blocks through `memkv exec` on a fresh database: the same answers, byte for byte.
    answered = exec_lines(memkv_bin, tmp_path / "exec.redb", "dana", [json.dumps(b) for b in blocks])
    want = expected_blocks([id for id, _, _ in TURN], answered)
    assert api.tool_results() == [want]
    sent = {b["tool_use_id"]: b for b in api.all_tool_results()}
    assert sent["toolu_s2"]["content"] == (
        "/memories/notes/tz.md-1- # Time\n/memories/notes/tz.md:2: lives in Paris\n/memories/notes/tz.md:3: TZ: Europe/Paris\n"
        "--\n/memories/trips.md-1- Rome in May\n/memories/trips.md:2: Paris in June"
    )
    assert sent["toolu_s1"]["content"].startswith("/memories/notes/tz.md (score 0.92)\n")
    assert sent["toolu_s4"]["is_error"] is True
    assert sent["toolu_s5"]["content"] == 'No memory matches "london".'


def test_the_plain_call_answers_the_apis_json(server: memkv.LocalServer) -> None:
    with server.tool("dana") as memory:
        for path, text in NOTES.items():
            memory.call({"command": "create", "path": path, "file_text": text})
    with server.search_tool("dana") as search:
        found = search.search("paris", mode="literal", case_insensitive=True, path_prefix="/notes/")
        assert found["more"] == 0 and found["unsearched"] == 0
        assert [(h["path"], [l["text"] for l in h["lines"]]) for h in found["data"]] == [
            ("/notes/tz.md", ["lives in Paris", "TZ: Europe/Paris"])
        ]
        ranked = search.search("paris europe", limit=1)
        assert ranked["data"][0]["path"] == "/notes/tz.md" and ranked["more"] == 1
        assert ranked["data"][0]["score"] > 0
        with pytest.raises(ToolError) as caught:
            search.call({"query": ""})
        assert caught.value.content == "Error: the query is empty"
        with pytest.raises(memkv.MemkvError) as refused:
            search.search("x", mode="fuzzy")
        assert refused.value.status == 400
    with MemkvSearchTool("dana", base_url=server.base_url, api_key="wrong") as other:
        with pytest.raises(memkv.MemkvError) as denied:
            other.search("paris")
        assert denied.value.status == 401

    async def go() -> dict[str, Any]:
        async with server.async_search_tool("dana") as search:
            return await search.search("rome")

    assert asyncio.run(go())["data"][0]["path"] == "/trips.md"
