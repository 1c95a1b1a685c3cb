#!/usr/bin/env python3
"""Times the Python SDK's reference memory handler (BetaLocalFilesystemMemoryTool) on the same
workload that benches/compare.rs runs against memkv, and prints the mean seconds per command as
JSON. Run by benches/compare.rs with the interpreter of a virtualenv that has `anthropic`:

    python sdk_bench.py WORKDIR REPS
"""
import json
import sys
import time

from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool


def text(n):
    """The same filler as benches/common/mod.rs: lines of about 60 characters, n bytes."""
    out, i = [], 0
    size = 0
    while size < n:
        line = f"- line {i:05}: the quick brown fox jumps over the lazy dog\n"
        out.append(line)
        size += len(line)
        i += 1
    s = "".join(out)[: n - 1]
    return s + "\n"


def main():
    workdir, reps = sys.argv[1], int(sys.argv[2])
    tool = BetaLocalFilesystemMemoryTool(base_path=workdir)
    call = tool.call

    def timed(inputs):
        start = time.perf_counter()
        for i in inputs:
            call(i)
        return (time.perf_counter() - start) / len(inputs)

    call({"command": "create", "path": "/memories/notes.md", "file_text": "MARKER-A\n" + text(4096)})
    for i in range(2000):
        call({"command": "create", "path": f"/memories/big/f{i:04}.md", "file_text": f"file {i}\n"})
    for i in range(reps):
        call({"command": "create", "path": f"/memories/del/f{i}.md", "file_text": "x\n"})
        call({"command": "create", "path": f"/memories/ren/f{i}.md", "file_text": "x\n"})
    kib = text(1024)
    results = {
        "view_file_4KiB": timed([{"command": "view", "path": "/memories/notes.md"}] * reps),
        "view_dir_2000_files": timed([{"command": "view", "path": "/memories/big"}] * max(5, reps // 20)),
        "create_1KiB": timed([{"command": "create", "path": f"/memories/new/f{i}.md", "file_text": kib} for i in range(reps)]),
        "str_replace_4KiB": timed([
            {"command": "str_replace", "path": "/memories/notes.md", "old_str": a, "new_str": b}
            for i in range(reps)
            for (a, b) in [("MARKER-A", "MARKER-B") if i % 2 == 0 else ("MARKER-B", "MARKER-A")]
        ]),
        "insert_4KiB": timed([{"command": "insert", "path": "/memories/notes.md", "insert_line": 10, "insert_text": "- a new fact\n"}] * reps),
        "delete_file": timed([{"command": "delete", "path": f"/memories/del/f{i}.md"} for i in range(reps)]),
        "rename_file": timed([{"command": "rename", "old_path": f"/memories/ren/f{i}.md", "new_path": f"/memories/ren/g{i}.md"} for i in range(reps)]),
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
