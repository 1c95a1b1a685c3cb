"""examples/python/agent.py runs end to end: the real SDK (ANTHROPIC_BASE_URL pointed at the
scripted Messages API), a memkv serve it starts itself, and memory that outlives the run."""

from __future__ import annotations

import os
import sys
import subprocess
from pathlib import Path

from memkv_cli import REPO, cat
from scripted_api import final, tool_use, scripted_api

AGENT = REPO / "examples" / "python" / "agent.py"


def run_agent(api_url: str, db: Path, memkv_bin: str, task: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "MEMKV_BIN": memkv_bin,
    }
    return subprocess.run(
        [sys.executable, str(AGENT), "--db", str(db), "--user", "dana", task],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_example_agent_remembers_across_runs(db: Path, memkv_bin: str) -> None:
    profile = {"command": "create", "path": "/memories/dana.md", "file_text": "- works on the ledger service\n"}
    with scripted_api([[tool_use("toolu_1", {"command": "view", "path": "/memories"}), tool_use("toolu_2", profile)], final("Noted.")]) as api:
        first = run_agent(api.base_url, db, memkv_bin, "I work on the ledger service.")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Noted.\n"
    assert "[memory] create /memories/dana.md" in first.stderr
    assert api.requests[0]["system"].startswith("You are a helpful assistant with a persistent memory")
    assert api.all_tool_results()[1]["content"] == "File created successfully at: /memories/dana.md"

    with scripted_api([[tool_use("toolu_3", {"command": "view", "path": "/memories/dana.md"})], final("You work on the ledger service.")]) as api:
        second = run_agent(api.base_url, db, memkv_bin, "What do I work on?")
    assert second.returncode == 0, second.stderr
    assert api.all_tool_results() == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_3",
            "content": "Here's the content of /memories/dana.md with line numbers:\n     1\t- works on the ledger service",
        }
    ]
    assert cat(memkv_bin, db, "dana", "/memories/dana.md") == "- works on the ledger service\n"
