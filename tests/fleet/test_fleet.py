"""A fleet, for real: three `memkv serve` on one PostgreSQL database behind HAProxy (the
configuration of haproxy.cfg.template), all on 127.0.0.1.

- keys added or revoked through one server work, or stop working, on every server within a second
  (told by PostgreSQL's notifications: milliseconds; the bound leaves room for a busy machine);
- a store's settings changed through one server apply on every server within a second (likewise);
- under load from the memkv Python package through the balancer, a server killed with SIGKILL
  loses no acknowledged write, the clients carry on through the others within a moment, and the
  database stays consistent (`memkv check`); the only errors are those of the requests the kill
  caught (see is_dropped and is_replay);
- a rolling restart (SIGTERM, exit, start, ready) of every server costs them nothing at all;
- GET /v1/export through the balancer, during the load, is a backup that imports into an empty
  database and checks clean;
- a browser's web console session, kept by the server that made it, sticks to that server
  through the balancer (HAProxy's cookie), while the API's requests still go round.

Each test records what it measured in the session's figures (conftest.py prints them).
"""

import time

import httpx2
import pytest

from fleetlib import Load, files_of, percentile, run_memkv, wait_until

# Every change must reach every server within this many seconds (docs/server.md's promise).
PROPAGATION = 1.0
# How long a propagation is watched for before the test gives up (to measure it even when late).
WATCH = 5.0
STORE = "alice"
TOOL = f"/v1/memory_stores/{STORE}/tool"
QUOTA = "Error: Memory quota exceeded: at most {} files"


def watch_all(servers, answer, want):
    """Asks every server, directly, `answer(server)` (an HTTP status or a JSON body; it fails
    itself on an answer not allowed) in turn until each has given `want`. For each server: how
    long after the call the first request that got `want` was sent (a request sent that long
    after the change saw it; the one before did not), and how many requests it took."""
    start = time.monotonic()
    took: dict[str, float] = {}
    asked: dict[str, int] = {s.name: 0 for s in servers}
    for _ in range(100_000):
        for s in servers:
            if s.name in took:
                continue
            sent = time.monotonic()
            asked[s.name] += 1
            if answer(s) == want:
                took[s.name] = sent - start
        if len(took) == len(servers) or time.monotonic() - start > WATCH:
            break
        time.sleep(0.005)
    missing = [s.name for s in servers if s.name not in took]
    assert not missing, f"not within {WATCH} s on {missing} (the others: {took})"
    return took, asked


def tool_status(key):
    """A server's HTTP status for a `view` on the tool route of STORE with `key`; only 200 and
    401 are expected."""

    def answer(server):
        r = server.http.post(TOOL, json={"command": "view", "path": "/memories"}, headers={"x-api-key": key})
        assert r.status_code in (200, 401), f"{server.name}: {r.status_code} {r.text}"
        return r.status_code

    return answer


def test_keys_added_or_revoked_through_one_server_work_or_stop_on_all_within_a_second(fleet, figures):
    added, revoked = [], []
    admin = fleet.admin_headers()
    for round_ in range(len(fleet.servers)):
        origin = fleet.servers[round_]
        revoker = fleet.servers[(round_ + 1) % len(fleet.servers)]
        r = origin.http.post("/v1/keys", json={"store": STORE, "label": f"fleet round {round_}"}, headers=admin)
        assert r.status_code == 200, r.text
        key, key_id = r.json()["key"], r.json()["id"]
        assert key.startswith("mkv_") and key_id.startswith("key_"), r.text
        took, asked = watch_all(fleet.servers, tool_status(key), 200)
        # The server that made the change knows it at once: its first answer takes the key.
        assert asked[origin.name] == 1, f"{origin.name} made the key and refused it {asked[origin.name] - 1} times"
        added.append(took)

        r = revoker.http.delete(f"/v1/keys/{key_id}", headers=admin)
        assert r.status_code == 200, r.text
        assert r.json() == {"id": key_id, "type": "api_key_deleted"}
        took, asked = watch_all(fleet.servers, tool_status(key), 401)
        assert asked[revoker.name] == 1, f"{revoker.name} revoked the key and took it {asked[revoker.name] - 1} times"
        revoked.append(took)

    figures["key_propagation_s"] = {
        "added_max": round(max(max(t.values()) for t in added), 3),
        "revoked_max": round(max(max(t.values()) for t in revoked), 3),
        "added": [{k: round(v, 3) for k, v in t.items()} for t in added],
        "revoked": [{k: round(v, 3) for k, v in t.items()} for t in revoked],
    }
    slow = [(i, t) for i, t in enumerate(added + revoked) if max(t.values()) > PROPAGATION]
    assert not slow, f"a key change took more than {PROPAGATION} s to reach every server: {figures['key_propagation_s']}"


