"""The wheel that `pip install ./python` builds (maturin: the Python package and its native
extension, which carries memkv in-process and the whole `memkv` command line), installed into a
fresh virtualenv on a PATH with no cargo: the in-process tool works, `memkv` is on its PATH, and
`memkv.serve_local()` serves the memory tool with it. tools/test-python.sh builds the wheel and
names it in MEMKV_WHEEL."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

WHEEL = os.environ.get("MEMKV_WHEEL")
TIMEOUT = 120

pytestmark = pytest.mark.skipif(not WHEEL, reason="MEMKV_WHEEL names no wheel (tools/test-python.sh builds one)")

SCRIPT = """
import shutil, sys
import memkv
print(shutil.which("memkv"))
with memkv.serve_local(sys.argv[1]) as server:
    with memkv.MemkvMemoryTool("dana", base_url=server.base_url, api_key=server.api_key) as tool:
        print(tool.call({"command": "create", "path": "/memories/a.md", "file_text": "Prefers tabs.\\n"}))
        print(tool.call({"command": "view", "path": "/memories"}))
print("stopped with", server.returncode)
with memkv.MemkvMemoryTool("dana", db=sys.argv[1]) as tool:
    print(tool.call({"command": "view", "path": "/memories/a.md"}).splitlines()[-1])
"""


def run(args, env, cwd):
    out = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_the_wheel_carries_the_extension_the_command_and_the_package():
    wheel = zipfile.ZipFile(WHEEL)
    names = wheel.namelist()
    assert "memkv/_native.abi3.so" in names
    assert {"memkv/__init__.py", "memkv/_serve.py", "memkv/_tool.py", "memkv/_native.pyi", "memkv/py.typed"} <= set(names)
    entry_points = wheel.read("memkv-0.1.0.dist-info/entry_points.txt").decode()
    assert "memkv=memkv._cli:main" in entry_points.replace(" ", "")


def test_installed_where_there_is_no_rust_it_serves(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=TIMEOUT)
    # Only the virtualenv and the system's own directories: no cargo, no rustc, no MEMKV_BIN.
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)), "LANG": "C.UTF-8"}
    for tool in ["cargo", "rustc"]:
        assert shutil.which(tool, path=env["PATH"]) is None, f"{tool} is on the test's PATH"
    # The dependencies come from the package index, as for any user.
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", WHEEL], env, tmp_path)
    version = run(["memkv", "--version"], env, tmp_path)
    assert version.startswith("memkv "), version
    out = run([str(venv / "bin" / "python"), "-c", SCRIPT, str(tmp_path / "memkv.redb")], env, tmp_path).splitlines()
    assert out[0] == str(venv / "bin" / "memkv")
    assert out[1] == "File created successfully at: /memories/a.md"
    assert "/memories/a.md" in "\n".join(out[2:-2])
    assert out[-2] == "stopped with 0"
    # The same file, in this process now (the server is gone, so the file is free).
    assert out[-1] == "     1\tPrefers tabs."
    assert (tmp_path / "memkv.redb").exists()
