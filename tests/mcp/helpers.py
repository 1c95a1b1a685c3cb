"""Shared helpers of the MCP tests: the binary, a client session per transport, the commands."""

import json
import os
import subprocess
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("MEMKV_BIN") or str(ROOT / "target" / "debug" / "memkv")
# Every test finishes within this many seconds or fails.
TIMEOUT = 30

SESSION = [json.loads(line) for line in (ROOT / "examples" / "session.jsonl").read_text().splitlines() if line]
SESSION_EXPECTED = [
    json.loads(line) for line in (ROOT / "tests" / "data" / "session.expected.jsonl").read_text().splitlines() if line
]

# Every command of memory_20250818, successes and the model's mistakes, with what the model
# must read (byte for byte, from PROTOCOL.md) and whether it is an error.
COMMANDS = [
    (
        {"command": "view", "path": "/memories"},
        (
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items "
            "and node_modules:\n0B\t/memories",
            False,
        ),
    ),
    (
        {"command": "create", "path": "/memories/notes.md", "file_text": "one\ntwo\nthree\n"},
        ("File created successfully at: /memories/notes.md", False),
    ),
    (
        {"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
        ("Here's the content of /memories/notes.md with line numbers:\n     2\ttwo\n     3\tthree", False),
    ),
    (
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "two", "new_str": "TWO"},
        (
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
            "     1\tone\n     2\tTWO\n     3\tthree",
            False,
        ),
    ),
    (
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "zero\n"},
        ("The file /memories/notes.md has been edited.", False),
    ),
    (
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/a/n.md"},
        ("Successfully renamed /memories/notes.md to /memories/a/n.md", False),
    ),
    (
        {"command": "view", "path": "/memories/a/n.md"},
        (
            "Here's the content of /memories/a/n.md with line numbers:\n"
            "     1\tzero\n     2\tone\n     3\tTWO\n     4\tthree",
            False,
        ),
    ),
    (
        {"command": "delete", "path": "/memories/a"},
        ("Successfully deleted /memories/a", False),
    ),
    # The model's mistakes: tool results with isError, never protocol errors.
    (
        {"command": "view", "path": "/memories/a/n.md"},
        ("The path /memories/a/n.md does not exist. Please provide a valid path.", True),
    ),
    (
        {"command": "create", "path": "/etc/passwd", "file_text": "x"},
        ("Error: Path must start with /memories, got: /etc/passwd", True),
    ),
    (
        {"command": "frobnicate"},
        ('Error: Unknown command: "frobnicate"', True),
    ),
    ({}, ("Error: Unknown command: null", True)),
    (
        {"command": "create", "path": "/memories/x"},
        ("Error: Missing required parameter `file_text` for command `create`", True),
    ),
    (
        {"command": "insert", "path": "/memories/x", "insert_line": "1", "insert_text": "t"},
        ("Error: Invalid parameter `insert_line` for command `insert`: expected integer", True),
    ),
    (
        {"command": "delete", "path": "/memories"},
        ("Error: Cannot delete the /memories directory itself", True),
    ),
]


def encode(store):
    """A store id as one percent-encoded segment (the x-memkv-store header, the {store} path)."""
    from urllib.parse import quote

    return quote(store, safe="").replace(".", "%2E")


def run(body):
    """Runs the async test body, bounded in time."""

    async def bounded():
        with anyio.fail_after(TIMEOUT):
            return await body()

    return anyio.run(bounded)


