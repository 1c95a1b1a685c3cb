"""`MemkvMemoryTool` and `AsyncMemkvMemoryTool`: the SDK's memory-tool interface, backed by memkv.

The SDK's tool runner calls `tool.call(tool_use.input)` for every memory tool_use block and sends
back what it returns as the tool_result content, or, for a `ToolError`, the error's content with
`is_error: true`. Both pass through the runner unchanged (it only folds unpaired surrogates,
which memkv never returns). So `call` sends the model's input object to memkv as it is, without
the SDK's model round trip (which would turn an unknown command into `NotImplementedError`), and
the model reads exactly the bytes `memkv exec` prints for that input. The six command methods
do the same for callers that use them directly.
"""

from __future__ import annotations

import time
from types import TracebackType

import anyio
import httpx2
from typing_extensions import Self, override
from anthropic.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818ViewCommand,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
)

from . import _wire, _deadline, _local
from ._errors import MemkvError
from ._local import Database, DbArg

__all__ = ["MemkvMemoryTool", "AsyncMemkvMemoryTool"]


class MemkvMemoryTool(BetaAbstractMemoryTool):
    """The memory tool for one memkv memory store (a memkv user), for `Anthropic` clients.

    ```py
    memory = MemkvMemoryTool("dana", db="memory.redb")  # memkv in this process
    memory = MemkvMemoryTool("dana")  # a memkv server: MEMKV_URL / MEMKV_API_KEY
    client.beta.messages.tool_runner(..., tools=[memory]).until_done()
    ```

    `db=` runs memkv in this process, on a database file (created if missing), `":memory:"`,
    a `postgres://` URL or a `memkv.Database` (share one between the memory tool and the search
    tool of a `":memory:"` database); the GIL is released while memkv works. Otherwise the
    tool is a client of `memkv serve` at `base_url`. Both answer the same bytes.

    A model mistake raises the SDK's `ToolError` with memkv's exact message (the runner sends it
    back with `is_error: true`); memkv unreachable, a bad key or a refused request raise
    `MemkvError`. One connection pool per object: `close()` it, or use it as a context manager.

    `timeout` (seconds) bounds each request in all: connecting, sending and the whole answer
    (an `httpx2.Timeout` instead sets httpx's per-operation timeouts, and no total). An answer
    body over `max_answer_bytes` (default 8 MiB, far above memkv's largest) is refused as it
    arrives. The tool's own client connects directly (it does not read `HTTP(S)_PROXY`); with an
    `http_client` of your own (a proxy, other limits), its timeouts apply to each operation and
    the total is checked as the answer comes in.
    """

    def __init__(
        self,
        store: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx2.Timeout | None = _wire.DEFAULT_TIMEOUT,
        max_retries: int = _wire.DEFAULT_MAX_RETRIES,
        max_answer_bytes: int = _wire.DEFAULT_MAX_ANSWER_BYTES,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        http_client: httpx2.Client | None = None,
        db: DbArg | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.store = _wire.check_store(store)
        self._local: Database | None = _local_db(db, base_url, http_client)
        self._owns_db = self._local is not None and not isinstance(db, Database)
        if self._local is not None:
            self.base_url: str | None = None
            self._owns_client = False
            return
        self.base_url = _wire.resolve_base_url(base_url)
        self._url = self.base_url + _wire.tool_path(store)
        self._headers = _wire.headers(_wire.resolve_api_key(api_key))
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.max_retries = max_retries
        self.max_answer_bytes = _wire.check_max_answer_bytes(max_answer_bytes)
        self._total = _wire.total_timeout(timeout)
        self._owns_client = http_client is None
        # Its transport cuts every network operation to the time left of the request.
        self._client = http_client or httpx2.Client(timeout=_wire.make_timeout(timeout), transport=_deadline.DeadlineTransport())

    def send(self, input: object) -> str:
        """Executes one command input object; returns memkv's content or raises `ToolError`."""
        return self._call(_wire.encode(input))

    def _call(self, body: bytes) -> str:
        """memkv's content for one call (`body`: an input object or a `tool_use` block), in this
        process or from the server; `ToolError` for a model mistake."""
        if self._local is not None:
            return self._local.call(self.store, body)
        return _wire.content_of(self._request("POST", self._url, body))

    def _request(self, method: str, url: str, body: bytes | None = None) -> _wire.Answer:
        """One request with its retries (a 429 or 503 after its `Retry-After`, a connection that
        failed before sending); the 200 answer, else `MemkvError`."""
        for attempt in range(self.max_retries + 1):
            try:
                answer = self._exchange(method, url, body)
            except httpx2.HTTPError as exc:
                error: MemkvError = _wire.transport_error(exc, url, self._total)
                error.__cause__ = exc
                retry = _wire.retryable_transport(exc)
            else:
                if answer.status == 200:
                    return answer
                error = _wire.http_error(answer)
                retry = _wire.retryable_status(error)
            if not retry or attempt == self.max_retries:
                raise error
            time.sleep(_wire.retry_wait(attempt, error))
        raise AssertionError("unreachable")

    def _exchange(self, method: str, url: str, content: bytes | None = None) -> _wire.Answer:
        """One request, its answer read in full within the tool's timeout (in all) and its
        `max_answer_bytes`. Raises `httpx2.HTTPError` when no complete answer came."""
        with _deadline.deadline(self._total) as at:
            with self._client.stream(method, url, content=content, headers=self._headers) as response:
                _wire.check_answer_head(response, url, self.max_answer_bytes)
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_raw():
                    size += len(chunk)
                    if size > self.max_answer_bytes:
                        raise _wire.too_large(url, self.max_answer_bytes, None, response.status_code)
                    chunks.append(chunk)
                    # Our own transport stops at the deadline; a client passed in is checked here.
                    if at is not None and time.monotonic() > at:
                        raise _wire.deadline_passed(url, self._total or 0.0)
                return _wire.Answer(response.status_code, response.reason_phrase, response.headers, b"".join(chunks))

    @override
    def call(self, input: object) -> str:
        return self.send(input)

    @override
    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self.send(_wire.command_input(command))

    @override
    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self.send(_wire.command_input(command))

    @override
    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self.send(_wire.command_input(command))

    @override
    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self.send(_wire.command_input(command))

    @override
    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self.send(_wire.command_input(command))

    @override
    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self.send(_wire.command_input(command))

    @override
    def clear_all_memory(self) -> str:
        """Deletes the whole memory store: every memory and its history (memkv serve's
        `DELETE /v1/memory_stores/{store}`). Returns `All memory cleared`, as the SDK's local
        filesystem tool does."""
        if self._local is not None:
            return _wire.cleared(self._local.delete_answer(self.store))
        url = f"{self.base_url}{_wire.store_path(self.store)}"
        try:
            answer = self._exchange("DELETE", url)
        except httpx2.HTTPError as exc:
            raise _wire.transport_error(exc, url, self._total) from exc
        return _wire.cleared(answer)

    def close(self) -> None:
        """Closes the connection pool (not one passed in as `http_client`), or lets go of the
        database the tool opened (not a `Database` passed in as `db`)."""
        if self._owns_db and self._local is not None:
            self._local.close()
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemkvMemoryTool(store={self.store!r}, {_where(self)})"


class AsyncMemkvMemoryTool(BetaAsyncAbstractMemoryTool):
    """`MemkvMemoryTool` for `AsyncAnthropic` clients: the same calls, awaited (the timeout is a
    cancel scope around each whole request, also on an `http_client` of your own).

    `await tool.aclose()`, or `async with AsyncMemkvMemoryTool(...) as memory:`.
    """

    def __init__(
        self,
        store: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx2.Timeout | None = _wire.DEFAULT_TIMEOUT,
        max_retries: int = _wire.DEFAULT_MAX_RETRIES,
        max_answer_bytes: int = _wire.DEFAULT_MAX_ANSWER_BYTES,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        http_client: httpx2.AsyncClient | None = None,
        db: DbArg | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.store = _wire.check_store(store)
        self._local: Database | None = _local_db(db, base_url, http_client)
        self._owns_db = self._local is not None and not isinstance(db, Database)
        if self._local is not None:
            self.base_url: str | None = None
            self._owns_client = False
            return
        self.base_url = _wire.resolve_base_url(base_url)
        self._url = self.base_url + _wire.tool_path(store)
        self._headers = _wire.headers(_wire.resolve_api_key(api_key))
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.max_retries = max_retries
        self.max_answer_bytes = _wire.check_max_answer_bytes(max_answer_bytes)
        self._total = _wire.total_timeout(timeout)
        self._owns_client = http_client is None
        self._client = http_client or httpx2.AsyncClient(timeout=_wire.make_timeout(timeout))

    async def send(self, input: object) -> str:
        """Executes one command input object; returns memkv's content or raises `ToolError`."""
        return await self._call(_wire.encode(input))

    async def _call(self, body: bytes) -> str:
        """As `MemkvMemoryTool._call`; in this process, on a worker thread (the event loop goes on
        while memkv works and waits for the disk)."""
        if self._local is not None:
            return await anyio.to_thread.run_sync(self._local.call, self.store, body)
        return _wire.content_of(await self._request("POST", self._url, body))

    async def _request(self, method: str, url: str, body: bytes | None = None) -> _wire.Answer:
        """As `MemkvMemoryTool._request`, awaited."""
        for attempt in range(self.max_retries + 1):
            try:
                answer = await self._exchange(method, url, body)
            except httpx2.HTTPError as exc:
                error: MemkvError = _wire.transport_error(exc, url, self._total)
                error.__cause__ = exc
                retry = _wire.retryable_transport(exc)
            else:
                if answer.status == 200:
                    return answer
                error = _wire.http_error(answer)
                retry = _wire.retryable_status(error)
            if not retry or attempt == self.max_retries:
                raise error
            await anyio.sleep(_wire.retry_wait(attempt, error))
        raise AssertionError("unreachable")

    async def _exchange(self, method: str, url: str, content: bytes | None = None) -> _wire.Answer:
        """As `MemkvMemoryTool._exchange`; the timeout is a cancel scope around the whole request."""
        try:
            with anyio.fail_after(self._total):
                async with self._client.stream(method, url, content=content, headers=self._headers) as response:
                    _wire.check_answer_head(response, url, self.max_answer_bytes)
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.aiter_raw():
                        size += len(chunk)
                        if size > self.max_answer_bytes:
                            raise _wire.too_large(url, self.max_answer_bytes, None, response.status_code)
                        chunks.append(chunk)
                    return _wire.Answer(response.status_code, response.reason_phrase, response.headers, b"".join(chunks))
        except TimeoutError:
            raise _wire.deadline_passed(url, self._total or 0.0) from None

    @override
    async def call(self, input: object) -> str:
        return await self.send(input)

    @override
    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self.send(_wire.command_input(command))

    @override
    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self.send(_wire.command_input(command))

    @override
    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self.send(_wire.command_input(command))

    @override
    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self.send(_wire.command_input(command))

    @override
    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self.send(_wire.command_input(command))

    @override
    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self.send(_wire.command_input(command))

    @override
    async def clear_all_memory(self) -> str:
        """As `MemkvMemoryTool.clear_all_memory`."""
        if self._local is not None:
            local = self._local
            return _wire.cleared(await anyio.to_thread.run_sync(local.delete_answer, self.store))
        url = f"{self.base_url}{_wire.store_path(self.store)}"
        try:
            answer = await self._exchange("DELETE", url)
        except httpx2.HTTPError as exc:
            raise _wire.transport_error(exc, url, self._total) from exc
        return _wire.cleared(answer)

    async def aclose(self) -> None:
        """As `MemkvMemoryTool.close`."""
        if self._owns_db and self._local is not None:
            self._local.close()
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncMemkvMemoryTool(store={self.store!r}, {_where(self)})"


def _local_db(db: DbArg | None, base_url: str | None, http_client: object | None) -> Database | None:
    """The database of `db=`, if given (and then no server arguments)."""
    if db is None:
        return None
    if base_url is not None or http_client is not None:
        raise ValueError("pass db= (memkv in this process) or base_url= (a memkv server), not both")
    return _local.resolve(db)


def _where(tool: MemkvMemoryTool | AsyncMemkvMemoryTool) -> str:
    if tool._local is not None:
        return f"db={tool._local.location!r}"
    return f"base_url={tool.base_url!r}"
