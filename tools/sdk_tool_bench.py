#!/usr/bin/env python3
"""Per-command latency, one caller, of the Python SDK's memory tool objects in one run, three
side by side: `BetaLocalFilesystemMemoryTool` (files in a temporary directory), `MemkvMemoryTool`
over HTTP (a `memkv serve` on loopback, started here with `memkv.serve_local` on a fresh
database) and `MemkvMemoryTool(db=...)` in this process (the native extension, on a fresh redb
file in the same temporary directory). All are timed through `tool.call(input)`, the call the
SDK's tool runner makes for every tool_use block, in interleaved blocks of calls so that all
three see the same machine.

Then durable `create` throughput, 8 Python threads at once against 1, each thread creating
files of its own: in-process (one `memkv.Database`, and one `MemkvMemoryTool` shared by the
threads of a round; the extension releases the GIL and memkv's group commit shares flushes between them),
and the SDK's local filesystem tool for comparison. Rounds of a few seconds (or 9,000 files: a
memkv store holds 10,000), each on a fresh store or directory, interleaved; each figure is the
median of the rounds, each ratio the median of the rounds' ratios.

    python tools/sdk_tool_bench.py [--reps 300] [--threads 8] [--thread-seconds 2] [--rounds 3] [--json]

Needs the `memkv` package with its native extension (the wheel: tools/build-wheel.sh) and
anthropic 2.14.0 (python/requirements-test.txt), and the `memkv` binary (MEMKV_BIN or PATH).
Bounded: reps per command (default 300, at most 3,000), loopback only, 2 s per throughput round
(at most 30) and 3 rounds (at most 10).
"""

from __future__ import annotations

import os
import sys
import json
import time
import argparse
import platform
import tempfile
import threading
import statistics
from typing import Any, Callable
from pathlib import Path

import anthropic
from anthropic.tools import ToolError, BetaLocalFilesystemMemoryTool

import memkv
from memkv import _wire

Call = Callable[[object], object]


def text(n: int) -> str:
    """n bytes of lines of about 60 characters."""
    out, i, size = [], 0, 0
    while size < n:
        line = f"- line {i:05}: the quick brown fox jumps over the lazy dog\n"
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out)[: n - 1] + "\n"


