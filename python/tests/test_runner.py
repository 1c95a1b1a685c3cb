"""The SDK's tool runner (sync and async) with memkv memory, against a real `memkv serve`: the
exact tool_result blocks it sends back, and the store's content afterwards."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from typing import Any
from pathlib import Path

import pytest
from agents import MODES, PROMPT, STREAMED, client, run_agent, runner_args, async_client
from memkv_cli import cat, tree_paths, exec_inputs, expected_blocks
from scripted_api import final, tool_use, scripted_api

import memkv
from memkv import MemkvMemoryTool, AsyncMemkvMemoryTool

NOTES = "/memories/notes.md"

# Every command, its successes and the model's usual mistakes, in one assistant turn.
EVERY_COMMAND: list[tuple[str, dict[str, Any]]] = [
    ("toolu_c1", {"command": "create", "path": NOTES, "file_text": "# Notes\nalpha\nbeta\n"}),
    ("toolu_c2", {"command": "create", "path": "/memories/projects/x/plan.md", "file_text": "step 1\n"}),
    ("toolu_v1", {"command": "view", "path": "/memories"}),
    ("toolu_v2", {"command": "view", "path": NOTES}),
    ("toolu_v3", {"command": "view", "path": NOTES, "view_range": [2, 3]}),
    ("toolu_s1", {"command": "str_replace", "path": NOTES, "old_str": "alpha", "new_str": "ALPHA"}),
    ("toolu_i1", {"command": "insert", "path": NOTES, "insert_line": 1, "insert_text": "inserted\n"}),
    ("toolu_r1", {"command": "rename", "old_path": "/memories/projects/x", "new_path": "/memories/projects/y"}),
    ("toolu_d1", {"command": "delete", "path": "/memories/projects/y/plan.md"}),
    ("toolu_v4", {"command": "view", "path": NOTES}),
    ("toolu_e1", {"command": "view", "path": "/memories/missing.md"}),
    ("toolu_e2", {"command": "create", "path": "/memories/../etc/passwd", "file_text": "x"}),
    ("toolu_e3", {"command": "str_replace", "path": NOTES, "old_str": "nope", "new_str": "x"}),
    ("toolu_e4", {"command": "bogus", "path": "/memories"}),
    ("toolu_e5", {"command": "create", "path": NOTES, "file_text": "again\n"}),
    ("toolu_e6", {"command": "view"}),
    ("toolu_e7", {"command": "insert", "path": NOTES, "insert_line": 99, "insert_text": "x\n"}),
    ("toolu_e8", {"command": "rename", "old_path": NOTES, "new_path": NOTES}),
]
FINAL_NOTES = "# Notes\ninserted\nALPHA\nbeta\n"


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_every_command_in_one_turn(
    mode: str, streamed: bool, server: memkv.LocalServer, memkv_bin: str, tmp_path: Path
) -> None:
    ids = [id for id, _ in EVERY_COMMAND]
    inputs = [input for _, input in EVERY_COMMAND]
    with scripted_api([[tool_use(id, input) for id, input in EVERY_COMMAND], final()]) as api:
        last = run_agent(mode, api, server.base_url, server.api_key, "dana", **(STREAMED if streamed else {}))

    assert last.content[0].text == "Done."
    assert len(api.requests) == 2
    assert all(body.get("stream", False) is streamed for body in api.requests)
    assert api.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    assert api.requests[0]["messages"] == PROMPT
    expected = exec_inputs(memkv_bin, tmp_path / "exec.redb", "dana", inputs)
    assert api.tool_results() == [expected_blocks(ids, expected)]
    # memkv's strings, as the model reads them (PROTOCOL.md).
    sent = {block["tool_use_id"]: block for block in api.all_tool_results()}
    assert sent["toolu_c1"] == {
        "type": "tool_result",
        "tool_use_id": "toolu_c1",
        "content": "File created successfully at: /memories/notes.md",
    }
    assert sent["toolu_e5"] == {
        "type": "tool_result",
        "tool_use_id": "toolu_e5",
        "content": "Error: File /memories/notes.md already exists",
        "is_error": True,
    }
    assert sent["toolu_v4"]["content"] == (
        "Here's the content of /memories/notes.md with line numbers:\n"
        "     1\t# Notes\n     2\tinserted\n     3\tALPHA\n     4\tbeta"
    )
    assert [id for id, block in sent.items() if block.get("is_error")] == [id for id in ids if id.startswith("toolu_e")]

    server.stop()
    assert tree_paths(memkv_bin, server.db_path, "dana") == [NOTES]
    assert cat(memkv_bin, server.db_path, "dana", NOTES) == FINAL_NOTES


TURNS: list[list[tuple[str, dict[str, Any]]]] = [
    [
        ("toolu_01", {"command": "view", "path": "/memories"}),
        ("toolu_02", {"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"}),
        ("toolu_03", {"command": "create", "path": "/memories/dir/b.md", "file_text": "bee\n"}),
    ],
    [
        ("toolu_04", {"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "TWO"}),
        ("toolu_05", {"command": "view", "path": "/memories"}),
    ],
    [("toolu_06", {"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/kept"})],
    [
        ("toolu_07", {"command": "insert", "path": "/memories/kept/b.md", "insert_line": 0, "insert_text": "# B\n"}),
        ("toolu_08", {"command": "delete", "path": "/memories/a.md"}),
        ("toolu_09", {"command": "view", "path": "/memories/a.md"}),
        ("toolu_10", {"command": "view", "path": "/memories"}),
    ],
]


def test_commands_across_turns(mode: str, server: memkv.LocalServer, memkv_bin: str, tmp_path: Path) -> None:
    script = [[tool_use(id, input) for id, input in turn] for turn in TURNS] + [final("All set.")]
    with scripted_api(script) as api:
        last = run_agent(mode, api, server.base_url, server.api_key, "dana")

    assert last.content[0].text == "All set."
    flat = [call for turn in TURNS for call in turn]
    answers = exec_inputs(memkv_bin, tmp_path / "exec.redb", "dana", [input for _, input in flat])
    expected, at = [], 0
    for turn in TURNS:
        expected.append(expected_blocks([id for id, _ in turn], answers[at : at + len(turn)]))
        at += len(turn)
    assert api.tool_results() == expected
    # anthropic 2.14 threads the conversation: each later request continues the previous reply
    # and carries only the new user message, the tool results.
    assert api.requests[0]["thread"] == {"type": "create"}
    for n, body in enumerate(api.requests[1:], 1):
        assert body["thread"] == {"type": "continue", "previous_message_id": f"msg_{n:04}"}
        assert body["messages"] == [{"role": "user", "content": expected[n - 1]}]

    server.stop()
    assert tree_paths(memkv_bin, server.db_path, "dana") == ["/memories/kept/b.md"]
    assert cat(memkv_bin, server.db_path, "dana", "/memories/kept/b.md") == "# B\nbee\n"


def test_two_stores_never_see_each_other(mode: str, server: memkv.LocalServer, memkv_bin: str, tmp_path: Path) -> None:
    secret = {"command": "create", "path": "/memories/secret.md", "file_text": "alice's plan\n"}
    probe = [
        ("toolu_p1", {"command": "view", "path": "/memories"}),
        ("toolu_p2", {"command": "view", "path": "/memories/secret.md"}),
        ("toolu_p3", {"command": "delete", "path": "/memories/secret.md"}),
    ]
    # "team/a" is one store id (its "/" is percent-encoded), not "team" plus a path.
    # "." and ".." are store ids too, never path segments an HTTP client would collapse.
    stores = ["bob", "team", "team/a", "alice@example.com", ".", "..", "alice/..", "ALICE"]
    with scripted_api([[tool_use("toolu_s1", secret)], final()]) as api:
        run_agent(mode, api, server.base_url, server.api_key, "alice")
    assert api.all_tool_results()[0]["content"] == "File created successfully at: /memories/secret.md"
    fresh = exec_inputs(memkv_bin, tmp_path / "exec.redb", "nobody", [input for _, input in probe])
    for store in stores:
        with scripted_api([[tool_use(id, input) for id, input in probe], final()]) as api:
            run_agent(mode, api, server.base_url, server.api_key, store)
        assert api.tool_results() == [expected_blocks([id for id, _ in probe], fresh)], store
        assert api.all_tool_results()[1]["is_error"] is True

    server.stop()
    assert tree_paths(memkv_bin, server.db_path, "alice") == ["/memories/secret.md"]
    assert cat(memkv_bin, server.db_path, "alice", "/memories/secret.md") == "alice's plan\n"
    for store in stores:
        assert tree_paths(memkv_bin, server.db_path, store) == [], store


RESTART_SCRIPT = [
    [tool_use("toolu_01", {"command": "create", "path": "/memories/progress.md", "file_text": "step 1 done\n"})],
    [
        tool_use("toolu_02", {"command": "view", "path": "/memories/progress.md"}),
        tool_use("toolu_03", {"command": "str_replace", "path": "/memories/progress.md", "old_str": "1", "new_str": "2"}),
    ],
    final(),
]


def test_server_restart_between_turns_loses_nothing(mode: str, db: Path, memkv_bin: str) -> None:
    """Turn 1's calls run against one server; it is stopped (SIGTERM) and a new one started on
    the same database and address before turn 2's calls run, with the same tool and runner."""
    with ExitStack() as stack:
        api = stack.enter_context(scripted_api(RESTART_SCRIPT))
        first = stack.enter_context(memkv.serve_local(db, binary=memkv_bin))

        def restart() -> None:
            assert first.stop() == 0, first.stderr()
            address = first.base_url.removeprefix("http://")
            second = stack.enter_context(memkv.serve_local(db, binary=memkv_bin, listen=address))
            assert second.base_url == first.base_url

        if mode == "sync":
            with MemkvMemoryTool("dana", base_url=first.base_url, api_key=first.api_key) as tool, client(api) as sdk:
                steps = iter(sdk.beta.messages.tool_runner(**runner_args(api, tool)))
                next(steps)  # turn 1 received; its calls run when the runner resumes
                next(steps)  # turn 1's calls ran; turn 2 received
                restart()
                rest = list(steps)
        else:

            async def go() -> list[Any]:
                async with AsyncMemkvMemoryTool("dana", base_url=first.base_url, api_key=first.api_key) as tool:
                    async with async_client(api) as sdk:
                        steps = sdk.beta.messages.tool_runner(**runner_args(api, tool)).__aiter__()
                        await steps.__anext__()
                        await steps.__anext__()
                        restart()
                        return [message async for message in steps]

            rest = asyncio.run(go())
        assert [m.content[0].text for m in rest] == ["Done."]
        assert api.tool_results() == [
            [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "File created successfully at: /memories/progress.md"}],
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_02",
                    "content": "Here's the content of /memories/progress.md with line numbers:\n     1\tstep 1 done",
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_03",
                    "content": "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                    "     1\tstep 2 done",
                },
            ],
        ]
    assert tree_paths(memkv_bin, db, "dana") == ["/memories/progress.md"]
    assert cat(memkv_bin, db, "dana", "/memories/progress.md") == "step 2 done\n"


