#!/usr/bin/env python3
"""Shows `memkv exec` output (JSON Lines on stdin) as a person reads it.

    memkv --db demo.redb exec --user dana < examples/session.jsonl | python3 tools/pretty.py
"""
import json
import sys

for number, line in enumerate(sys.stdin, 1):
    answer = json.loads(line)
    label = answer.get("tool_use_id", f"line {number}")
    status = "ERROR" if answer["is_error"] else "ok"
    print(f"--- {label} [{status}]")
    print(answer["content"])
