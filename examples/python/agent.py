#!/usr/bin/env python3
"""A complete agent loop with memkv memory: Claude's memory tool (memory_20250818) backed by a
`memkv serve`, through the anthropic SDK's tool runner.

    pip install ./python                       # the memkv package (pulls anthropic)
    export ANTHROPIC_API_KEY=...
    # a server you run (memkv --db memkv.redb serve, with MEMKV_URL / MEMKV_API_KEY set) ...
    python examples/python/agent.py --user dana "I'm Dana, I work on the ledger service in Rust."
    # ... or one this script starts on a local database for the run:
    python examples/python/agent.py --db /tmp/memkv.redb --user dana "What do you know about me?"

Each run is one task; what Claude chose to remember stays in the user's store for the next run.
"""

from __future__ import annotations

import sys
import argparse
import contextlib
from typing import Iterator

from anthropic import Anthropic

import memkv
from memkv import MemkvMemoryTool

MODEL = "claude-sonnet-5-5"
SYSTEM = (
    "You are a helpful assistant with a persistent memory directory, /memories. "
    "At the start of every task, view /memories and read what is relevant. "
    "Keep it up to date as you learn durable facts about the user and their work: "
    "small, well-named files, no secrets, no transcripts."
)


@contextlib.contextmanager
def memory_server(db: str | None) -> Iterator[tuple[str | None, str | None]]:
    """(base_url, api_key): a local `memkv serve` on `db` for this run, or None for MEMKV_URL/MEMKV_API_KEY."""
    if db is None:
        yield None, None
        return
    with memkv.serve_local(db) as server:
        yield server.base_url, server.api_key


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="what to ask Claude")
    parser.add_argument("--user", required=True, help="the memkv store (user id) whose memory Claude uses")
    parser.add_argument("--db", help="start a local memkv serve on this database instead of using MEMKV_URL")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--max-turns", type=int, default=20, help="most model requests for the task")
    args = parser.parse_args()

    client = Anthropic()  # ANTHROPIC_API_KEY
    with memory_server(args.db) as (base_url, api_key), MemkvMemoryTool(
        args.user, base_url=base_url, api_key=api_key
    ) as memory:
        runner = client.beta.messages.tool_runner(
            model=args.model,
            max_tokens=4096,
            system=SYSTEM,
            messages=[{"role": "user", "content": args.task}],
            tools=[memory],
            max_iterations=args.max_turns,
        )
        for message in runner:
            for block in message.content:
                if block.type == "text":
                    print(block.text)
                elif block.type == "tool_use" and isinstance(block.input, dict):
                    where = block.input.get("path") or block.input.get("old_path") or ""
                    print(f"[memory] {block.input.get('command')} {where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