def test_failures_the_model_did_not_cause_reach_it_as_errors(mode: str, db: Path, memkv_bin: str) -> None:
    """A bad key and a server that is gone: the runner sends the tool's `MemkvError` back as an
    error result and goes on; nothing was written."""
    create = {"command": "create", "path": "/memories/a.md", "file_text": "x\n"}
    with memkv.serve_local(db, binary=memkv_bin) as server:
        with scripted_api([[tool_use("toolu_1", create)], final()]) as api:
            last = run_agent(mode, api, server.base_url, "wrong-key", "dana")
        assert last.content[0].text == "Done."
        [block] = api.all_tool_results()
        assert block["is_error"] is True and block["tool_use_id"] == "toolu_1"
        assert block["content"].startswith("MemkvError('memkv: HTTP 401 authentication_error: ")
    with scripted_api([[tool_use("toolu_2", create)], final()]) as api:
        run_agent(mode, api, server.base_url, server.api_key, "dana")
    [block] = api.all_tool_results()
    assert block["is_error"] is True
    assert block["content"].startswith("MemkvConnectionError('memkv: connection_error: ")
    with memkv.serve_local(db, binary=memkv_bin) as again, again.tool("dana") as tool:
        assert tool.call({"command": "view", "path": "/memories"}).endswith("\n0B\t/memories")
