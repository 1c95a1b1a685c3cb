"""examples/python/context_editing.py runs end to end (docs/context-editing.md): the real SDK's
tool runner with memkv's memory and memory_search tools against a real `memkv serve`, and the
scripted Messages API reading what the SDK sends: the context-management beta and the
`clear_tool_uses_20250919` edit that spares both memory tools, on every request."""

from __future__ import annotations

import os
import sys
import subprocess

import memkv
from memkv_cli import REPO, cat
from scripted_api import final, tool_use, scripted_api

EXAMPLE = REPO / "examples" / "python" / "context_editing.py"
NOTES = {"command": "create", "path": "/memories/tickets.md", "file_text": "- LEDGER-7: rounding bug, blocks release\n"}
APPLIED = {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 31_000}


def test_the_runner_sends_the_edit_and_memory_works_through_it(server: memkv.LocalServer, memkv_bin: str) -> None:
    script = [
        [tool_use("toolu_1", {"command": "view", "path": "/memories"}), tool_use("toolu_2", NOTES)],
        [tool_use("toolu_3", {"query": "release blocker"}, name="memory_search")],
        final("LEDGER-7 blocks the release."),
    ]
    with scripted_api(script) as api:
        # The API reports the edits it applied on the reply (here: the last one).
        api.turns[-1]["context_management"] = {"applied_edits": [APPLIED]}
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": api.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "MEMKV_URL": server.base_url,
            "MEMKV_API_KEY": server.api_key,
        }
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--user", "dana", "Review the open tickets."],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "LEDGER-7 blocks the release.\n"
    assert "[context] clear_tool_uses_20250919: {'cleared_input_tokens': 31000, 'cleared_tool_uses': 2}" in done.stderr

    # Every request, the first and those that continue it, carries the beta and the edit.
    assert len(api.requests) == 3
    for body, headers in zip(api.requests, api.headers):
        assert "context-management-2025-06-27" in headers["anthropic-beta"].split(","), headers
        [edit] = body["context_management"]["edits"]
        assert edit["type"] == "clear_tool_uses_20250919"
        assert edit["exclude_tools"] == ["memory", "memory_search"]
        assert edit["trigger"] == {"type": "input_tokens", "value": 30_000}
        assert edit["keep"] == {"type": "tool_uses", "value": 3}
    tools = api.requests[0]["tools"]
    assert [t["name"] for t in tools] == ["memory", "memory_search"]
    assert tools[0] == {"type": "memory_20250818", "name": "memory"}

    # The memory tools work through the runner: memkv's answers, and the note kept.
    results = api.all_tool_results()
    assert [r["tool_use_id"] for r in results] == ["toolu_1", "toolu_2", "toolu_3"]
    assert not any(r.get("is_error") for r in results), results
    assert results[1]["content"] == "File created successfully at: /memories/tickets.md"
    assert "/memories/tickets.md:1: - LEDGER-7: rounding bug, blocks release" in results[2]["content"]
    server.stop()
    assert cat(memkv_bin, server.db_path, "dana", "/memories/tickets.md") == NOTES["file_text"]
