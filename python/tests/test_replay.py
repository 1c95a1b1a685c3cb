"""The recorded agent sessions replayed through the SDK's tool runner (sync and async, whole and
streamed replies; against a server and in this process): the tool_result contents the SDK sends
back are byte-identical to `memkv exec`'s output for the same session, and the stores end up
identical, file for file."""

from __future__ import annotations

import json
import filecmp
from typing import Any
from pathlib import Path

import pytest
from agents import MODES, STREAMED, run_agent
from memkv_cli import SESSIONS, cli, exec_lines
from scripted_api import final, tool_use, scripted_api

import memkv

TURN_SIZES = [1, 3, 2, 5, 1, 8]
"""The session's calls are grouped into assistant turns of these sizes, in a cycle."""


def load(session: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The session's input lines, and its calls as tool_use blocks (ids given to bare inputs)."""
    lines = [line for line in session.read_text("utf-8").splitlines() if line.strip()]
    calls = []
    for n, line in enumerate(lines, 1):
        value = json.loads(line)
        calls.append(value if value.get("type") == "tool_use" else tool_use(f"toolu_{n:04}", value))
    return lines, calls


def turns_of(calls: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    turns, at, i = [], 0, 0
    while at < len(calls):
        size = TURN_SIZES[i % len(TURN_SIZES)]
        turns.append(calls[at : at + size])
        at, i = at + size, i + 1
    return turns


def same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(a / d, b / d) for d in cmp.common_dirs)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_recorded_session_matches_memkv_exec(
    name: str, mode: str, streamed: bool, server: memkv.LocalServer, memkv_bin: str, tmp_path: Path
) -> None:
    check_session(name, mode, streamed, memkv_bin, tmp_path, server=server)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_recorded_session_in_process_matches_memkv_exec(
    name: str, mode: str, streamed: bool, memkv_bin: str, tmp_path: Path
) -> None:
    """The same through the in-process tool (`db=`): no server at all."""
    check_session(name, mode, streamed, memkv_bin, tmp_path, db=tmp_path / "in-process.redb")


def check_session(
    name: str,
    mode: str,
    streamed: bool,
    memkv_bin: str,
    tmp_path: Path,
    server: memkv.LocalServer | None = None,
    db: Path | None = None,
) -> None:
    lines, calls = load(SESSIONS[name])
    assert len(calls) >= 16
    expected = exec_lines(memkv_bin, tmp_path / "exec.redb", "dana", lines)
    assert len(expected) == len(calls)

    turns = turns_of(calls)
    with scripted_api([*turns, final()]) as api:
        extra = STREAMED if streamed else {}
        if server is not None:
            run_agent(mode, api, server.base_url, server.api_key, "dana", **extra)
        else:
            run_agent(mode, api, None, None, "dana", db=db, **extra)

    sent = api.all_tool_results()
    assert [block["tool_use_id"] for block in sent] == [call["id"] for call in calls]
    for n, (block, want) in enumerate(zip(sent, expected, strict=True), 1):
        assert block["content"].encode("utf-8") == want["content"].encode("utf-8"), f"{name} line {n}"
        assert block.get("is_error", False) is want["is_error"], f"{name} line {n}"
    assert any(want["is_error"] for want in expected) and not all(want["is_error"] for want in expected)
    assert [len(turn) for turn in api.tool_results()] == [len(turn) for turn in turns]

    if server is not None:
        server.stop()
        db = server.db_path
    # The tool closed the in-process database as it ended: the CLI opens the file.
    assert db is not None
    ours, theirs = tmp_path / "served", tmp_path / "exec"
    cli(memkv_bin, db, "export", "--to-dir", str(ours), "--user", "dana")
    cli(memkv_bin, tmp_path / "exec.redb", "export", "--to-dir", str(theirs), "--user", "dana")
    assert any(ours.rglob("*.md"))
    assert same_tree(ours, theirs)