def test_settings_changed_through_one_server_apply_on_all_within_a_second(fleet, figures):
    admin = fleet.admin_headers()
    first, others = fleet.servers[0], fleet.servers[1:]
    base = 3
    for i in range(base):
        r = first.http.post(TOOL, json={"command": "create", "path": f"/memories/quota/base-{i}.md", "file_text": "x\n"}, headers=admin)
        assert r.json() == {"content": f"File created successfully at: /memories/quota/base-{i}.md", "is_error": False}
    probes = iter(range(100_000))

    def create(server):
        """A create of a new file through `server`: memkv's answer."""
        path = f"/memories/quota/{server.name}-{next(probes)}.md"
        r = server.http.post(TOOL, json={"command": "create", "path": path, "file_text": "y\n"}, headers=admin)
        assert r.status_code == 200, f"{server.name}: {r.status_code} {r.text}"
        body = r.json()
        allowed = [{"content": f"File created successfully at: {path}", "is_error": False}, {"content": QUOTA.format(base), "is_error": True}]
        assert body in allowed, f"{server.name}: {body}"
        return body

    try:
        r = first.http.patch(f"/v1/memory_stores/{STORE}/settings", json={"max_files": base}, headers=admin)
        assert r.status_code == 200, r.text
        assert r.json()["own"] == {"max_files": base} and r.json()["effective"]["max_files"] == base, r.text
        # Through the others (files created there before the change reaches them only make the
        # store fuller; the quota refuses every create from then on).
        applied, _ = watch_all(others, create, {"content": QUOTA.format(base), "is_error": True})
    finally:
        r = others[0].http.patch(f"/v1/memory_stores/{STORE}/settings", json={"max_files": None}, headers=admin)
        assert r.status_code == 200, r.text
    assert r.json()["own"] == {}, r.text
    assert r.json()["effective"]["max_files"] > base, r.text

    def succeeds(server):
        """A create through `server` of a new file: True once it is created (the quota error
        before)."""
        path = f"/memories/quota/after-{server.name}-{next(probes)}.md"
        r = server.http.post(TOOL, json={"command": "create", "path": path, "file_text": "z\n"}, headers=admin)
        body = r.json()
        allowed = [{"content": f"File created successfully at: {path}", "is_error": False}, {"content": QUOTA.format(base), "is_error": True}]
        assert body in allowed, f"{server.name}: {body}"
        return not body["is_error"]

    # Back to the default: creates succeed again through every server (the first included).
    created, _ = watch_all(fleet.servers, succeeds, True)

    figures["settings_propagation_s"] = {
        "applied": {k: round(v, 3) for k, v in applied.items()},
        "reset": {k: round(v, 3) for k, v in created.items()},
    }
    assert max(applied.values()) <= PROPAGATION, f"the quota reached every server in more than {PROPAGATION} s: {applied}"
    assert max(created.values()) <= PROPAGATION, f"the quota's reset reached every server in more than {PROPAGATION} s: {created}"


def is_replay(o):
    """A create answered "already exists": HAProxy sent it again after its server died with it,
    the first attempt having committed (every path is written once)."""
    return o.kind == "tool_error" and o.detail == f"Error: File {o.path} already exists"


def is_dropped(o):
    """A request HAProxy 2.6 answered by closing the client's connection (a keep-alive request
    whose server connection was reset: HAProxy leaves the retry to the client, as after a
    keep-alive race, and logs nothing) or, on a client's new connection, with a 502."""
    return (o.kind == "transport" and "Server disconnected without sending a response" in o.detail) or (
        o.kind == "http" and o.status == 502
    )


