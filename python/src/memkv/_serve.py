"""`serve_local`: a `memkv serve` on a free loopback port with a fresh admin key.

For tests, notebooks and local agents. It runs the `memkv` binary (`MEMKV_BIN`, else `memkv` on
`PATH`): `memkv --db DB keys add --admin` (the key is the last line of its output), then
`memkv --db DB serve --listen 127.0.0.1:0`, whose one stdout line `listening on http://...` gives
the port, and waits for `GET /readyz`. Leaving the context sends SIGTERM (graceful shutdown) and
waits; a server that does not stop in time is killed. The server always has that key, so it
checks keys like any other: it is never started keyless (`serve --no-auth`, which memkv refuses
anyway once a key exists).
"""

from __future__ import annotations

import os
import re
import queue
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from typing import IO, Iterator, Sequence
from pathlib import Path
from contextlib import contextmanager
from collections import deque

import httpx2

from ._tool import MemkvMemoryTool, AsyncMemkvMemoryTool
from ._search import MemkvSearchTool, AsyncMemkvSearchTool
from ._errors import MemkvServeError

__all__ = ["LocalServer", "serve_local", "find_binary"]

_LISTENING = re.compile(r"^listening on (http://\S+)\s*$")
_STDERR_LINES = 200


def find_binary(binary: str | os.PathLike[str] | None = None) -> str:
    """The `memkv` executable: `binary`, else `$MEMKV_BIN`, else the one this package's wheel
    installed beside the running interpreter (whether or not its virtualenv is activated, and
    before any other `memkv` on `PATH`), else `memkv` on `PATH`."""
    candidate = os.fspath(binary) if binary is not None else os.environ.get("MEMKV_BIN")
    if candidate:
        found = shutil.which(candidate)
        if found is None:
            raise MemkvServeError(f"memkv binary {candidate!r} (MEMKV_BIN) is not an executable file", type="binary_not_found")
        return found
    beside = _beside_interpreter()
    if beside is not None:
        return beside
    found = shutil.which("memkv")
    if found is None:
        raise MemkvServeError(
            "no `memkv` binary: install the memkv wheel into this interpreter's environment, put memkv on PATH, "
            "or set MEMKV_BIN (build it with `cargo build --release -p memkv-cli`)",
            type="binary_not_found",
        )
    return found


def _beside_interpreter() -> str | None:
    """The `memkv` in the scripts directory of the running interpreter's environment (where pip
    puts the wheel's binary), if there is one."""
    dirs = [os.path.dirname(sys.executable)]
    try:
        dirs.insert(0, sysconfig.get_path("scripts"))
    except KeyError:
        pass
    for directory in dirs:
        if not directory:
            continue
        path = os.path.join(directory, "memkv.exe" if os.name == "nt" else "memkv")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


class LocalServer:
    """A running `memkv serve` started by `serve_local`."""

    base_url: str
    """`http://127.0.0.1:PORT`, as the server printed it."""
    api_key: str
    """A fresh admin key: valid for every store."""
    db_path: Path
    returncode: int | None
    """The server's exit status once stopped (0 after a graceful shutdown), else None."""

    def __init__(self, process: subprocess.Popen[bytes], db_path: Path, api_key: str, stderr: deque[str]) -> None:
        self.process = process
        self.db_path = db_path
        self.api_key = api_key
        self.base_url = ""
        self.returncode = None
        self._stderr = stderr
        self._threads: list[threading.Thread] = []

    @property
    def env(self) -> dict[str, str]:
        """`MEMKV_URL` and `MEMKV_API_KEY` for this server."""
        return {"MEMKV_URL": self.base_url, "MEMKV_API_KEY": self.api_key}

    def tool(self, store: str, **kwargs: object) -> MemkvMemoryTool:
        """A `MemkvMemoryTool` for `store` on this server."""
        return MemkvMemoryTool(store, base_url=self.base_url, api_key=self.api_key, **kwargs)  # type: ignore[arg-type]

    def async_tool(self, store: str, **kwargs: object) -> AsyncMemkvMemoryTool:
        """An `AsyncMemkvMemoryTool` for `store` on this server."""
        return AsyncMemkvMemoryTool(store, base_url=self.base_url, api_key=self.api_key, **kwargs)  # type: ignore[arg-type]

    def search_tool(self, store: str, **kwargs: object) -> MemkvSearchTool:
        """A `MemkvSearchTool` for `store` on this server."""
        return MemkvSearchTool(store, base_url=self.base_url, api_key=self.api_key, **kwargs)

    def async_search_tool(self, store: str, **kwargs: object) -> AsyncMemkvSearchTool:
        """An `AsyncMemkvSearchTool` for `store` on this server."""
        return AsyncMemkvSearchTool(store, base_url=self.base_url, api_key=self.api_key, **kwargs)

    def stderr(self) -> str:
        """The server's latest stderr lines (its log)."""
        return "".join(self._stderr)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then wait up to `timeout` seconds; kill if it is still running. Idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        for thread in self._threads:
            thread.join(timeout)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        self.returncode = self.process.returncode
        return self.returncode

    def __repr__(self) -> str:
        return f"LocalServer(base_url={self.base_url!r}, db_path={str(self.db_path)!r}, returncode={self.returncode!r})"


