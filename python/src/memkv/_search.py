"""`MemkvSearchTool` and `AsyncMemkvSearchTool`: memkv's `memory_search` tool for the SDK's tool
runners, next to the memory tool and over the same store.

`memory_search` is memkv's own tool (not part of `memory_20250818`; docs/search.md in the
repository). The runner sends the model's input to `call`, which passes it to memkv as a
`tool_use` block on the store's tool route; the model reads exactly what `memkv search` prints.
Its definition (name, description, input schema) is memkv's, the same `memkv search
--tool-definition` prints and MCP lists. `search()` is the plain client call: the JSON of
`GET /v1/memory_stores/{store}/search`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any
from urllib.parse import urlencode

import anyio
from typing_extensions import Self, override
from anthropic.lib.tools import BetaBuiltinFunctionTool, BetaAsyncBuiltinFunctionTool

from . import _wire
from ._errors import MemkvError
from ._tool import MemkvMemoryTool, AsyncMemkvMemoryTool, _where

__all__ = ["MemkvSearchTool", "AsyncMemkvSearchTool", "SEARCH_TOOL_DEFINITION"]

SEARCH_TOOL_NAME = "memory_search"

# memkv's definition, byte for byte (src/search/tool.rs; tests/test_search.py checks it against
# `memkv search --tool-definition`).
SEARCH_TOOL_DEFINITION: dict[str, Any] = {
    "name": SEARCH_TOOL_NAME,
    "description": (
        "Search your memory directory (/memories) without opening every file. Use it before you view files "
        "when you look for something you may have noted (a person, a preference, a decision) and do not know "
        "which file holds it, or to find every place that mentions something before you change it. mode "
        "ranked (the default) answers the files most about the query's words, best first, each with its best "
        "lines; mode literal or regex answers every line that contains the text or matches the pattern. Lines "
        "are shown as /memories/path:line_number: line. Use the memory tool to read or change what you find."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What to find: words (ranked), the exact text (literal), or a regular expression in Rust/ripgrep syntax (regex).",
            },
            "mode": {
                "type": "string",
                "enum": ["ranked", "literal", "regex"],
                "description": "ranked (the default): the files most about the query's words; literal: lines containing the text; regex: lines matching the pattern.",
            },
            "case_insensitive": {
                "type": "boolean",
                "description": "literal and regex: match letters of either case (default false; ranked always does).",
            },
            "path_prefix": {
                "type": "string",
                "description": "Only search this file or the files below this directory, e.g. /memories/projects.",
            },
            "context": {
                "type": "integer",
                "minimum": 0,
                "maximum": 10,
                "description": "Lines to show before and after each line shown (default 0).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1000,
                "description": "The most files (ranked, default 10) or matching lines (literal and regex, default 50) to show.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}


def _block(input: object) -> bytes:
    return _wire.encode({"type": "tool_use", "id": "memkv_search", "name": SEARCH_TOOL_NAME, "input": input})


def _query(
    query: str, mode: str | None, case_insensitive: bool | None, path_prefix: str | None, context: int | None, limit: int | None
) -> str:
    params: dict[str, str] = {"q": query}
    if mode is not None:
        params["mode"] = mode
    if case_insensitive is not None:
        params["case_insensitive"] = "true" if case_insensitive else "false"
    if path_prefix is not None:
        params["path_prefix"] = path_prefix
    if context is not None:
        params["context"] = str(context)
    if limit is not None:
        params["limit"] = str(limit)
    return urlencode(params)


def _json(answer: _wire.Answer) -> dict[str, Any]:
    body = _wire._json(answer.body)
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise MemkvError(f"unexpected answer: {str(body)[:200]}", status=200, type="protocol_error")
    return body


class MemkvSearchTool(BetaBuiltinFunctionTool):
    """`memory_search` for one memkv memory store, for `Anthropic` clients.

    ```py
    memory, search = MemkvMemoryTool("dana"), MemkvSearchTool("dana")
    client.beta.messages.tool_runner(..., tools=[memory, search]).until_done()
    ```

    A search memkv refuses (an empty query, a bad pattern) raises the SDK's `ToolError` with
    memkv's exact message; memkv unreachable, a bad key or a refused request raise `MemkvError`.
    The keyword arguments are `MemkvMemoryTool`'s: `db=` for memkv in this process (pass the
    same `memkv.Database` as the memory tool's for a `":memory:"` one), or a server's (timeouts,
    retries, the answer cap, a client).
    """

    def __init__(self, store: str, **kwargs: Any) -> None:
        self._transport = MemkvMemoryTool(store, **kwargs)
        self.store = store
        self.base_url = self._transport.base_url
        self._search_url = f"{self.base_url}{_wire.store_path(store)}/search"

    @override
    def to_dict(self) -> Any:
        return dict(SEARCH_TOOL_DEFINITION)

    @override
    def call(self, input: object) -> str:
        return self._transport._call(_block(input))

    def search(
        self,
        query: str,
        *,
        mode: str | None = None,
        case_insensitive: bool | None = None,
        path_prefix: str | None = None,
        context: int | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """The search's results as the HTTP API answers them: `{"data": [{"path", "memory_id",
        "score" (ranked), "lines": [{"line_number", "text", "is_match"}]}], "more", "unsearched"}`,
        `path` and `path_prefix` as the memory-stores API spells paths (`/notes/`)."""
        local = self._transport._local
        if local is not None:
            return local.search(
                self.store, query, mode=mode, case_insensitive=case_insensitive, path_prefix=path_prefix, context=context, limit=limit
            )
        url = self._search_url + "?" + _query(query, mode, case_insensitive, path_prefix, context, limit)
        return _json(self._transport._request("GET", url))

    def close(self) -> None:
        """Closes the connection pool (not one passed in as `http_client`)."""
        self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemkvSearchTool(store={self.store!r}, {_where(self._transport)})"


class AsyncMemkvSearchTool(BetaAsyncBuiltinFunctionTool):
    """`MemkvSearchTool` for `AsyncAnthropic` clients (`AsyncMemkvMemoryTool`'s arguments)."""

    def __init__(self, store: str, **kwargs: Any) -> None:
        self._transport = AsyncMemkvMemoryTool(store, **kwargs)
        self.store = store
        self.base_url = self._transport.base_url
        self._search_url = f"{self.base_url}{_wire.store_path(store)}/search"

    @override
    def to_dict(self) -> Any:
        return dict(SEARCH_TOOL_DEFINITION)

    @override
    async def call(self, input: object) -> str:
        return await self._transport._call(_block(input))

    async def search(
        self,
        query: str,
        *,
        mode: str | None = None,
        case_insensitive: bool | None = None,
        path_prefix: str | None = None,
        context: int | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """As `MemkvSearchTool.search`, awaited."""
        local = self._transport._local
        if local is not None:
            return await anyio.to_thread.run_sync(
                lambda: local.search(
                    self.store, query, mode=mode, case_insensitive=case_insensitive, path_prefix=path_prefix, context=context, limit=limit
                )
            )
        url = self._search_url + "?" + _query(query, mode, case_insensitive, path_prefix, context, limit)
        return _json(await self._transport._request("GET", url))

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncMemkvSearchTool(store={self.store!r}, {_where(self._transport)})"

