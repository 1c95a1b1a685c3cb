"""`memkv.serve_local`: a real server on a free loopback port, stopped cleanly; clear errors
when it cannot start."""

from __future__ import annotations

import os
import socket
import sys
import sysconfig
from pathlib import Path

import httpx2
import pytest

import memkv
from memkv import MemkvServeError


def test_serves_on_loopback_with_an_admin_key_and_stops_gracefully(db: Path, memkv_bin: str) -> None:
    with memkv.serve_local(db, binary=memkv_bin) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.returncode is None and server.process.poll() is None
        assert httpx2.get(server.base_url + "/healthz", trust_env=False).status_code == 200
        assert httpx2.get(server.base_url + "/readyz", trust_env=False).status_code == 200
        assert server.env == {"MEMKV_URL": server.base_url, "MEMKV_API_KEY": server.api_key}
        # An admin key opens every store.
        for store in ["a", "b"]:
            with server.tool(store) as tool:
                assert tool.call({"command": "view", "path": "/memories"}).endswith("\n0B\t/memories")
    assert server.returncode == 0, server.stderr()
    assert db.exists()


def test_two_servers_get_two_ports(tmp_path: Path, memkv_bin: str) -> None:
    with memkv.serve_local(tmp_path / "a.redb", binary=memkv_bin) as a, memkv.serve_local(
        tmp_path / "b.redb", binary=memkv_bin
    ) as b:
        assert a.base_url != b.base_url
        assert a.api_key != b.api_key


def test_binary_from_memkv_bin(db: Path, memkv_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMKV_BIN", memkv_bin)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert memkv.find_binary() == memkv_bin
    with memkv.serve_local(db) as server:
        assert server.base_url
    monkeypatch.setenv("MEMKV_BIN", "/nonexistent/memkv")
    with pytest.raises(MemkvServeError) as caught:
        memkv.find_binary()
    assert caught.value.type == "binary_not_found" and "/nonexistent/memkv" in str(caught.value)
    monkeypatch.delenv("MEMKV_BIN")
    # The wheel's own binary, beside this interpreter, comes before any `memkv` on PATH,
    # activated virtualenv or not.
    scripts = Path(sysconfig.get_path("scripts"))
    # The suite installs the wheel (tools/test-python.sh sets MEMKV_WHEEL): its binary is there.
    assert (scripts / "memkv").is_file() or not os.environ.get("MEMKV_WHEEL")
    if (scripts / "memkv").is_file():
        impostor = db.parent / "bin"
        impostor.mkdir()
        (impostor / "memkv").write_text("#!/bin/sh\nexit 3\n")
        (impostor / "memkv").chmod(0o755)
        monkeypatch.setenv("PATH", str(impostor))
        assert memkv.find_binary() == str(scripts / "memkv")
    # With none beside the interpreter and none on PATH: a message that says where to put one.
    monkeypatch.setattr(sysconfig, "get_path", lambda name: str(db.parent / "none"))
    monkeypatch.setattr(sys, "executable", str(db.parent / "none" / "python"))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MemkvServeError) as caught:
        with memkv.serve_local(db):
            pass
    assert "MEMKV_BIN" in str(caught.value) and "wheel" in str(caught.value)


def test_a_server_that_dies_at_start_is_reported_with_its_stderr(db: Path, memkv_bin: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(MemkvServeError) as caught:
            with memkv.serve_local(db, binary=memkv_bin, listen=address):
                pass
    error = caught.value
    assert error.type == "server_died"
    assert "memkv serve exited with status" in str(error)
    stderr = str(error).split("\n", 1)[1]
    assert stderr.strip(), "the server's stderr is part of the error"