def _pump(pipe: IO[bytes], sink: "queue.Queue[str] | deque[str]") -> None:
    for raw in iter(pipe.readline, b""):
        line = raw.decode("utf-8", "replace")
        if isinstance(sink, deque):
            sink.append(line)
        else:
            sink.put(line)


def _add_admin_key(memkv: str, db: Path, options: Sequence[str], timeout: float) -> str:
    cmd = [memkv, "--db", str(db), *options, "keys", "add", "--admin"]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise MemkvServeError(f"`{' '.join(cmd)}` did not finish in {timeout}s", type="keys_failed") from None
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].strip():
        raise MemkvServeError(
            f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{done.stderr.decode('utf-8', 'replace')}",
            type="keys_failed",
        )
    return lines[-1].strip()


def _wait_until_up(server: LocalServer, lines: "queue.Queue[str]", deadline: float) -> None:
    process = server.process
    while not server.base_url:
        try:
            line = lines.get(timeout=0.05)
        except queue.Empty:
            if process.poll() is not None and lines.empty():
                server.stop()
                raise MemkvServeError(
                    f"memkv serve exited with status {process.returncode} before listening:\n{server.stderr()}",
                    type="server_died",
                ) from None
            if time.monotonic() > deadline:
                raise MemkvServeError(f"memkv serve did not print its address in time:\n{server.stderr()}", type="start_timeout")
            continue
        match = _LISTENING.match(line)
        if match:
            server.base_url = match.group(1).rstrip("/")
    with httpx2.Client(timeout=2.0, trust_env=False) as client:
        while True:
            if process.poll() is not None:
                server.stop()
                raise MemkvServeError(
                    f"memkv serve exited with status {process.returncode} while starting:\n{server.stderr()}",
                    type="server_died",
                )
            try:
                if client.get(server.base_url + "/readyz").status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise MemkvServeError(f"memkv serve at {server.base_url} not ready in time:\n{server.stderr()}", type="start_timeout")
            time.sleep(0.02)


@contextmanager
def serve_local(
    db_path: str | os.PathLike[str],
    *,
    listen: str = "127.0.0.1:0",
    options: Sequence[str] = (),
    serve_options: Sequence[str] = (),
    binary: str | os.PathLike[str] | None = None,
    start_timeout: float = 20.0,
    stop_timeout: float = 10.0,
) -> Iterator[LocalServer]:
    """Starts `memkv --db DB [options] serve --listen LISTEN` with a fresh admin key.

    ```py
    with memkv.serve_local("memories.redb") as server:
        memory = MemkvMemoryTool("dana", base_url=server.base_url, api_key=server.api_key)
    ```

    `options` are memkv's store options (`--max-file-bytes`, `--secrets`, ...), `serve_options`
    those of `serve` itself (`--max-in-flight`, ...). Raises
    `MemkvServeError` when the binary is missing or the server does not come up (with its
    stderr). On exit the server gets SIGTERM and `stop_timeout` seconds, then is killed.
    """
    memkv = find_binary(binary)
    db = Path(db_path)
    db.parent.mkdir(parents=True, exist_ok=True)
    api_key = _add_admin_key(memkv, db, options, start_timeout)
    process = subprocess.Popen(
        [memkv, "--db", str(db), *options, "serve", "--listen", listen, *serve_options],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stderr: deque[str] = deque(maxlen=_STDERR_LINES)
    server = LocalServer(process, db, api_key, stderr)
    lines: "queue.Queue[str]" = queue.Queue()
    assert process.stdout is not None and process.stderr is not None
    for pipe, sink in ((process.stdout, lines), (process.stderr, stderr)):
        thread = threading.Thread(target=_pump, args=(pipe, sink), name="memkv-serve-pipe", daemon=True)
        thread.start()
        server._threads.append(thread)
    try:
        _wait_until_up(server, lines, time.monotonic() + start_timeout)
        yield server
    finally:
        server.stop(stop_timeout)
