#!/usr/bin/env python3
"""Per-command latency, one caller, of the Python SDK's memory tool objects in one run:
`BetaLocalFilesystemMemoryTool` (files in a temporary directory) against `MemkvMemoryTool` (a
`memkv serve` on loopback, started here with `memkv.serve_local` on a fresh database). Both are
timed through `tool.call(input)`, the call the SDK's tool runner makes for every tool_use block,
in alternating blocks of calls so that both see the same machine.

    python tools/sdk_tool_bench.py [--reps 300] [--json]

Needs the `memkv` package and anthropic 2.14.0 (tools/test-python.sh's venv has both) and the
`memkv` binary (MEMKV_BIN or PATH). Bounded: reps per command (default 300), loopback only.
"""

from __future__ import annotations

import os
import sys
import json
import time
import argparse
import platform
import tempfile
import statistics
from typing import Any, Callable
from pathlib import Path

import anthropic
from anthropic.tools import ToolError, BetaLocalFilesystemMemoryTool

import memkv

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
    timed = {
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
"""Calls timed on one tool before switching to the other: the two are interleaved, so a change
of the shared machine's load hits both alike."""


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
    out: dict[str, dict[str, dict[str, float]]] = {name: {} for name in calls}
    for command, inputs in timed.items():
        samples: dict[str, list[float]] = {name: [] for name in calls}
        for at in range(0, len(inputs), BLOCK):
            for name, call in calls.items():
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


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", load average {:.1f}".format(os.getloadavg()[0]) if hasattr(os, "getloadavg") else ""
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}{load}"


def main() -> int:
    parser = argparse.ArgumentParser(description="SDK memory tool latency: local filesystem vs memkv serve")
    parser.add_argument("--reps", type=int, default=300, help="timed calls per command (1..5000)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    args = parser.parse_args()
    reps = max(1, min(args.reps, 5000))

    with tempfile.TemporaryDirectory(prefix="sdk-tool-bench-") as tmp:
        local = BetaLocalFilesystemMemoryTool(base_path=os.path.join(tmp, "fs"))
        with memkv.serve_local(Path(tmp) / "memkv.redb") as server, server.tool("bench") as tool:
            results = run({"local_filesystem": local.call, "memkv": tool.call}, reps)
    fs, mk = results["local_filesystem"], results["memkv"]

    if args.json:
        print(json.dumps({"machine": machine(), "reps": reps, "local_filesystem": fs, "memkv": mk}, indent=2))
        return 0
    print(f"machine: {machine()}; anthropic {anthropic.__version__}; {reps} calls per command, one caller")
    print()
    print("| command | local filesystem, median | memkv serve, median | local filesystem, p99 | memkv serve, p99 |")
    print("|---|---:|---:|---:|---:|")
    for name in fs:
        a, b = fs[name], mk[name]
        print(
            f"| {name} | {a['median_us']:.0f} µs | {b['median_us']:.0f} µs | {a['p99_us']:.0f} µs | {b['p99_us']:.0f} µs |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
