"""What the console must refuse or never do: run a script a memory carries, answer without its
security headers, act on a form from another site, without the session's CSRF token, or after
the session has ended."""

import http.server
import re
import subprocess
import threading
import time
from html import escape

import pytest
from conftest import BIN, TIMEOUT, XSS, XSS_PATHS, Console, csrf_of, exec_commands, new_page, sign_in

HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}

# Elements and attributes that would run or load something, had any payload become markup.
ACTIVE = """() => {
    const all = [...document.querySelectorAll('*')];
    return {
        scripts: document.querySelectorAll('script, iframe, object, embed, svg, math, img, details, body *[style]').length,
        handlers: all.filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
        js_links: [...document.querySelectorAll('a[href]')].filter(a => a.href.trim().toLowerCase().startsWith('javascript:')).length,
    };
}"""


def xss_pages(console, visitor):
    """Every console page that shows the xss store's names and contents."""
    memories = console.memories("xss")
    pages = ["/console/stores", "/console/stores/xss", "/console/stores/xss?dir=%2Fmemories%2Fx"]
    pages.append("/console/stores/xss?dir=" + "%2Fmemories%2F%3Csvg%20onload%3Dalert('xss')%3E")
    for m in memories.values():
        pages.append(f"/console/stores/xss/memories/{m['id']}")
    pages += [
        "/console/stores/xss/search?q=%3Cscript%3E&mode=literal",
        "/console/stores/xss/search?q=alert+xss+onerror&mode=ranked",
        "/console/stores/xss/search?q=on%5Ba-z%5D%2B%3D&mode=regex",
    ]
    first = memories["/<script>alert('xss')</script>.md"]["id"]
    visitor.goto(f"{console.url}/console/stores/xss/memories/{first}")
    versions = visitor.locator("table.versions tbody tr td:first-child a").evaluate_all("l => l.map(a => a.getAttribute('href'))")
    pages += versions
    ids = [re.search(r"memver_[0-9a-f]+", v).group(0) for v in versions]
    pages.append(f"/console/stores/xss/memories/{first}/diff?from={ids[-1]}&to={ids[0]}")
    pages.append(f"/console/stores/xss/memories/{first}/delete")
    pages.append(f"/console/stores/xss/versions/{ids[-1]}/restore")
    pages.append("/console/keys")
    return pages


def test_no_payload_ever_runs_and_every_one_reads_as_text(visitor, console):
    # A key whose label is a payload too.
    subprocess.run(
        [BIN, "--db", str(console.db), "keys", "add", "--store", "xss", "--label", XSS[1]],
        capture_output=True,
        timeout=TIMEOUT,
    )
    sign_in(visitor, console, console.admin)
    for page in xss_pages(console, visitor):
        response = visitor.goto(console.url + page)
        assert response.status == 200, page
        assert visitor.evaluate(ACTIVE) == {"scripts": 0, "handlers": 0, "js_links": 0}, page
    # Shown as the model wrote it: as text.
    first = console.memories("xss")["/x/<img src=x onerror=alert('xss')>.md"]["id"]
    visitor.goto(f"{console.url}/console/stores/xss/memories/{first}")
    assert visitor.locator("h1").inner_text() == "/memories/x/<img src=x onerror=alert('xss')>.md"
    assert visitor.locator("table.content td").all_inner_texts() == XSS
    visitor.goto(console.url + "/console/stores/xss?dir=%2Fmemories%2Fx")
    names = visitor.locator("table.tree td:first-child").all_inner_texts()
    assert "<img src=x onerror=alert('xss')>.md" in names and "javascript:alert('xss').md" in names
    # The path that reads as a javascript: URL is a link to its memory page, nothing else.
    link = visitor.get_by_role("link", name="javascript:alert('xss').md", exact=True)
    assert link.get_attribute("href").startswith("/console/stores/xss/memories/mem_")
    # The visitor fixture then checks that no dialog opened, nothing was logged and nothing was
    # fetched from anywhere but the server.


def test_every_answer_carries_the_security_headers(visitor, console):
    seen = []
    visitor.on("response", lambda r: seen.append(r))
    sign_in(visitor, console, console.admin)
    for page in ["/console/stores", "/console/stores/alice", "/console/keys", "/console/nowhere", "/console/static/console.css"]:
        visitor.goto(console.url + page)
    assert len(seen) >= 7
    for response in seen:
        headers = response.headers
        for name, value in HEADERS.items():
            assert headers.get(name) == value, (response.url, name, headers.get(name))
    # The sign-in page may not be framed, and the session cookie is not readable by script.
    assert visitor.evaluate("document.cookie") == ""


class Attacker(http.server.BaseHTTPRequestHandler):
    """Serves a page with one form that posts to the console: another origin on loopback."""

    page = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args):
        pass


@pytest.fixture
def attacker():
    server = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Attacker)
    same_site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (server, same_site)]
    for t in threads:
        t.start()
    try:
        yield {
            "cross-site": f"http://127.0.0.2:{server.server_address[1]}/",
            "same-site": f"http://127.0.0.1:{same_site.server_address[1]}/",
        }
    finally:
        for s in (server, same_site):
            s.shutdown()
            s.server_close()


