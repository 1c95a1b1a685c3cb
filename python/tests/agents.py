"""The real SDK's tool runner, sync or async, driven by a scripted Messages API, with a memkv
memory tool for one store."""

from __future__ import annotations

import asyncio
from typing import Any

from anthropic import Anthropic, AsyncAnthropic
from scripted_api import MODEL, ScriptedAPI

from memkv import MemkvMemoryTool, AsyncMemkvMemoryTool

MODES = ["sync", "async"]
PROMPT = [{"role": "user", "content": "Check your memory, then work on the ledger service."}]


def client(api: ScriptedAPI) -> Anthropic:
    return Anthropic(base_url=api.base_url, api_key="sk-ant-test", max_retries=0, timeout=30)


def async_client(api: ScriptedAPI) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=api.base_url, api_key="sk-ant-test", max_retries=0, timeout=30)


def runner_args(api: ScriptedAPI, tool: object) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": PROMPT,
        "tools": [tool],
        "max_iterations": len(api.turns) + 1,
    }


STREAMED = {"stream": True, "run_tools_eagerly": True}
"""The streaming runner, each tool call run as soon as it is complete, while the reply streams."""


def run_agent(
    mode: str, api: ScriptedAPI, base_url: str | None, api_key: str | None, store: str, db: object = None, **extra: Any
) -> Any:
    """Runs the whole script through `client.beta.messages.tool_runner`; the last message. With
    `db`, the memory tool runs memkv in this process (`db=`) instead of against `base_url`."""
    where: dict[str, Any] = {"db": db} if db is not None else {"base_url": base_url, "api_key": api_key}
    if mode == "sync":
        with MemkvMemoryTool(store, **where) as tool, client(api) as sdk:
            return sdk.beta.messages.tool_runner(**runner_args(api, tool), **extra).until_done()

    async def go() -> Any:
        async with AsyncMemkvMemoryTool(store, **where) as tool, async_client(api) as sdk:
            return await sdk.beta.messages.tool_runner(**runner_args(api, tool), **extra).until_done()

    return asyncio.run(go())
