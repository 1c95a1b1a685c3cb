"""MCP at `/mcp` on `memkv serve` (streamable HTTP), and `memkv mcp --url` forwarding to it, driven
by the official Python MCP client; the server runs as a process on a free loopback port."""

import httpx2
import pytest

from helpers import (
    COMMANDS,
    SESSION_EXPECTED,
    TIMEOUT,
    Served,
    assert_commands,
    assert_search,
    assert_session,
    assert_tool_listed,
    exec_answers,
    mcp_http,
    mcp_stdio,
    run,
    run_memkv,
    text_of,
)


@pytest.fixture
def served(tmp_path):
    with Served(tmp_path / "served.redb") as s:
        yield s


def initialize_body():
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


def post_mcp(url, headers):
    """One raw initialize POST to /mcp (no MCP client): the HTTP status and body."""
    r = httpx2.post(
        url + "/mcp",
        json=initialize_body(),
        headers={"accept": "application/json, text/event-stream", **headers},
        timeout=10,
    )
    return r.status_code, r.text


def test_streamable_http_with_a_store_key(served, tmp_path):
    key = served.add_key("--store", "dana")

    async def body():
        async with mcp_http(served.url + "/mcp", {"x-api-key": key}) as session:
            assert session.init.server_info.name == "memkv"
            await assert_tool_listed(session)
            got = await assert_commands(session)
        async with mcp_http(served.url + "/mcp", {"authorization": f"Bearer {key}"}) as session:
            await assert_session(session)
            await assert_search(session)
        return got

    got = run(body)
    assert got == exec_answers(tmp_path / "exec.redb", "dana", [c for c, _ in COMMANDS])
    assert exec_answers(tmp_path / "exec2.redb", "dana", None) == SESSION_EXPECTED
    # Every change is recorded as made by the key (whatever session carried it), as the
    # memory-stores API shows.
    r = httpx2.get(
        served.url + "/v1/memory_stores/dana/memory_versions",
        params={"limit": 100},
        headers={"x-api-key": key},
        timeout=TIMEOUT,
    )
    assert r.status_code == 200, r.text
    assert len(r.json()["data"]) > 0
    authors = {tuple(sorted(v["created_by"].items())) for v in r.json()["data"]}
    assert len(authors) == 1, authors
    (author,) = authors
    assert dict(author)["type"] == "api_actor" and dict(author)["api_key_id"].startswith("key_"), author


