"""Schemathesis checks of memkv's own: a rejected request changes no store.

Loaded by tools/test-schemathesis.sh (SCHEMATHESIS_HOOKS=memkv_hooks). The run is sequential
(--workers 1), so what /metrics shows after one response is what held before the next request.
"""

import os
import urllib.request

import schemathesis

URL = os.environ["MEMKV_URL"]
KEY = os.environ["MEMKV_KEY"]
WATCHED = ("memkv_committed_commands_total", "memkv_files", "memkv_bytes", "memkv_stores")
_last = {}


def _state():
    request = urllib.request.Request(URL + "/metrics", headers={"x-api-key": KEY})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in WATCHED:
            values[name] = value
    return values


@schemathesis.check
def rejected_requests_change_nothing(ctx, response, case):
    now = _state()
    before = dict(_last)
    _last.clear()
    _last.update(now)
    if before and response.status_code >= 400 and now != before:
        raise AssertionError(
            f"a {response.status_code} answer changed the stores: {before} -> {now}"
        )


# The change feed's long poll waits up to 60 s for an entry (tested on its own, with real
# commits, in crates/memkv-server/tests/changes.rs); here a wait is cut to a fifth of a second,
# so that one generated case costs no more than the run's request timeout and time budget.
LONGEST_WAIT = 0.2


@schemathesis.hook
def map_query(ctx, query):
    wait = query.get("wait") if query else None
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > LONGEST_WAIT:
        query["wait"] = LONGEST_WAIT
    return query


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    # The coverage phase builds its cases without `map_query`: cap their waits here too.
    query = case.query
    wait = query.get("wait") if query else None
    if isinstance(wait, str):
        try:
            wait = float(wait)
        except ValueError:
            return
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > LONGEST_WAIT:
        query["wait"] = LONGEST_WAIT


# POST /v1/import takes an export, JSON Lines: generated bodies are sent as text.
schemathesis.serializer.alias("application/x-ndjson", "text/plain")