def run_memkv(args, stdin=b"", env=None):
    """Runs the binary to completion, bounded in time."""
    return subprocess.run(
        [BIN, *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        env={**os.environ, **(env or {})},
        check=False,
    )


def exec_answers(db, user, inputs):
    """What `memkv exec` answers: for bare inputs, [(content, is_error)]; for None, the recorded
    session's tool_result blocks."""
    lines = [json.dumps(i) for i in inputs] if inputs is not None else [json.dumps(b) for b in SESSION]
    out = run_memkv(["--db", str(db), "exec", "--user", user], stdin="\n".join(lines).encode())
    assert out.returncode == 0, out.stderr
    answers = [json.loads(line) for line in out.stdout.decode().splitlines()]
    if inputs is None:
        return answers
    return [(a["content"], a["is_error"]) for a in answers]


class Session:
    """A client session and the initialize result."""

    def __init__(self, client, init):
        self.client = client
        self.init = init

    async def call_tool(self, name, arguments):
        return await self.client.call_tool(name, arguments)

    async def list_tools(self):
        return await self.client.list_tools()


@asynccontextmanager
async def mcp_stdio(args, env=None):
    """`memkv ARGS` started by the client as its stdio server; stopped when the block ends."""
    params = StdioServerParameters(command=BIN, args=args, env=env)
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as client:
                    init = await client.initialize()
                    yield Session(client, init)
        finally:
            errlog.seek(0)
            log = errlog.read()
            if log:
                print("memkv stderr:", log)


def text_of(result):
    """The one text item of a tool result, and its isError."""
    assert len(result.content) == 1, result
    assert result.content[0].type == "text"
    return result.content[0].text, bool(result.is_error)


# memory_search (memkv's own tool, docs/search.md) over a file of its own, with what the model
# must read, byte for byte (the same strings as tests/it/search.rs).
SEARCH_SETUP = {
    "command": "create",
    "path": "/memories/search/tz.md",
    "file_text": "# Time\nlives in Paris\nTZ: Europe/Paris\n",
}
SEARCHES = [
    (
        {"query": "Paris", "mode": "literal", "path_prefix": "/memories/search"},
        ("/memories/search/tz.md:2: lives in Paris\n/memories/search/tz.md:3: TZ: Europe/Paris", False),
    ),
    (
        {"query": "^tz", "mode": "regex", "case_insensitive": True, "context": 1, "path_prefix": "/memories/search"},
        ("/memories/search/tz.md-2- lives in Paris\n/memories/search/tz.md:3: TZ: Europe/Paris", False),
    ),
    ({"query": "Rome", "path_prefix": "/memories/search"}, ('No memory matches "Rome".', False)),

    (
        {"query": "(", "mode": "regex"},
        ("Error: the regular expression is invalid: regex parse error:\n    (\n    ^\nerror: unclosed group", True),
    ),
    ({"query": "x", "glob": "*"}, ("Error: unknown parameter `glob`", True)),
]


async def assert_search(session):
    """memory_search answers each of SEARCHES byte for byte, after SEARCH_SETUP."""
    assert not text_of(await session.call_tool("memory", SEARCH_SETUP))[1]
    for arguments, want in SEARCHES:
        assert text_of(await session.call_tool("memory_search", arguments)) == want, arguments
    # Ranked (the default): the score depends on the whole store's words, the rest does not.
    content, is_error = text_of(await session.call_tool("memory_search", {"query": "europe", "path_prefix": "/memories/search"}))
    head, score, tail = content.partition(" (score ")
    assert (head, is_error) == ("/memories/search/tz.md", False), content
    assert tail.split(")\n", 1)[1] == "/memories/search/tz.md:3: TZ: Europe/Paris", content


async def assert_tool_listed(session):
    tools = (await session.list_tools()).tools
    assert [t.name for t in tools] == ["memory", "memory_search"]
    search = tools[1]
    assert "Search your memory directory" in search.description
    assert search.input_schema["required"] == ["query"]
    assert set(search.input_schema["properties"]) == {
        "query",
        "mode",
        "case_insensitive",
        "path_prefix",
        "context",
        "limit",
    }
    assert search.annotations.read_only_hint is True
    schema = tools[0].input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["command"]
    assert schema["properties"]["command"]["enum"] == [
        "view",
        "create",
        "str_replace",
        "insert",
        "delete",
        "rename",
    ]
    assert set(schema["properties"]) == {
        "command",
        "path",
        "view_range",
        "file_text",
        "old_str",
        "new_str",
        "insert_line",
        "insert_text",
        "old_path",
        "new_path",
    }
    for prop in schema["properties"].values():
        assert prop["description"]


async def assert_commands(session):
    """Every command of COMMANDS, in order, against its expected answer; returns the answers."""
    got = []
    for arguments, want in COMMANDS:
        answer = text_of(await session.call_tool("memory", arguments))
        assert answer == want, arguments
        got.append(answer)
    # A tool that does not exist is a protocol error, not a tool result.
    try:
        await session.call_tool("shell", {"command": "view"})
    except Exception as e:  # noqa: BLE001 - the client's MCPError
        assert "unknown tool: shell" in str(e)
    else:
        raise AssertionError("an unknown tool was answered")
    return got


async def assert_session(session):
    """The recorded agent session through MCP: every content and isError byte-identical to the
    golden transcript of `memkv exec`."""
    assert len(SESSION) == len(SESSION_EXPECTED) > 0
    for block, want in zip(SESSION, SESSION_EXPECTED):
        content, is_error = text_of(await session.call_tool(block["name"], block["input"]))
        assert want["tool_use_id"] == block["id"]
        assert (content, is_error) == (want["content"], want["is_error"]), block["id"]


class Served:
    """`memkv serve` on a free loopback port, with its keys; stopped (SIGTERM, then waited for)
    by `stop` or at the end of a `with` block."""

    def __init__(self, db, extra_args=()):
        self.db = str(db)
        self.proc = subprocess.Popen(
            [BIN, "--db", self.db, "serve", "--listen", "127.0.0.1:0", *extra_args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening on http://"), line
        self.url = line.strip().removeprefix("listening on ")

    def add_key(self, *scope):
        """A new key: `add_key("--admin")` or `add_key("--store", NAME)`."""
        out = run_memkv(["--db", self.db, "keys", "add", *scope])
        assert out.returncode == 0, out.stderr
        return out.stdout.decode().splitlines()[-1]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            assert self.proc.wait(timeout=TIMEOUT) == 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.stop()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=TIMEOUT)


@asynccontextmanager
async def mcp_http(url, headers):
    """An MCP client session over streamable HTTP at `url` (the server's /mcp) with `headers`."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as client:
                init = await client.initialize()
                yield Session(client, init)
