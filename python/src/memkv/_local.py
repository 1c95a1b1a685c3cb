"""memkv in this process: a database opened by the native extension (`memkv._native`, built
from crates/memkv-python), which the tools use when given `db=` instead of a server's URL.

Every call answers what `memkv serve` answers for the same request (a status and the JSON
body), so the tools read an in-process answer with the same code as an HTTP one, and a program
written for one runs on the other unchanged. The extension releases the GIL while memkv works:
threads run in parallel, and their writes share commits.
"""

from __future__ import annotations

import os
import json
from types import TracebackType
from typing import Any, Union

import httpx2
from typing_extensions import Self
from anthropic.tools import ToolError

from . import _wire
from ._errors import MemkvError, MemkvLockedError

__all__ = ["Database", "IN_MEMORY"]

IN_MEMORY = ":memory:"
"""The location of a database held in memory: each `Database(IN_MEMORY)` is a new, empty one."""

LOCKED_REMEDY = (
    "one process at a time may write a memkv database: to share it between processes, serve it "
    "(`memkv serve --db FILE`) and pass base_url= instead of db=; or open it read-only "
    "(Database(FILE, read_only=True)) beside a writer that opened it with shared=True"
)

_NO_HEADERS = httpx2.Headers()


class Database:
    """A memkv database open in this process: a redb file (created if missing), `":memory:"`,
    or a `postgres://` URL.

    ```py
    db = memkv.Database("memory.redb")
    memory = MemkvMemoryTool("dana", db=db)  # or db="memory.redb"
    search = MemkvSearchTool("dana", db=db)
    ```

    Objects of one process that name the same file share one open database. Another process
    that has the file open for writing makes the open fail with `MemkvLockedError`, which says
    what to do instead. `read_only=True` opens an existing database without writing to it (the
    memory tool answers its read-only message to writes), beside a writer opened with
    `shared=True`. The file is closed once `close()` was called (or the last object using it is
    gone) on every object that opened it.
    """

    def __init__(self, location: str | os.PathLike[str], *, read_only: bool = False, shared: bool = False) -> None:
        from . import _native

        self.location = os.fspath(location)
        try:
            self._native: Any = _native.Database(self.location, read_only=read_only, shared=shared)
        except _native.OpenError as exc:
            kind, message = exc.args
            if kind == "locked":
                raise MemkvLockedError(f"{message}; {LOCKED_REMEDY}", type="database_locked") from None
            raise MemkvError(message, type="not_found_error" if kind == "not_found" else "database_error") from None
        self.read_only = read_only

    def _db(self) -> Any:
        native = self._native
        if native is None:
            raise MemkvError(f"{self.location}: the database was closed", type="database_closed")
        return native

    def _answer(self, reply: tuple[int, str]) -> _wire.Answer:
        status, body = reply
        return _wire.Answer(status, "", _NO_HEADERS, body.encode("utf-8"))

    def tool(self, store: str, body: bytes) -> _wire.Answer:
        """The tool route's answer to `body` (a command's input object, a `tool_use` block or an
        array of them, as JSON) for `store`."""
        return self._answer(self._db().tool(_wire.check_store(store), body))

    def call(self, store: str, body: bytes) -> str:
        """One call as the tools make it (a command's input object, or one `tool_use` block, as
        JSON): memkv's content, `ToolError(content)` for a model mistake, `MemkvError` for a
        refused request. The text comes back as it is, without the JSON around it."""
        status, text, is_error = self._db().call(_wire.check_store(store), body)
        if status != 200:
            raise _wire.http_error(self._answer((status, text)))
        if is_error:
            raise ToolError(text)
        return str(text)

    def search_answer(self, store: str, query: str, **params: Any) -> _wire.Answer:
        """The search route's answer."""
        return self._answer(self._db().search(_wire.check_store(store), query, **params))

    def delete_answer(self, store: str) -> _wire.Answer:
        return self._answer(self._db().delete_store(_wire.check_store(store)))

    def _json(self, reply: tuple[int, str]) -> Any:
        answer = self._answer(reply)
        if answer.status != 200:
            raise _wire.http_error(answer)
        return json.loads(answer.body)

    def search(
        self,
        store: str,
        query: str,
        *,
        mode: str | None = None,
        case_insensitive: bool | None = None,
        path_prefix: str | None = None,
        context: int | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """As `MemkvSearchTool.search`: `{"data": [...], "more", "unsearched"}`."""
        answer = self.search_answer(
            store, query, mode=mode, case_insensitive=case_insensitive, path_prefix=path_prefix, context=context, limit=limit
        )
        if answer.status != 200:
            raise _wire.http_error(answer)
        result: dict[str, Any] = json.loads(answer.body)
        return result

    def stores(self) -> list[dict[str, Any]]:
        """Every store with memories: `[{"id", "files", "bytes", "last_write", "expired_files"}]`."""
        data: list[dict[str, Any]] = self._json(self._db().stores())["data"]
        return data

    def delete_store(self, store: str) -> bool:
        """Deletes a store with every memory and version; False when it was never written."""
        answer = self.delete_answer(store)
        if answer.status == 404:
            return False
        if answer.status != 200:
            raise _wire.http_error(answer)
        return True

    def export(self, file: str | os.PathLike[str], stores: list[str] | None = None) -> dict[str, Any]:
        """Writes an export of `stores` (every store by default) to `file`, whole or not at all:
        the format of `memkv export` (docs/export-format.md). Returns its counts."""
        result: dict[str, Any] = self._json(self._db().export(list(stores or []), os.fspath(file)))
        return result

    def import_file(self, file: str | os.PathLike[str], conflict: str | None = None) -> dict[str, Any]:
        """Imports an export file in one transaction; `conflict`: `refuse` (the default: a memory
        already there refuses the whole import), `skip` or `replace`. Returns its counts."""
        result: dict[str, Any] = self._json(self._db().import_file(os.fspath(file), conflict))
        return result

    def expire(self, dry_run: bool = False) -> list[dict[str, Any]]:
        """Deletes the memories whose time-to-live has passed (only lists them with `dry_run`):
        `[{"memory_store_id", "path", "size", "last_used"}]`."""
        data: list[dict[str, Any]] = self._json(self._db().expire(dry_run))["data"]
        return data

    def history(self, store: str, path: str | None = None) -> list[dict[str, Any]]:
        """The versions of the memory at `path` (`/memories/...`), or of the whole store, oldest
        first, as `memkv history --json` prints them."""
        data: list[dict[str, Any]] = self._json(self._db().history(_wire.check_store(store), path))["data"]
        return data

    def close(self) -> None:
        """Lets go of the database (the GIL released while the last handle flushes and stops
        its writer): the file is closed once no other object of this process uses it."""
        native, self._native = self._native, None
        if native is not None:
            native.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Database({self.location!r}, read_only={self.read_only!r})"


DbArg = Union[str, "os.PathLike[str]", Database]
"""What `db=` takes: a location (a file, `":memory:"`, a `postgres://` URL) or an open Database."""


def resolve(db: DbArg) -> Database:
    return db if isinstance(db, Database) else Database(db)
