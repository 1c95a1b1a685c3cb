#!/usr/bin/env python3
"""Memory with context editing: Claude keeps what matters in memkv (the memory tool and
memory_search), and the API clears old tool results from the context as a long task fills it,
never those of the two memory tools (docs/context-editing.md).

    pip install ./python                       # the memkv package (pulls anthropic)
    export ANTHROPIC_API_KEY=... MEMKV_URL=http://127.0.0.1:7437 MEMKV_API_KEY=...
    python examples/python/context_editing.py --user dana "Review the open tickets; note what matters."
"""

from __future__ import annotations

import sys
import argparse

from anthropic import Anthropic

from memkv import MemkvSearchTool, MemkvMemoryTool

MODEL = "claude-sonnet-5-5"
SYSTEM = (
    "You have a persistent memory directory, /memories. View it at the start of a task. "
    "Old tool results are cleared from the conversation as it grows: note in /memories what you "
    "will need later, before it is gone."
)
BETAS = ["context-management-2025-06-27"]
CONTEXT_MANAGEMENT = {
    "edits": [
        {
            "type": "clear_tool_uses_20250919",
            # Once a request's input passes 30,000 tokens, clear the oldest tool results,
            # keeping the last 3 and clearing at least 5,000 tokens' worth (or nothing).
            "trigger": {"type": "input_tokens", "value": 30_000},
            "keep": {"type": "tool_uses", "value": 3},
            "clear_at_least": {"type": "input_tokens", "value": 5_000},
            # Never the memory tools': what Claude read from memory stays in view.
            "exclude_tools": ["memory", "memory_search"],
        }
    ]
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="what to ask Claude")
    parser.add_argument("--user", required=True, help="the memkv store (user id) whose memory Claude uses")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--max-turns", type=int, default=40, help="most model requests for the task")
    args = parser.parse_args()

    client = Anthropic()  # ANTHROPIC_API_KEY
    with MemkvMemoryTool(args.user) as memory, MemkvSearchTool(args.user) as search:  # MEMKV_URL, MEMKV_API_KEY
        runner = client.beta.messages.tool_runner(
            model=args.model,
            max_tokens=4096,
            system=SYSTEM,
            messages=[{"role": "user", "content": args.task}],
            tools=[memory, search],
            betas=BETAS,
            context_management=CONTEXT_MANAGEMENT,
            max_iterations=args.max_turns,
        )
        for message in runner:
            for edit in message.context_management.applied_edits if message.context_management else []:
                print(f"[context] {edit.type}: {edit.model_dump(exclude={'type'})}", file=sys.stderr)
            for block in message.content:
                if block.type == "text":
                    print(block.text)
                elif block.type == "tool_use":
                    print(f"[{block.name}] {block.input}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
