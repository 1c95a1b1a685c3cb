"""memkv in this process (`db=`, the native extension): the golden table's sessions byte for byte,
threads writing one store, the event loop while writes wait for the disk, one writing process per
file, read-only opens beside a writer, and the operator's calls."""

from __future__ import annotations

import json
import time
import asyncio
import subprocess
import sys
import threading
from typing import Any
from pathlib import Path

import pytest
from anthropic.tools import ToolError

import memkv
from memkv import Database, MemkvMemoryTool, MemkvSearchTool, AsyncMemkvMemoryTool, MemkvLockedError

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "golden-sessions.jsonl"


def sessions() -> list[list[dict[str, Any]]]:
    return [json.loads(line)["steps"] for line in GOLDEN.read_text("utf-8").split("\n") if line]


def test_the_golden_sessions_answer_byte_for_byte() -> None:
    """Each session of tests/it/golden.rs (recorded through the library: tools/golden-sessions.sh),
    through the extension on a fresh in-memory database: every answer line identical."""
    all_sessions = sessions()
    assert len(all_sessions) >= 10
    for n, steps in enumerate(all_sessions, 1):
        db = Database(memkv.IN_MEMORY)
        for i, step in enumerate(steps):
            body = json.dumps(step["input"], ensure_ascii=False).encode("utf-8")
            answer = db.tool("tester", body)
            assert answer.status == 200, (n, i, answer)
            assert answer.body.decode("utf-8") == step["answer"], f"session {n} step {i}: {step['input']!r}"[:300]


def test_the_golden_sessions_through_the_tool_object() -> None:
    """The same sessions' command inputs through `MemkvMemoryTool(db=...).call`, as the SDK's
    runner calls it: memkv's content, or `ToolError` with it."""
    checked = 0
    for steps in sessions():
        if not all(isinstance(s["input"], dict) and s["input"].get("type") != "tool_use" for s in steps):
            continue
        with MemkvMemoryTool("tester", db=memkv.IN_MEMORY) as tool:
            for step in steps:
                want = json.loads(step["answer"])
                try:
                    got, is_error = tool.call(step["input"]), False
                except ToolError as exc:
                    got, is_error = exc.content, True
                assert (got, is_error) == (want["content"], want["is_error"]), step["input"]
                checked += 1
    assert checked >= 100