def test_a_session_is_bound_to_the_key_that_opened_it(served):
    """Another key, even of the same store, cannot use a session: 404 (start a new session), so
    its writes never land under a session someone else opened."""
    mine = served.add_key("--store", "dana")
    other = served.add_key("--store", "dana")
    admin = served.add_key("--admin")
    accept = {"accept": "application/json, text/event-stream"}
    r = httpx2.post(served.url + "/mcp", json=initialize_body(), headers={**accept, "x-api-key": mine}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

    def post(body, **headers):
        return httpx2.post(served.url + "/mcp", json=body, headers={**accept, "mcp-session-id": sid, **headers}, timeout=TIMEOUT)

    for stranger in [{"x-api-key": other}, {"x-api-key": admin, "x-memkv-store": "dana"}]:
        r = post(listing, **stranger)
        assert r.status_code == 404, (stranger, r.status_code, r.text)
        assert '"not_found_error"' in r.text
    assert post(initialized, **{"x-api-key": mine}).status_code == 202
    r = post(listing, **{"x-api-key": mine})
    assert r.status_code == 200 and '"memory"' in r.text, r.text
    # A session id the server never gave out is refused the same way.
    r = httpx2.post(
        served.url + "/mcp",
        json=listing,
        headers={**accept, "x-api-key": mine, "mcp-session-id": "made-up"},
        timeout=TIMEOUT,
    )
    assert r.status_code == 404, r.text


def test_a_store_key_reaches_only_its_store(served):
    key_a = served.add_key("--store", "a")
    key_b = served.add_key("--store", "b")
    admin = served.add_key("--admin")

    async def body():
        async with mcp_http(served.url + "/mcp", {"x-api-key": key_a}) as a:
            r = await a.call_tool("memory", {"command": "create", "path": "/memories/secret", "file_text": "s"})
            assert text_of(r) == ("File created successfully at: /memories/secret", False)
        # Store b does not see it, through either key's own store.
        async with mcp_http(served.url + "/mcp", {"x-api-key": key_b}) as b:
            r = await b.call_tool("memory", {"command": "view", "path": "/memories/secret"})
            assert text_of(r) == ("The path /memories/secret does not exist. Please provide a valid path.", True)
        # An admin key acts on the store its header names.
        async with mcp_http(served.url + "/mcp", {"x-api-key": admin, "x-memkv-store": "a"}) as adm:
            r = await adm.call_tool("memory", {"command": "view", "path": "/memories/secret"})
            assert text_of(r) == ("Here's the content of /memories/secret with line numbers:\n     1\ts", False)

    run(body)
    # A store key naming another store, by any spelling, is told nothing: 404, like the tool route.
    for named in ["a", "%61", "b/../a", "A"]:
        status, text = post_mcp(served.url, {"x-api-key": key_b, "x-memkv-store": named})
        assert status == 404, (named, text)
        assert '"not_found_error"' in text
    # Its own store named in the header is fine.
    assert post_mcp(served.url, {"x-api-key": key_b, "x-memkv-store": "b"})[0] == 200
    # An admin key must name the store; no key, or an unknown one, is refused.
    status, text = post_mcp(served.url, {"x-api-key": admin})
    assert status == 400 and "x-memkv-store" in text
    assert post_mcp(served.url, {})[0] == 401
    assert post_mcp(served.url, {"x-api-key": "sk-memkv-wrong"})[0] == 401
    # A session id does not carry the store: every request is checked with its own key.
    assert post_mcp(served.url, {"x-api-key": "sk-memkv-wrong", "mcp-session-id": "x"})[0] == 401


def test_wrong_host_or_origin_is_refused(served):
    key = served.add_key("--store", "dana")
    port = served.url.rsplit(":", 1)[1]
    ok = {"x-api-key": key}
    assert post_mcp(served.url, ok)[0] == 200
    assert post_mcp(served.url, {**ok, "host": f"localhost:{port}"})[0] == 200
    assert post_mcp(served.url, {**ok, "origin": f"http://localhost:{port}"})[0] == 200
    # DNS rebinding: a page on another name that resolves to 127.0.0.1.
    status, text = post_mcp(served.url, {**ok, "host": f"evil.example:{port}"})
    assert status == 403, text
    # A cross-site request from a browser.
    status, text = post_mcp(served.url, {**ok, "origin": "https://evil.example"})
    assert status == 403, text


def test_allowed_hosts_and_origins_are_configurable(tmp_path):
    args = ["--mcp-allow-host", "memory.internal", "--mcp-allow-origin", "https://app.example:443"]
    with Served(tmp_path / "m.redb", args) as served:
        key = served.add_key("--store", "dana")
        ok = {"x-api-key": key}
        assert post_mcp(served.url, {**ok, "host": "memory.internal"})[0] == 200
        assert post_mcp(served.url, {**ok, "host": "memory.internal", "origin": "https://app.example"})[0] == 200
        assert post_mcp(served.url, ok)[0] == 403  # 127.0.0.1 is no longer listed
        assert post_mcp(served.url, {**ok, "host": "memory.internal", "origin": "http://localhost:1"})[0] == 403


def test_forwarding_reaches_any_store_id(served):
    """Ids that URL parsers would rewrite or split still reach their own store."""
    admin = served.add_key("--admin")

    async def body():
        for user in ["...", "a/b", "100%", "ünï", "a?b#c"]:
            args = ["mcp", "--user", user, "--url", served.url, "--api-key", admin]
            async with mcp_stdio(args) as session:
                r = await session.call_tool("memory", {"command": "create", "path": "/memories/id", "file_text": user})
                assert text_of(r) == ("File created successfully at: /memories/id", False), user
        for user in ["...", "a/b", "100%", "ünï", "a?b#c", "..", "."]:
            from helpers import encode

            if user in ("..", "."):
                # No URL path can carry these ids (parsers resolve dot segments): forwarding
                # refuses them up front; the header reaches them.
                out = run_memkv(["mcp", "--user", user, "--url", served.url, "--api-key", admin])
                assert out.returncode == 1 and "cannot be carried in a URL path" in out.stderr.decode()
                async with mcp_http(served.url + "/mcp", {"x-api-key": admin, "x-memkv-store": encode(user)}) as s:
                    r = await s.call_tool("memory", {"command": "create", "path": "/memories/id", "file_text": user})
                    assert not text_of(r)[1]

            async with mcp_http(served.url + "/mcp", {"x-api-key": admin, "x-memkv-store": encode(user)}) as s:
                r = await s.call_tool("memory", {"command": "view", "path": "/memories/id"})
                assert text_of(r)[0].endswith("\t" + user), user

    run(body)


def test_forwarding_over_stdio(served, tmp_path):
    key = served.add_key("--store", "dana")
    other = served.add_key("--store", "someone-else")

    async def body():
        args = ["mcp", "--user", "dana", "--url", served.url]
        async with mcp_stdio(args, env={"MEMKV_API_KEY": key}) as session:
            await assert_tool_listed(session)
            got = await assert_commands(session)
        async with mcp_stdio([*args, "--api-key", key], env={"MEMKV_API_KEY": ""}) as session:
            await assert_session(session)
            await assert_search(session)
        # The forwarded calls landed in the server's store for dana.
        async with mcp_http(served.url + "/mcp", {"x-api-key": key}) as session:
            r = await session.call_tool("memory", {"command": "view", "path": "/memories/user_profile.md"})
            assert not text_of(r)[1]
        return got

    got = run(body)
    assert got == exec_answers(tmp_path / "exec.redb", "dana", [c for c, _ in COMMANDS])


def test_forwarding_checks_the_key_at_start(served):
    from helpers import run_memkv

    other = served.add_key("--store", "someone-else")
    args = ["mcp", "--user", "dana", "--url", served.url]
    # A key for another store, an unknown key, no server: each a clear error at start (exit 1),
    # before the client could list the tools and show the server as connected.
    for key, wanted in [
        (other, "404"),
        (other, 'is the API key for store "dana"?'),
        ("mkv_" + "0" * 64, "401"),
        ("mkv_" + "0" * 64, "invalid API key"),
    ]:
        out = run_memkv([*args, "--api-key", key], stdin=b"")
        assert out.returncode == 1, out
        assert wanted in out.stderr.decode(), out.stderr
        assert out.stdout == b""
    out = run_memkv(["mcp", "--user", "dana", "--url", "http://127.0.0.1:9", "--api-key", other], stdin=b"")
    assert out.returncode == 1
    assert "cannot reach the memkv server" in out.stderr.decode(), out.stderr
    assert other[4:] not in out.stderr.decode()


def test_shutdown_ends_open_sessions(tmp_path):
    """SIGTERM while a client holds a session (and its event stream) open: exit 0, promptly."""
    import time

    served = Served(tmp_path / "m.redb")
    try:
        key = served.add_key("--store", "dana")

        async def body():
            async with mcp_http(served.url + "/mcp", {"x-api-key": key}) as session:
                await session.list_tools()
                started = time.monotonic()
                served.proc.terminate()
                assert served.proc.wait(timeout=TIMEOUT) == 0
                return time.monotonic() - started

        took = run(body)
        assert took < 10, took
    finally:
        served.stop()


def test_ending_a_session_answers_204(served):
    """The official client ends its session with DELETE /mcp and expects 200 or 204 (it logs
    "Session termination failed" otherwise)."""
    key = served.add_key("--store", "dana")
    headers = {"x-api-key": key, "accept": "application/json, text/event-stream"}
    r = httpx2.post(served.url + "/mcp", json=initialize_body(), headers=headers, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    r = httpx2.delete(served.url + "/mcp", headers={**headers, "mcp-session-id": sid}, timeout=TIMEOUT)
    assert r.status_code == 204, (r.status_code, r.text)
    assert r.content == b""
    # The session is gone: a request on it is refused.
    r = httpx2.post(
        served.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={**headers, "mcp-session-id": sid},
        timeout=TIMEOUT,
    )
    assert r.status_code in (400, 404), (r.status_code, r.text)
