"""Fixtures: the real `memkv` binary (MEMKV_BIN or PATH) and real servers on loopback. A
missing binary fails the tests; it never skips them."""

from __future__ import annotations

from typing import Iterator
from pathlib import Path

import pytest

import memkv


@pytest.fixture(scope="session")
def memkv_bin() -> str:
    try:
        return memkv.find_binary()
    except memkv.MemkvServeError as exc:
        pytest.fail(f"{exc} (tools/test-python.sh builds it and sets MEMKV_BIN)")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memkv.redb"


@pytest.fixture
def server(db: Path, memkv_bin: str) -> Iterator[memkv.LocalServer]:
    with memkv.serve_local(db, binary=memkv_bin) as running:
        yield running
    assert running.returncode == 0, f"memkv serve did not shut down cleanly:\n{running.stderr()}"
