"""Fixtures of the memory-stores API tests: `memkv serve` as a process on a free loopback port
(the binary from $MEMKV_BIN), its keys, and the real anthropic SDK client pointed at it."""

import hashlib
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import quote

import anthropic
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("MEMKV_BIN") or str(ROOT / "target" / "debug" / "memkv")
# Every request and every process wait is bounded by this many seconds.
TIMEOUT = 30


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


class Served:
    """`memkv serve` on a free loopback port; stopped (SIGTERM, exit 0 required) by `stop` or at
    the end of a `with` block. With `log`, its stderr (a line per request) goes to that file,
    complete once the server has stopped."""

    def __init__(self, db, extra_args=(), log=None):
        self.db = str(db)
        self.log = log
        with open(log, "wb") if log else open(os.devnull, "wb") as stderr:
            self.proc = subprocess.Popen(
                [BIN, "--db", self.db, "serve", "--listen", "127.0.0.1:0", *extra_args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
            )
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening on http://127.0.0.1:"), line
        self.url = line.strip().removeprefix("listening on ")

    def add_key(self, *scope):
        """A new key, `add_key("--admin")` or `add_key("--store", ID)`: (its id, the key)."""
        out = subprocess.run(
            [BIN, "--db", self.db, "keys", "add", *scope], capture_output=True, timeout=TIMEOUT, check=True
        )
        lines = out.stdout.decode().splitlines()
        key_id = re.match(r"added (key_[0-9a-f]+) ", lines[0]).group(1)
        return key_id, lines[-1]

    def client(self, key):
        """The anthropic SDK's client, at this server."""
        return anthropic.Anthropic(api_key=key, base_url=self.url, max_retries=0, timeout=TIMEOUT)

    def tool(self, client, store, command):
        """One memory-tool command on the tool route of `store`, POSTed by the SDK's own client:
        memkv's answer, `{"content": ..., "is_error": ...}`."""
        return client.post(
            f"/v1/memory_stores/{quote(store, safe='')}/tool",
            body=command,
            cast_to=object,
        )

    def requests(self, status=None):
        """The request lines of the log (the server must be stopped), or those with `status`."""
        lines = [line for line in Path(self.log).read_text().splitlines() if " request " in line]
        return [line for line in lines if status is None or f" status={status} " in line]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            assert self.proc.wait(timeout=TIMEOUT) == 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.stop()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=TIMEOUT)


@pytest.fixture
def served(tmp_path):
    """A server with an admin key (`served.admin_id`, `served.admin`)."""
    with Served(tmp_path / "memkv.redb") as s:
        s.admin_id, s.admin_key = s.add_key("--admin")
        yield s


@pytest.fixture
def admin(served):
    """The SDK client with the admin key."""
    with served.client(served.admin_key) as client:
        yield client


@pytest.fixture
def store(admin):
    """A fresh memory store, made through the API."""
    return admin.beta.memory_stores.create(name="test store")
