"""`memkv mcp` over stdio, driven by the official Python MCP client (run by tools/test-mcp.sh)."""

import json

from helpers import (
    COMMANDS,
    SESSION_EXPECTED,
    assert_commands,
    assert_search,
    assert_session,
    assert_tool_listed,
    exec_answers,
    mcp_stdio,
    run,
    run_memkv,
)


def test_initialize_list_and_every_command(tmp_path):
    db = tmp_path / "m.redb"

    async def body():
        async with mcp_stdio(["--db", str(db), "mcp", "--user", "dana"]) as session:
            assert session.init.server_info.name == "memkv"
            await assert_tool_listed(session)
            got = await assert_commands(session)
            await assert_search(session)
        return got

    got = run(body)
    # The same commands through `memkv exec`, on a fresh database: byte-identical contents.
    assert got == exec_answers(tmp_path / "exec.redb", "dana", [c for c, _ in COMMANDS])
    # Every change is recorded as made by the MCP session (this `memkv mcp` process).
    out = run_memkv(["--db", str(db), "history", "--user", "dana", "--json"])
    actors = {json.dumps(json.loads(line)["actor"], sort_keys=True) for line in out.stdout.decode().splitlines()}
    assert len(actors) == 1, actors
    actor = json.loads(actors.pop())
    assert actor["type"] == "session" and actor["id"].startswith("mcp-stdio:"), actor


def test_recorded_session_matches_exec(tmp_path):
    db = tmp_path / "m.redb"

    async def body():
        async with mcp_stdio(["--db", str(db), "mcp", "--user", "dana"]) as session:
            await assert_session(session)

    run(body)
    assert exec_answers(tmp_path / "exec.redb", "dana", None) == SESSION_EXPECTED


def test_users_are_isolated_and_the_database_has_one_owner(tmp_path):
    db = tmp_path / "m.redb"

    async def body():
        async with mcp_stdio(["--db", str(db), "mcp", "--user", "a"]) as a:
            r = await a.call_tool("memory", {"command": "create", "path": "/memories/x", "file_text": "a"})
            assert not r.is_error
            # A second process cannot open the database the first one owns; it says why and exits.
            from helpers import run_memkv

            out = run_memkv(["--db", str(db), "mcp", "--user", "b"], stdin=b"")
            assert out.returncode == 1
            assert "the database is open in another process" in out.stderr.decode()
        async with mcp_stdio(["--db", str(db), "mcp", "--user", "b"]) as b:
            r = await b.call_tool("memory", {"command": "view", "path": "/memories/x"})
            assert r.is_error
            assert r.content[0].text == "The path /memories/x does not exist. Please provide a valid path."

    run(body)


def test_usage_errors(tmp_path):
    from helpers import run_memkv

    out = run_memkv(["mcp", "--user", "u", "--url", "http://127.0.0.1:9"], stdin=b"", env={"MEMKV_API_KEY": ""})
    assert out.returncode != 0
    out = run_memkv(["mcp", "--user", "u", "--url", "https://example.invalid", "--api-key", "k"], stdin=b"")
    assert out.returncode == 1
    assert "only http:// URLs are supported" in out.stderr.decode()


def test_every_bad_line_gets_an_answer(tmp_path):
    """A line that is not JSON, one that is not JSON-RPC, one over the cap: each answered with
    its JSON-RPC error (and id when it can be read), and the session goes on."""
    import json
    import subprocess

    from helpers import BIN, TIMEOUT

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    huge = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "memory", "arguments": {"command": "create", "path": "/memories/a.md",
                                                        "file_text": "x" * (2 * 1024 * 1024)}}}
    ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    lines = [
        json.dumps(init),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        "this is not json",
        json.dumps(huge),
        json.dumps({"id": 4, "neither": "jsonrpc"}),
        json.dumps(ping),
    ]
    out = subprocess.run(
        [BIN, "--db", str(tmp_path / "m.redb"), "mcp", "--user", "u"],
        input=("\n".join(lines) + "\n").encode(),
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert out.returncode == 0, out.stderr
    answers = [json.loads(line) for line in out.stdout.decode().splitlines()]
    by_id = {a.get("id"): a for a in answers}
    assert by_id[1]["result"]["serverInfo"]
    assert by_id[3]["error"]["code"] == -32600
    assert "too large" in by_id[3]["error"]["message"]
    assert by_id[4]["error"]["code"] == -32600
    assert by_id[5]["result"] == {}
    [parse] = [a for a in answers if "id" not in a]
    assert parse["error"]["code"] == -32700
    assert len(answers) == 5, answers