def test_forms_from_another_site_are_refused(visitor, console, attacker):
    console.tool("targets", {"command": "create", "path": "/memories/keep.md", "file_text": "keep me\n"})
    memory = console.memories("targets")["/keep.md"]["id"]
    sign_in(visitor, console, console.admin)
    # Even with the session's own token (as if it had leaked), a post from another origin does
    # nothing: across sites the SameSite=Strict cookie is not sent; from another port of this
    # host (the same site) the browser says so (Sec-Fetch-Site) and the console refuses.
    token = csrf_of(visitor)
    action = f"{console.url}/console/stores/targets/memories/{memory}/delete"
    Attacker.page = (
        f'<!doctype html><title>win a prize</title><form method="post" action="{escape(action)}">'
        f'<input type="hidden" name="csrf" value="{escape(token)}"><button>Claim</button></form>'
    ).encode()
    for kind, url in attacker.items():
        visitor.context.memkv_watch.origins.append(url.rstrip("/"))
        visitor.goto(url)
        with visitor.expect_navigation():
            visitor.get_by_role("button", name="Claim").click()
        assert visitor.url == action
        text = visitor.locator("main").inner_text()
        assert "Nothing was changed" in text, (kind, text)
        assert "/keep.md" in console.memories("targets"), kind


def test_a_missing_or_wrong_csrf_token_is_refused(visitor, console):
    console.tool("csrf", {"command": "create", "path": "/memories/keep.md", "file_text": "keep me\n"})
    memory = console.memories("csrf")["/keep.md"]["id"]
    sign_in(visitor, console, console.admin)
    good = csrf_of(visitor)
    url = f"{console.url}/console/stores/csrf/memories/{memory}/delete"
    for form in [{}, {"csrf": ""}, {"csrf": good[:-1] + ("A" if good[-1] != "A" else "B")}]:
        response = visitor.context.request.post(url, form=form)
        assert response.status == 403, form
        assert "CSRF token does not match" in response.text()
    # The token of another session does not do either.
    other, _ = new_page(visitor.context.browser, console)
    sign_in(other, console, console.admin)
    response = visitor.context.request.post(url, form={"csrf": csrf_of(other)})
    other.context.close()
    assert response.status == 403
    # Not a form at all.
    response = visitor.context.request.post(url, data='{"csrf": "%s"}' % good, headers={"content-type": "application/json"})
    assert response.status == 400
    assert "/keep.md" in console.memories("csrf")
    response = visitor.context.request.post(url, form={"csrf": good})
    assert response.ok
    assert "/keep.md" not in console.memories("csrf")


def test_an_expired_session_changes_nothing(browser, tmp_path):
    db = tmp_path / "memkv.redb"
    exec_commands(db, "s", [{"command": "create", "path": "/memories/keep.md", "file_text": "keep\n"}])
    served = Console(db, tmp_path / "serve.log", ["--console-idle", "2s"])
    try:
        page, watch = new_page(browser, served)
        sign_in(page, served, served.admin)
        memory = served.memories("s")["/keep.md"]["id"]
        page.goto(f"{served.url}/console/stores/s/memories/{memory}/delete")
        assert page.locator("h1").inner_text() == "Delete this memory?"
        # The session's idle time passes with the confirmation page open.
        time.sleep(2.5)
        page.get_by_role("button", name="Delete").click()
        assert page.locator("h1").inner_text() == "Signed out"
        assert "sign in again. Nothing was changed." in page.locator("main").inner_text()
        assert "/keep.md" in served.memories("s")
        page.goto(served.url + "/console/stores")
        assert page.url.endswith("/console/login")
        page.context.close()
        assert watch.events == []
    finally:
        served.stop()


def test_without_keys_the_console_opens_on_loopback_until_a_key_exists(browser, tmp_path):
    db = tmp_path / "memkv.redb"
    exec_commands(db, "s", [{"command": "create", "path": "/memories/keep.md", "file_text": "keep\n"}])
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(
        [BIN, "--db", str(db), "serve", "--listen", "127.0.0.1:0", "--no-auth"],
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
    )
    try:
        url = proc.stdout.readline().decode().strip().removeprefix("listening on ")
        page, watch = new_page(browser, type("Served", (), {"url": url}))
        page.goto(url + "/console")
        assert "leave the key empty" in page.locator("main").inner_text()
        page.get_by_role("button", name="Sign in").click()
        assert page.url.endswith("/console/stores")
        assert "no key (--no-auth)" in page.locator(".who").inner_text()
        assert page.locator("table.stores tbody td:first-child").all_inner_texts() == ["s"]
        # Once a key exists, keyless serving ends, for the console as for the API.
        page.goto(url + "/console/keys")
        page.fill("#label", "first")
        page.get_by_role("button", name="Add the key").click()
        assert page.locator("h1").inner_text() == "Key added"
        page.goto(url + "/console/stores")
        assert page.url.endswith("/console/login")
        page.get_by_role("button", name="Sign in").click()
        assert "an API key exists now" in page.get_by_role("alert").inner_text()
        page.context.close()
        assert watch.events == []
    finally:
        proc.terminate()
        assert proc.wait(timeout=TIMEOUT) == 0
        log.close()
