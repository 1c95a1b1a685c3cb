"""Fixtures of the console's browser tests: one `memkv serve` on a free loopback port (the binary
from $MEMKV_BIN) over a database seeded before it starts, its keys, and Debian's headless Chromium
driven by Playwright. Every page a test opens is watched: a JavaScript dialog, a page error, a
console message or a request that leaves the server fails the test (memory contents are written by
a model and may carry an attacker's text: the console must never run any of it)."""

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("MEMKV_BIN") or str(ROOT / "target" / "debug" / "memkv")
CHROMIUM = os.environ.get("MEMKV_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("MEMKV_CONSOLE_SHOTS") or ROOT / "target" / "console-shots")
# Every request, page action and process wait is bounded by this many seconds.
TIMEOUT = 30

# What a model could write to attack the page that shows its memories: markup, event handlers,
# javascript: URLs, SVG, entity-encoded and broken text. Each, if it ever ran, would open a dialog,
# log "xss" or fetch /xss-beacon (all of which the watch catches).
XSS = [
    "<script>alert('xss')</script>",
    "<img src=x onerror=alert('xss')>",
    "<svg onload=alert('xss')><circle r=1 /></svg>",
    "<a href=\"javascript:alert('xss')\">click</a>",
    "\"><script>console.log('xss')</script>",
    "'><img src=/xss-beacon onerror=alert(1)>",
    "<iframe srcdoc=\"<script>alert('xss')</script>\"></iframe>",
    "&#x3C;script&#x3E;alert('xss')&#x3C;/script&#x3E;",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert('xss')>",
    "javascript:alert('xss')",
    "<body onload=alert('xss')>",
    "<details open ontoggle=alert('xss')>",
    "broken \ufffd\ufffd encodings %C0%BC script %3Cscript%3E",
]
XSS_PATHS = [
    "/memories/<script>alert('xss')</script>.md",
    "/memories/<svg onload=alert('xss')>/inner.md",
    "/memories/x/<img src=x onerror=alert('xss')>.md",
    "/memories/x/javascript:alert('xss').md",
    "/memories/x/\"><b>bold</b>.md",
]


def run(*args, input=None):
    out = subprocess.run([BIN, *args], input=input, capture_output=True, timeout=TIMEOUT, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def exec_commands(db, user, commands):
    """The memory tool's commands through `memkv exec` (before the server holds the file)."""
    out = run("--db", str(db), "exec", "--user", user, input="\n".join(json.dumps(c) for c in commands) + "\n")
    for line in out.splitlines():
        assert json.loads(line)["is_error"] is False, line


def add_key(db, *scope):
    """A new key on `db`: (its id, the key)."""
    lines = run("--db", str(db), "keys", "add", *scope).splitlines()
    return re.match(r"added (key_[0-9a-f]+) ", lines[0]).group(1), lines[-1]


class Console:
    """The server, its keys, and the API for checks behind the browser's back."""

    def __init__(self, db, log, extra_args=()):
        self.db = db
        self.admin_id, self.admin = add_key(db, "--admin")
        self.alice_id, self.alice = add_key(db, "--store", "alice", "--label", "alice's agent")
        self.reader_id, self.reader = add_key(db, "--store", "alice", "--read-only")
        self.bob_id, self.bob = add_key(db, "--store", "bob")
        with open(log, "wb") as stderr:
            self.proc = subprocess.Popen(
                [BIN, "--db", str(db), "serve", "--listen", "127.0.0.1:0", *extra_args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
            )
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening on http://127.0.0.1:"), line
        self.url = line.strip().removeprefix("listening on ")

    def api(self, method, path, body=None, key=None):
        """(status, JSON body) of an API request with `key` (the admin key by default)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("x-api-key", key or self.admin)
        if data is not None:
            req.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def tool(self, store, command, key=None):
        """One memory-tool command on `store` (its answer must not be an error)."""
        status, out = self.api("POST", f"/v1/memory_stores/{quote(store, safe='')}/tool", command, key)
        assert status == 200 and out["is_error"] is False, (status, out)
        return out

    def memories(self, store, prefix="/"):
        """{path: memory} of `store`'s live memories (the first 100 below `prefix`), through the
        API."""
        query = f"limit=100&path_prefix={quote(prefix, safe='')}"
        status, out = self.api("GET", f"/v1/memory_stores/{quote(store, safe='')}/memories?{query}")
        assert status == 200, out
        return {m["path"]: m for m in out["data"] if m["type"] == "memory"}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                assert self.proc.wait(timeout=TIMEOUT) == 0
            finally:
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait(timeout=TIMEOUT)


@pytest.fixture(scope="session")
def console(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console")
    db = tmp / "memkv.redb"
    exec_commands(
        db,
        "alice",
        [
            {"command": "create", "path": "/memories/notes/meeting notes.md", "file_text": "Met Bob.\nAgreed on a plan.\n"},
            {"command": "create", "path": "/memories/été/日本語 ノート.md", "file_text": "こんにちは\nÇa va ? ✓\n"},
            {"command": "create", "path": "/memories/odd/quote\"s & amp#?%.md", "file_text": "awkward\n"},
            {"command": "create", "path": "/memories/profile.md", "file_text": "name: Alice\ncity: Paris\n"},
        ],
    )
    exec_commands(db, "bob", [{"command": "create", "path": "/memories/bob-only.md", "file_text": "bob's secret plans\n"}])
    exec_commands(
        db,
        "xss",
        [{"command": "create", "path": p, "file_text": "\n".join(XSS) + "\n"} for p in XSS_PATHS]
        + [{"command": "str_replace", "path": XSS_PATHS[0], "old_str": XSS[0] + "\n" + XSS[1], "new_str": XSS[3] + " " + XSS[1]}],
    )
    # A store of 2,000 memories in 20 folders, for the render budget; one memory has two versions.
    big = [
        {
            "command": "create",
            "path": f"/memories/topic-{i % 20:02d}/note-{i:04d}.md",
            "file_text": f"Note {i}\nabout topic {i % 20} and the number {i * 7}\n" + "filler line\n" * 20,
        }
        for i in range(2000)
    ]
    big.append({"command": "str_replace", "path": "/memories/topic-07/note-0007.md", "old_str": "Note 7\n", "new_str": "Note seven\n"})
    exec_commands(db, "big", big)
    c = Console(db, tmp / "serve.log")
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
            timeout=TIMEOUT * 1000,
        )
        try:
            yield b
        finally:
            b.close()


class Watch:
    """What a page did that it never should: dialogs, page errors, console messages, requests
    away from the server or to the beacon."""

    def __init__(self, origin):
        self.origins = [origin]
        self.events = []

    def attach(self, context):
        context.on("dialog", lambda d: (self.events.append(f"dialog: {d.message}"), d.dismiss()))
        context.on("request", self.request)
        context.on("page", self.page)

    def page(self, page):
        page.on("pageerror", lambda e: self.events.append(f"page error: {e}"))
        page.on("console", self.console)

    # What the browser itself logs: a page answered with an error status (a refusal the test
    # asked for), and, on a loaded machine, the sign-in page's `autofocus` arriving after the
    # test has already focused a field. Anything else on the console is the page's doing.
    BROWSERS_OWN = (
        ("error", "Failed to load resource: the server responded with a status of"),
        ("info", "Autofocus processing was blocked because a document already has a focused element."),
    )

    def console(self, message):
        if not any(message.type == kind and message.text.startswith(text) for kind, text in self.BROWSERS_OWN):
            self.events.append(f"console {message.type}: {message.text}")

    def request(self, request):
        url = request.url
        if not any(url.startswith(o + "/") for o in self.origins) or "/xss-beacon" in url:
            self.events.append(f"request: {url}")


def new_page(browser, console, viewport=None):
    """A page in a fresh context (no cookies), watched; (page, watch)."""
    context = browser.new_context(viewport=viewport or {"width": 1280, "height": 800})
    context.set_default_timeout(TIMEOUT * 1000)
    watch = Watch(console.url)
    watch.attach(context)
    page = context.new_page()
    # A test that opens pages elsewhere on purpose adds their origins here.
    context.memkv_watch = watch
    return page, watch


@pytest.fixture
def visitor(browser, console):
    """A fresh, watched browser page; the test fails if anything ran on it."""
    page, watch = new_page(browser, console)
    yield page
    page.context.close()
    # CSP reports of blocked inline content would be console errors: there must be none either.
    assert watch.events == [], watch.events


def sign_in(page, console, key):
    """Signs `page` in with `key`, as a person would: the sign-in page, the key, the button."""
    page.goto(console.url + "/console")
    assert page.url == console.url + "/console/login"
    page.fill("#key", key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()
    return page


def csrf_of(page):
    """The session's CSRF token, as the page's sign-out form carries it."""
    return page.locator("form[action='/console/logout'] input[name=csrf]").get_attribute("value")
