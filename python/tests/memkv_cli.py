"""The `memkv` CLI, for what the tests compare against (`exec`) and inspect afterwards (`tree`,
`cat`, `export --to-dir`), and the tool_result blocks the SDK is expected to send."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SESSIONS = {
    "agent-session": REPO / "benches" / "data" / "agent-session.jsonl",
    "examples-session": REPO / "examples" / "session.jsonl",
}


def cli(memkv_bin: str, db: Path, *args: str, input: str | None = None) -> str:
    done = subprocess.run(
        [memkv_bin, "--db", str(db), *args],
        input=None if input is None else input.encode("utf-8"),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return done.stdout.decode("utf-8")


def exec_lines(memkv_bin: str, db: Path, user: str, lines: Sequence[str]) -> list[dict[str, Any]]:
    """`memkv --db DB exec --user USER` on these input lines: one JSON answer per line."""
    out = cli(memkv_bin, db, "exec", "--user", user, input="".join(line + "\n" for line in lines))
    return [json.loads(line) for line in out.splitlines()]


def exec_inputs(memkv_bin: str, db: Path, user: str, inputs: Sequence[object]) -> list[dict[str, Any]]:
    return exec_lines(memkv_bin, db, user, [json.dumps(i) for i in inputs])


def tree_paths(memkv_bin: str, db: Path, user: str) -> list[str]:
    """The paths `memkv tree` lists (its last column); none for a user with nothing stored
    (which `tree` refuses with "no user …")."""
    done = subprocess.run(
        [memkv_bin, "--db", str(db), "tree", "--user", user], capture_output=True, timeout=60
    )
    if done.returncode != 0 and f'no user "{user}"' in done.stderr.decode("utf-8", "replace"):
        return []
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return [line.split()[-1] for line in done.stdout.decode("utf-8").splitlines() if line.strip()]


def cat(memkv_bin: str, db: Path, user: str, path: str) -> str:
    return cli(memkv_bin, db, "cat", "--user", user, path)


def expected_blocks(ids: Sequence[str], answers: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool_result blocks the SDK sends for memkv's answers: `is_error` only when true."""
    blocks = []
    for id, answer in zip(ids, answers, strict=True):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": id, "content": answer["content"]}
        if answer["is_error"]:
            block["is_error"] = True
        blocks.append(block)
    return blocks