def test_memory_and_search_tools_share_one_database(tmp_path: Path) -> None:
    file = tmp_path / "memory.redb"
    memory = MemkvMemoryTool("dana", db=file)
    search = MemkvSearchTool("dana", db=str(file))
    assert memory.call({"command": "create", "path": "/memories/car.md", "file_text": "Drives a Prius.\n"}).startswith("File created")
    assert search.call({"query": "prius"}) == "/memories/car.md (score 0.29)\n/memories/car.md:1: Drives a Prius."
    hits = search.search("prius")
    assert [h["path"] for h in hits["data"]] == ["/car.md"]
    with pytest.raises(ToolError, match="^Error: "):
        search.call({"query": "("  , "mode": "regex"})
    assert repr(memory) == f"MemkvMemoryTool(store='dana', db={str(file)!r})"
    memory.close()
    search.close()
    # Both let go: the file is closed, and the CLI (another process) reads it.
    out = subprocess.run([memkv.find_binary(), "--db", str(file), "cat", "--user", "dana", "/memories/car.md"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "Drives a Prius.\n", out.stderr


def test_eight_threads_writing_one_store_lose_nothing(tmp_path: Path) -> None:
    """8 threads, each creating the same 20 paths and inserting its own lines into one file: every
    path created exactly once (7 threads told it exists), every line kept, every call answered."""
    db = Database(tmp_path / "memory.redb")
    tool = MemkvMemoryTool("team", db=db)
    tool.call({"command": "create", "path": "/memories/log.md", "file_text": ""})
    answers: list[list[tuple[str, bool]]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def work(t: int) -> None:
        start.wait()
        for i in range(20):
            for input in (
                {"command": "create", "path": f"/memories/p{i}.md", "file_text": f"from {t}\n"},
                {"command": "insert", "path": "/memories/log.md", "insert_line": 0, "insert_text": f"t{t} i{i}\n"},
            ):
                try:
                    answers[t].append((tool.call(input), False))
                except ToolError as exc:
                    answers[t].append((exc.content, True))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads)
    assert all(len(a) == 40 for a in answers)
    for i in range(20):
        path = f"/memories/p{i}.md"
        made = [t for t in range(8) if (f"File created successfully at: {path}", False) in answers[t]]
        refused = [t for t in range(8) if (f"Error: File {path} already exists", True) in answers[t]]
        assert len(made) == 1 and sorted(made + refused) == list(range(8)), (path, made, refused)
        assert tool.call({"command": "view", "path": path}).endswith(f"\tfrom {made[0]}")
    inserted = [a for t in range(8) for a in answers[t] if a[0] == "The file /memories/log.md has been edited."]
    assert len(inserted) == 160
    log = db.history("team", "/memories/log.md")
    assert len(log) == 161
    lines = tool.call({"command": "view", "path": "/memories/log.md"}).splitlines()[1:]
    assert sorted(line.split("\t", 1)[1] for line in lines) == sorted(f"t{t} i{i}" for t in range(8) for i in range(20))


def test_the_event_loop_runs_while_writes_wait_for_the_disk(tmp_path: Path) -> None:
    """Durable creates from 16 tasks at once, and a task that only yields: it runs all along (a
    binding that blocked the loop would let it run only between writes, a few times)."""

    async def go() -> tuple[int, int]:
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)

        async with AsyncMemkvMemoryTool("loop", db=tmp_path / "memory.redb") as tool:
            running = asyncio.ensure_future(ticker())
            await asyncio.sleep(0)
            before = ticks

            async def writer(w: int) -> None:
                for i in range(10):
                    await tool.call({"command": "create", "path": f"/memories/w{w}/f{i}.md", "file_text": "x\n"})

            await asyncio.gather(*(writer(w) for w in range(16)))
            done = True
            await running
            files = (await tool.call({"command": "view", "path": "/memories"})).count(".md")
        return ticks - before, files

    ticks, files = asyncio.run(go())
    assert files == 160
    # 160 writes: a loop blocked by each would have ticked about once per write.
    assert ticks > 1000, ticks


HOLDER = """
import sys, memkv
db = memkv.Database(sys.argv[1], shared=sys.argv[2] == "shared")
memkv.MemkvMemoryTool("dana", db=db).call({"command": "create", "path": "/memories/a.md", "file_text": "held\\n"})
print("ready", flush=True)
sys.stdin.readline()
"""


def hold(file: Path, shared: bool) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(file), "shared" if shared else "alone"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n", proc.stderr.read() if proc.stderr else ""
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def test_a_file_another_process_writes_is_refused_at_once_with_the_remedy(tmp_path: Path) -> None:
    file = tmp_path / "memory.redb"
    proc = hold(file, shared=False)
    try:
        started = time.monotonic()
        with pytest.raises(MemkvLockedError) as refused:
            MemkvMemoryTool("dana", db=file)
        assert time.monotonic() - started < 10
        assert refused.value.type == "database_locked"
        assert "the database is open in another process" in refused.value.message
        assert "memkv serve --db" in refused.value.message and "read_only=True" in refused.value.message
        assert isinstance(refused.value, memkv.MemkvError)
    finally:
        release(proc)
    # Once the other process is gone, the file opens.
    with MemkvMemoryTool("dana", db=file) as tool:
        assert tool.call({"command": "view", "path": "/memories/a.md"}).endswith("\theld")


def test_read_only_beside_a_shared_writer(tmp_path: Path) -> None:
    file = tmp_path / "memory.redb"
    proc = hold(file, shared=True)
    try:
        reader = Database(file, read_only=True)
        tool = MemkvMemoryTool("dana", db=reader)
        assert tool.call({"command": "view", "path": "/memories/a.md"}).endswith("\theld")
        with pytest.raises(ToolError) as refused:
            tool.call({"command": "create", "path": "/memories/b.md", "file_text": "x"})
        assert "read-only" in refused.value.content
        reader.close()
    finally:
        release(proc)


def test_operators_calls(tmp_path: Path) -> None:
    db = Database(tmp_path / "memory.redb")
    tool = MemkvMemoryTool("dana", db=db)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "one\n"})
    tool.call({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"})
    assert [s["id"] for s in db.stores()] == ["dana"]
    assert [v["operation"] for v in db.history("dana", "/memories/a.md")] == ["created", "modified"]
    counts = db.export(tmp_path / "dana.jsonl")
    assert counts["files"] == 1 and counts["stores"] == 1
    other = Database(memkv.IN_MEMORY)
    assert other.import_file(tmp_path / "dana.jsonl")["files"] == 1
    assert MemkvMemoryTool("dana", db=other).call({"command": "view", "path": "/memories/a.md"}).endswith("\ttwo")
    with pytest.raises(memkv.MemkvError) as refused:
        other.import_file(tmp_path / "dana.jsonl")
    assert refused.value.status == 400
    with pytest.raises(memkv.MemkvError, match="conflict must be"):
        other.import_file(tmp_path / "dana.jsonl", conflict="merge")
    assert db.expire(dry_run=True) == []
    assert tool.clear_all_memory() == "All memory cleared"
    assert db.stores() == [] and db.delete_store("dana") is False
    with pytest.raises(ValueError):
        MemkvMemoryTool("dana", db=db, base_url="http://127.0.0.1:1")
    with pytest.raises(memkv.MemkvError, match="invalid user id"):
        MemkvMemoryTool(" dana", db=db).call({"command": "view", "path": "/memories"})
    db.close()
    with pytest.raises(memkv.MemkvError, match="closed"):
        tool.call({"command": "view", "path": "/memories"})


def test_a_fork_does_not_write_through_its_parents_handle(tmp_path: Path) -> None:
    """A child of `fork` inherits the parent's open database: using it, or opening the file
    again, is refused (its writes would be lost under the parent's), never silently allowed."""
    import os

    file = tmp_path / "memory.redb"
    db = Database(file)
    tool = MemkvMemoryTool("dana", db=db)
    tool.call({"command": "create", "path": "/memories/parent.md", "file_text": "p\n"})
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it got, and leave without running the parent's cleanup
        outcome = []
        try:
            tool.call({"command": "create", "path": "/memories/child.md", "file_text": "c\n"})
            outcome.append("inherited handle: written")
        except memkv.MemkvError as exc:
            outcome.append(f"inherited handle: {exc.type}")
        try:
            Database(file)
            outcome.append("open: allowed")
        except memkv.MemkvError as exc:
            outcome.append(f"open: {exc.type}")
        os.write(write, "; ".join(outcome).encode())
        os._exit(0)
    os.close(write)
    said = os.read(read, 4096).decode()
    os.waitpid(pid, 0)
    os.close(read)
    assert said == "inherited handle: invalid_request_error; open: database_locked", said
    assert tool.call({"command": "view", "path": "/memories"}).count(".md") == 1


def test_read_only_beside_this_processs_own_writer_and_threads_closing_and_opening(tmp_path: Path) -> None:
    file = tmp_path / "memory.redb"
    writer = MemkvMemoryTool("dana", db=file)
    writer.call({"command": "create", "path": "/memories/a.md", "file_text": "mine\n"})
    reader = MemkvMemoryTool("dana", db=Database(file, read_only=True))
    assert reader.call({"command": "view", "path": "/memories/a.md"}).endswith("\tmine")
    with pytest.raises(ToolError, match="read-only"):
        reader.call({"command": "create", "path": "/memories/b.md", "file_text": "x"})
    reader.close()
    writer.close()
    # Two threads opening, using and closing the same file: never told it is locked while the
    # other's handle is being dropped.
    failures: list[str] = []

    def churn() -> None:
        for _ in range(50):
            try:
                with MemkvMemoryTool("dana", db=file) as tool:
                    tool.call({"command": "view", "path": "/memories/a.md"})
            except memkv.MemkvError as exc:
                failures.append(str(exc))

    threads = [threading.Thread(target=churn) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert failures == []