def check_outcomes(fleet, load, tolerated=lambda o: False):
    """What every load client was told, against the database (exported with the CLI): every
    write acknowledged is there with its content, and so is every replay (`is_replay`); nothing is
    there that no client sent, or with other content. Any other outcome than an acknowledged
    write fails, unless `tolerated` (its write may then be there or not). Returns the outcomes."""
    outcomes = load.all()
    errors = [o for o in outcomes if o.kind != "ok" and not tolerated(o)]
    assert not errors, f"{len(errors)} requests of {len(outcomes)} failed, e.g. {errors[:5]}"
    present = fleet.export(load.stores)
    sent = {(o.store, o.path): o.text for o in outcomes}
    for o in outcomes:
        if o.kind == "ok" or is_replay(o):
            found = present.get((o.store, o.path))
            assert found == o.text, f"acknowledged, and missing or changed: {o} (found {found!r})"
    unknown = [k for k in present if k not in sent]
    assert not unknown, f"files that no client sent: {unknown[:5]}"
    changed = [k for k in present if present[k] != sent[k]]
    assert not changed, f"files whose content is not what was sent: {changed[:5]}"
    return outcomes


def gaps(load, start, end):
    """The longest time any client went between two acknowledged writes, for the gaps that end
    in [start, end]."""
    longest = 0.0
    for per_client in load.outcomes:
        times = [o.answered for o in per_client if o.kind == "ok"]
        for a, b in zip(times, times[1:]):
            if start <= b <= end:
                longest = max(longest, b - a)
    return longest


def test_a_server_killed_under_load_loses_no_acknowledged_write(fleet, figures):
    victim = fleet.servers[1]
    log_at = fleet.haproxy.log_offset()
    with Load(fleet.url, fleet.admin_key, "kill") as load:
        load.wait_successes(5, load.started)
        steady_from = time.monotonic()
        load.wait_for(3.0)
        killed = time.monotonic()
        victim.kill9()
        down = fleet.haproxy.wait_state(victim.name, up=False)
        # The clients carry on through the others.
        load.wait_successes(20, down)
        load.wait_for(max(0.0, killed + 2.0 - time.monotonic()))
    retried = fleet.haproxy.retried_since(log_at)

    steady = [o for o in load.all() if steady_from <= o.sent and o.answered <= killed and o.kind == "ok"]
    latencies = [o.answered - o.sent for o in steady]
    figures["steady_load"] = {
        "clients": len(load.outcomes),
        "seconds": round(killed - steady_from, 2),
        "requests_per_second": round(len(steady) / (killed - steady_from), 1),
        "latency_ms_p50": round(1000 * percentile(latencies, 0.50), 2),
        "latency_ms_p99": round(1000 * percentile(latencies, 0.99), 2),
        "latency_ms_max": round(1000 * max(latencies), 2),
    }
    failover_gap = gaps(load, killed, down + 2.0)

    def in_the_kill(o):
        """What a kill -9 may cost the requests it catches in flight (or on a connection to the
        dead server that HAProxy has not seen closed yet): a replay, or a dropped request."""
        return (is_replay(o) or is_dropped(o)) and o.answered >= killed and o.sent <= down

    outcomes = check_outcomes(fleet, load, tolerated=in_the_kill)
    figures["failover"] = {
        "haproxy_marked_down_s": round(down - killed, 3),
        "longest_client_gap_s": round(failover_gap, 3),
        "longest_client_gap_before_s": round(gaps(load, steady_from, killed), 3),
        "requests": len(outcomes),
        "acknowledged": sum(o.kind == "ok" for o in outcomes),
        "replays_answered_already_exists": sum(map(is_replay, outcomes)),
        "dropped_by_haproxy": sum(map(is_dropped, outcomes)),
        "haproxy_retried": retried["retried"],
        "haproxy_redispatched": retried["redispatched"],
    }
    assert len(steady) > 0
    assert failover_gap < 3.0, f"a client waited {failover_gap:.3f} s around the kill"
    fleet.ensure_all_up()
    out = fleet.check()
    figures["failover"]["check"] = out.strip().splitlines()[-1]