def workload(reps: int) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The setup calls, and per command the calls to time (each run once, in order)."""
    setup: list[dict[str, Any]] = [
        {"command": "create", "path": "/memories/notes.md", "file_text": "MARKER-A\n" + text(4096)},
        {"command": "create", "path": "/memories/log.md", "file_text": "# log\n"},
    ]
    setup += [{"command": "create", "path": f"/memories/dir/f{i:03}.md", "file_text": f"file {i}\n"} for i in range(50)]
    for i in range(reps):
        setup.append({"command": "create", "path": f"/memories/ren/f{i:04}.md", "file_text": "x\n"})
        setup.append({"command": "create", "path": f"/memories/del/f{i:04}.md", "file_text": "x\n"})
    kib = text(1024)
    swaps = [("MARKER-A", "MARKER-B"), ("MARKER-B", "MARKER-A")]
    timed: dict[str, list[dict[str, Any]]] = {
        "view directory (50 files)": [{"command": "view", "path": "/memories/dir"}] * reps,
        "view file (4 KiB)": [{"command": "view", "path": "/memories/notes.md"}] * reps,
        "create (1 KiB)": [
            {"command": "create", "path": f"/memories/new/f{i:04}.md", "file_text": kib} for i in range(reps)
        ],
        "str_replace (4 KiB file)": [
            {"command": "str_replace", "path": "/memories/notes.md", "old_str": a, "new_str": b}
            for a, b in (swaps[i % 2] for i in range(reps))
        ],
        "insert": [
            {"command": "insert", "path": "/memories/log.md", "insert_line": 1, "insert_text": f"entry {i}\n"}
            for i in range(reps)
        ],
        "rename": [
            {"command": "rename", "old_path": f"/memories/ren/f{i:04}.md", "new_path": f"/memories/moved/f{i:04}.md"}
            for i in range(reps)
        ],
        "delete": [{"command": "delete", "path": f"/memories/del/f{i:04}.md"} for i in range(reps)],
        "error: missing file": [{"command": "view", "path": "/memories/missing.md"}] * reps,
    }
    return setup, timed


BLOCK = 10
"""Calls timed on one tool before switching to the next: the tools are interleaved (and the
one that goes first rotates from block to block), so a change of the shared machine's load
hits all of them alike."""

TOOLS = {
    "local_filesystem": "local filesystem",
    "memkv_serve": "memkv serve (HTTP)",
    "memkv_in_process": "memkv in-process",
}


def stats(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {
        "median_us": statistics.median(samples),
        "p99_us": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
        "mean_us": statistics.fmean(samples),
    }


def run(calls: dict[str, Call], reps: int) -> dict[str, dict[str, dict[str, float]]]:
    """Per tool, per command: median, p99 and mean microseconds per call."""
    setup, timed = workload(reps)
    for call in calls.values():
        for input in setup:
            call(input)
        for _ in range(20):  # warm up connections and caches
            call({"command": "view", "path": "/memories/notes.md"})
    names = list(calls)
    out: dict[str, dict[str, dict[str, float]]] = {name: {} for name in calls}
    for command, inputs in timed.items():
        samples: dict[str, list[float]] = {name: [] for name in calls}
        for block, at in enumerate(range(0, len(inputs), BLOCK)):
            first = block % len(names)
            for name in names[first:] + names[:first]:
                call = calls[name]
                for input in inputs[at : at + BLOCK]:
                    start = time.perf_counter_ns()
                    try:
                        call(input)
                    except ToolError:
                        pass
                    samples[name].append((time.perf_counter_ns() - start) / 1000)
        for name in calls:
            out[name][command] = stats(samples[name])
    return out


def view_breakdown(db: memkv.Database, tool: Any, reps: int) -> dict[str, float]:
    """Where an in-process `view` of the 4 KiB file goes: medians (µs) of the whole
    `tool.call`, of the native call alone (the GIL released, memkv's work, the content back as
    a Python string), and of encoding the input, in interleaved blocks."""
    input = {"command": "view", "path": "/memories/notes.md"}
    body = _wire.encode(input)
    native = db._native  # the extension's object: the call below is what `tool.call` makes
    parts: dict[str, Callable[[], object]] = {
        "tool_call_us": lambda: tool.call(input),
        "native_call_us": lambda: native.call(tool.store, body),
        "encode_input_us": lambda: _wire.encode(input),
    }
    samples: dict[str, list[float]] = {name: [] for name in parts}
    for _ in range(0, reps, BLOCK):
        for name, part in parts.items():
            for _ in range(BLOCK):
                start = time.perf_counter_ns()
                part()
                samples[name].append((time.perf_counter_ns() - start) / 1000)
    return {name: statistics.median(s) for name, s in samples.items()}


MAX_FILES = 9_000
"""Files a throughput round creates at most, in a store of its own: memkv refuses a store's
10,001st file (its default limit), and a round stops early when its threads reach this many."""


def creates_per_second(call: Call, threads: int, seconds: float, file_text: str) -> tuple[float, int]:
    """Durable 1 KiB creates per second by `threads` threads calling `call` at once for about
    `seconds` (or until they made MAX_FILES), each thread creating files of its own. Every
    create is counted, those still running at the stop included, over the time until the last
    thread is done. Returns the rate and the number of files."""
    stop = threading.Event()  # set at the time, or when the last thread is done
    ready = threading.Barrier(threads + 1)
    counts = [0] * threads
    each = MAX_FILES // threads
    errors: list[BaseException] = []
    running = [threads]
    lock = threading.Lock()

    def worker(t: int) -> None:
        n = 0
        ready.wait()
        try:
            while n < each and not stop.is_set():
                call({"command": "create", "path": f"/memories/t{t}/f{n:05}.md", "file_text": file_text})
                n += 1
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
            errors.append(exc)
        counts[t] = n
        with lock:
            running[0] -= 1
            if running[0] == 0:
                stop.set()

    workers = [threading.Thread(target=worker, args=(t,), name=f"bench-create-{t}") for t in range(threads)]
    for w in workers:
        w.start()
    ready.wait()
    start = time.perf_counter()
    stop.wait(seconds)
    stop.set()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return sum(counts) / elapsed, sum(counts)


def thread_rounds(
    tools: dict[str, Callable[[str], Call]], threads: int, seconds: float, rounds: int
) -> dict[str, Any]:
    """Per tool: creates/s with 1 thread and with `threads`, per round and their medians, and
    the ratio (the median of the rounds' ratios); and in-process ÷ local filesystem at both.
    `tools[name](area)` is the tool's call on a fresh store (or directory) named `area`: one
    per round and thread count."""
    kib = text(1024)
    for name, tool in tools.items():  # warm up: the database, the journal, the directories
        creates_per_second(tool("warm-1"), 1, 0.2, kib)
        creates_per_second(tool(f"warm-{threads}"), threads, 0.2, kib)
    rates: dict[str, dict[str, list[float]]] = {name: {"1": [], str(threads): []} for name in tools}
    files: dict[str, dict[str, list[int]]] = {name: {"1": [], str(threads): []} for name in tools}
    names = list(tools)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for n in (1, threads):
            for name in order:
                rate, made = creates_per_second(tools[name](f"round{r}-{n}t"), n, seconds, kib)
                rates[name][str(n)].append(rate)
                files[name][str(n)].append(made)
    out: dict[str, Any] = {"threads": threads, "seconds": seconds, "rounds": rounds, "max_files": MAX_FILES}
    for name in tools:
        one, many = rates[name]["1"], rates[name][str(threads)]
        out[name] = {
            "rounds_1": one,
            f"rounds_{threads}": many,
            "files_1": files[name]["1"],
            f"files_{threads}": files[name][str(threads)],
            "median_1": statistics.median(one),
            f"median_{threads}": statistics.median(many),
            "ratio": statistics.median(m / o for o, m in zip(one, many)),
        }
    a, b = "memkv_in_process", "local_filesystem"
    if a in rates and b in rates:
        for key in ("1", str(threads)):
            out[f"in_process_vs_local_filesystem_{key}"] = statistics.median(
                x / y for x, y in zip(rates[a][key], rates[b][key])
            )
    return out


def duration(us: float) -> str:
    if us < 10:
        return f"{us:.1f} µs"
    if us < 1000:
        return f"{us:.0f} µs"
    return f"{us / 1000:.2f} ms"


def targets(latency: dict[str, dict[str, dict[str, float]]], threads: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The issue's targets: (target, figure, ratio, met)."""
    fs, http, inp = (latency[k] for k in ("local_filesystem", "memkv_serve", "memkv_in_process"))
    out: list[dict[str, Any]] = []

    def add(target: str, figure: str, ratio: float, goal: float) -> None:
        out.append({"target": target, "figure": figure, "ratio": ratio, "goal": goal, "met": ratio >= goal})

    v = "view file (4 KiB)"
    add(
        "in-process `view` (4 KiB file) ≥ 5× faster than local filesystem (medians)",
        f"{duration(inp[v]['median_us'])} vs {duration(fs[v]['median_us'])}",
        fs[v]["median_us"] / inp[v]["median_us"],
        5.0,
    )
    add(
        "in-process `view` (4 KiB file) ≥ 20× faster than HTTP (medians)",
        f"{duration(inp[v]['median_us'])} vs {duration(http[v]['median_us'])}",
        http[v]["median_us"] / inp[v]["median_us"],
        20.0,
    )
    c = "create (1 KiB)"
    add(
        "durable `create`, one caller: in-process no slower than local filesystem (medians)",
        f"{duration(inp[c]['median_us'])} vs {duration(fs[c]['median_us'])}",
        fs[c]["median_us"] / inp[c]["median_us"],
        1.0,
    )
    if threads is not None:
        n = threads["threads"]
        t = threads["memkv_in_process"]
        add(
            f"durable `create` in-process, {n} threads ≥ 4× 1 thread (creates/s)",
            f"{t[f'median_{n}']:.0f} vs {t['median_1']:.0f}",
            t["ratio"],
            4.0,
        )
        f = threads["local_filesystem"]
        for k, label in (("1", "1 thread"), (str(n), f"{n} threads")):
            add(
                f"durable `create`, {label}: in-process no slower than local filesystem (creates/s)",
                f"{t[f'median_{k}']:.0f} vs {f[f'median_{k}']:.0f}",
                threads[f"in_process_vs_local_filesystem_{k}"],
                1.0,
            )
    return out


def cpu() -> str:
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return name


def load() -> str:
    return "{:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def machine() -> str:
    return f"{cpu()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description="SDK memory tools: local filesystem vs memkv serve vs memkv in-process; threaded durable creates"
    )
    parser.add_argument("--reps", type=int, default=300, help="timed calls per command (1..3000: a store holds 10,000 files)")
    parser.add_argument("--threads", type=int, default=8, help="threads of the throughput measurement (2..64)")
    parser.add_argument(
        "--thread-seconds", type=float, default=2.0, help="seconds per throughput round (0 leaves it out; at most 30)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (1..10)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown tables")
    args = parser.parse_args()
    reps = max(1, min(args.reps, 3000))
    n_threads = max(2, min(args.threads, 64))
    seconds = max(0.0, min(args.thread_seconds, 30.0))
    rounds = max(1, min(args.rounds, 10))

    load_start = load()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    threads: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="sdk-tool-bench-") as tmp:
        local = BetaLocalFilesystemMemoryTool(base_path=os.path.join(tmp, "fs"))
        with (
            memkv.serve_local(Path(tmp) / "serve.redb") as server,
            server.tool("bench") as http,
            memkv.Database(Path(tmp) / "in-process.redb") as db,
            memkv.MemkvMemoryTool("bench", db=db) as inproc,
        ):
            latency = run({"local_filesystem": local.call, "memkv_serve": http.call, "memkv_in_process": inproc.call}, reps)
            breakdown = view_breakdown(db, inproc, reps)
        load_mid = load()
        if seconds > 0:
            with memkv.Database(Path(tmp) / "threads.redb") as tdb:
                # One Database shared by every thread; a tool object (shared by the threads of
                # a round) per store, a store per round.
                threads = thread_rounds(
                    {
                        "memkv_in_process": lambda area: memkv.MemkvMemoryTool(area, db=tdb).call,
                        "local_filesystem": lambda area: BetaLocalFilesystemMemoryTool(
                            base_path=os.path.join(tmp, "fs-threads", area)
                        ).call,
                    },
                    n_threads,
                    seconds,
                    rounds,
                )
    load_end = load()
    goals = targets(latency, threads)

    if args.json:
        print(
            json.dumps(
                {
                    "started": started,
                    "machine": machine(),
                    "load_average": {"start": load_start, "after_latency": load_mid, "end": load_end},
                    "anthropic": anthropic.__version__,
                    "memkv": memkv.__version__,
                    "reps": reps,
                    "latency": latency,
                    "view_breakdown_in_process": breakdown,
                    "create_threads": threads,
                    "targets": goals,
                },
                indent=2,
            )
        )
        return 0
    print(f"{started}; {machine()}; anthropic {anthropic.__version__}; memkv {memkv.__version__}")
    print(f"load average (1, 5, 15 min): {load_start} at the start, {load_mid} after the latencies, {load_end} at the end")
    print()
    print(f"Per command, one caller, {reps} calls each, median (p99):")
    print()
    print(
        "| command | local filesystem | memkv serve (HTTP) | memkv in-process "
        "| local filesystem ÷ in-process | HTTP ÷ in-process |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    fs, http_, inp = (latency[k] for k in TOOLS)
    for name in fs:
        cells = [f"{duration(t[name]['median_us'])} ({duration(t[name]['p99_us'])})" for t in (fs, http_, inp)]
        r_fs = fs[name]["median_us"] / inp[name]["median_us"]
        r_http = http_[name]["median_us"] / inp[name]["median_us"]
        print(f"| {name} | {' | '.join(cells)} | {r_fs:.1f}× | {r_http:.1f}× |")
    print()
    b = breakdown
    print(
        f"In-process `view` (4 KiB file), medians: tool.call {duration(b['tool_call_us'])}, of which the native call "
        f"{duration(b['native_call_us'])} and encoding the input {duration(b['encode_input_us'])}."
    )
    if threads is not None:
        n = threads["threads"]
        print()
        print(
            f"Durable `create` (1 KiB), creates/s, {threads['rounds']} rounds of {threads['seconds']:g} s or "
            f"{threads['max_files']} files, a fresh store each (median; rounds in brackets):"
        )
        print()
        print(f"| tool | 1 thread | {n} threads | {n} ÷ 1 |")
        print("|---|---:|---:|---:|")
        for key in ("memkv_in_process", "local_filesystem"):
            t = threads[key]
            one = ", ".join(f"{x:.0f}" for x in t["rounds_1"])
            many = ", ".join(f"{x:.0f}" for x in t[f"rounds_{n}"])
            print(
                f"| {TOOLS[key]} | {t['median_1']:.0f} ({one}) | {t[f'median_{n}']:.0f} ({many}) | {t['ratio']:.2f}× |"
            )
    print()
    print("| target | figure | ratio | met |")
    print("|---|---|---:|---|")
    for g in goals:
        print(f"| {g['target']} | {g['figure']} | {g['ratio']:.2f}× | {'yes' if g['met'] else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