def test_a_rolling_restart_under_load_costs_the_clients_nothing(fleet, figures):
    log_at = fleet.haproxy.log_offset()
    cycles = []
    with Load(fleet.url, fleet.admin_key, "rolling") as load:
        load.wait_successes(5, load.started)
        for s in fleet.servers:
            began = time.monotonic()
            seen = set()  # HAProxy's states of the server meanwhile

            def exited(server=s):
                seen.add(fleet.haproxy.states().get(server.name))
                return server.proc.poll() is not None

            s.terminate()
            wait_until(exited, 40, f"{s.name} exiting after SIGTERM")
            gone = time.monotonic()
            assert s.proc.returncode == 0, f"{s.name} exited {s.proc.returncode} after SIGTERM"
            s.start()

            def ready(server=s):
                seen.add(fleet.haproxy.states().get(server.name))
                return server.ready()

            wait_until(ready, 30, f"{s.name} answering /readyz 200 again")
            ready_at = time.monotonic()
            up = fleet.haproxy.wait_state(s.name, up=True)
            # The clients went on through the two others all along.
            assert min(load.successes_after(began)) > 0, f"a client made no progress while {s.name} restarted"
            cycles.append(
                {
                    "server": s.name,
                    "exited_s": round(gone - began, 3),
                    "ready_s": round(ready_at - began, 3),
                    "up_in_haproxy_s": round(up - began, 3),
                    "haproxy_saw_it_down": any(state and state.startswith("DOWN") for state in seen),
                }
            )
        load.wait_successes(5, time.monotonic())
    retried = fleet.haproxy.retried_since(log_at)
    outcomes = check_outcomes(fleet, load)
    fivexx = [o for o in outcomes if o.status is not None and o.status >= 500]
    assert not fivexx, fivexx[:5]
    figures["rolling_restart"] = {
        "requests": len(outcomes),
        "errors": sum(o.kind != "ok" for o in outcomes),
        "haproxy_retried": retried["retried"],
        "haproxy_redispatched": retried["redispatched"],
        "cycles": cycles,
    }


def test_a_backup_over_http_during_the_load_imports_and_checks_clean(fleet, figures, tmp_path):
    backup = tmp_path / "backup.jsonl"
    with Load(fleet.url, fleet.admin_key, "backup") as load:
        load.wait_successes(5, load.started)
        asked = time.monotonic()
        acknowledged = [o for o in load.all() if o.kind == "ok" and o.answered < asked]
        with httpx2.Client(timeout=60, trust_env=False) as http:
            with http.stream("GET", fleet.url + "/v1/export", headers=fleet.admin_headers()) as r:
                if r.status_code != 200:
                    r.read()
                    pytest.fail(f"GET /v1/export through the balancer: {r.status_code} {r.text[:300]}")
                with open(backup, "wb") as f:
                    for chunk in r.iter_bytes():
                        f.write(chunk)
        done = time.monotonic()
        load.wait_successes(1, done)
    check_outcomes(fleet, load)

    files = files_of(backup.read_text())
    # A consistent snapshot taken after the request came: every write acknowledged before it.
    for o in acknowledged:
        assert files.get((o.store, o.path)) == o.text, f"acknowledged before the export, not in it: {o}"
    restored = tmp_path / "restored.redb"
    run_memkv(str(restored), "import", str(backup), timeout=120)
    out = run_memkv(str(restored), "check", timeout=120)
    assert "ok: every invariant holds" in out.stdout, out.stdout
    # The restored database has what the backup has.
    again = files_of(run_memkv(str(restored), "export").stdout)
    assert again == files, "the restored database differs from the backup"
    figures["backup"] = {
        "bytes": backup.stat().st_size,
        "files": len(files),
        "seconds": round(done - asked, 3),
        "writes_acknowledged_during": sum(1 for o in load.all() if o.kind == "ok" and asked < o.answered < done),
    }


def test_a_console_session_sticks_to_its_server_through_the_balancer(fleet, figures):
    # What a browser does: sign in (no script, a form post), follow the redirect, keep cookies.
    with httpx2.Client(base_url=fleet.url, timeout=30, follow_redirects=True) as browser:
        # A browser says where its form comes from (the console refuses a sign-in that does not).
        origin = {"origin": fleet.url, "sec-fetch-site": "same-origin"}
        r = browser.post("/console/login", data={"key": fleet.admin_key}, headers=origin)
        assert r.status_code == 200 and "<h1>Stores</h1>" in r.text, r.text[:500]
        assert {"memkv_console", "memkv_server"} <= set(browser.cookies.keys()), dict(browser.cookies)
        # Without the balancer's cookie, two of three pages would land on a server that does not
        # know the session and send the browser back to the sign-in page.
        pages = [browser.get("/console/stores") for _ in range(12)]
        assert [p.url.path for p in pages] == ["/console/stores"] * 12
        assert all(p.status_code == 200 and "<h1>Stores</h1>" in p.text for p in pages)
        # The API still goes round: the session cookie means nothing there.
        served_by = {
            browser.get("/v1/memory_stores?limit=1", headers=fleet.admin_headers()).headers["request-id"].split("_")[1]
            for _ in range(9)
        }
        assert len(served_by) == len(fleet.servers), served_by
    figures["console_sticky_pages"] = len(pages)
