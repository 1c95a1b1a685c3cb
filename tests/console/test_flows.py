"""The console's main flows in a real browser: signing in with each kind of key, browsing a store
with awkward and Unicode names, a memory and its versions, the diff of two versions, restore,
redact, delete, archive, and the API keys."""

import hashlib
import json
import re
from urllib.parse import quote

from conftest import Console, csrf_of, new_page, run, sign_in


def test_a_wrong_key_is_refused_and_no_session_is_made(visitor, console):
    sign_in(visitor, console, "mkv_not-a-key")
    assert visitor.url.endswith("/console/login")
    assert visitor.get_by_role("alert").inner_text() == "invalid API key"
    assert visitor.context.cookies() == []
    visitor.goto(console.url + "/console/stores")
    assert visitor.url.endswith("/console/login")


def test_an_admin_sees_every_store_and_filters_them(visitor, console):
    sign_in(visitor, console, console.admin)
    assert visitor.url.endswith("/console/stores")
    rows = visitor.locator("table.stores tbody tr")
    names = rows.locator("td:first-child").all_inner_texts()
    assert {"alice", "bob", "xss"} <= set(names)
    alice = rows.filter(has=visitor.get_by_role("link", name="alice", exact=True))
    # Memories, bytes, last write, archived.
    assert alice.locator("td").nth(2).inner_text() == "4"
    assert alice.locator("td").nth(5).inner_text() == "no"
    visitor.fill("#q", "BO")
    visitor.get_by_role("button", name="Filter").click()
    assert visitor.locator("table.stores tbody tr td:first-child").all_inner_texts() == ["bob"]
    assert "Signed in: " + console.admin_id in visitor.locator(".who").inner_text()
    cookie = visitor.context.cookies()[0]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"


def test_a_store_key_reaches_only_its_store(visitor, console):
    sign_in(visitor, console, console.alice)
    assert visitor.url.endswith("/console/stores/alice")
    visitor.get_by_role("link", name="Stores").click()
    assert visitor.locator("table.stores tbody td:first-child").all_inner_texts() == ["alice"]
    assert visitor.get_by_role("link", name="API keys").count() == 0
    for path in ["/console/stores/bob", "/console/stores/bob/search?q=plans", "/console/stores/nobody"]:
        response = visitor.goto(console.url + path)
        assert response.status == 404, path
        assert "secret plans" not in visitor.content()
    bob_memory = console.memories("bob")["/bob-only.md"]["id"]
    for path in [f"/console/stores/bob/memories/{bob_memory}", f"/console/stores/bob/memories/{bob_memory}/delete"]:
        assert visitor.goto(console.url + path).status == 404, path
    assert visitor.goto(console.url + "/console/keys").status == 403
    assert visitor.goto(console.url + "/console/stores/alice/settings").status == 403
    # Nor can its forms reach another store, even with a good token: the same 404 as on the API.
    visitor.goto(console.url + "/console/stores/alice")
    csrf = csrf_of(visitor)
    status, out = console.api("GET", f"/v1/memory_stores/bob/memory_versions?memory_id={bob_memory}")
    bob_version = out["data"][0]["id"]
    for action in [
        f"/console/stores/bob/memories/{bob_memory}/delete",
        f"/console/stores/bob/versions/{bob_version}/restore",
        f"/console/stores/bob/versions/{bob_version}/redact",
        "/console/stores/bob/archive",
        "/console/stores/bob/settings",
    ]:
        response = visitor.context.request.post(console.url + action, form={"csrf": csrf})
        assert response.status in (403, 404), (action, response.status)
        assert "secret plans" not in response.text()
    assert "/bob-only.md" in console.memories("bob")
    status, out = console.api("GET", "/v1/memory_stores/bob")
    assert out["archived_at"] is None


def test_browsing_awkward_and_unicode_names(visitor, console):
    sign_in(visitor, console, console.alice)
    tree = visitor.locator("table.tree")
    assert tree.locator("tr.folder a").all_inner_texts() == ["notes/", "odd/", "été/"]
    visitor.get_by_role("link", name="été/", exact=True).click()
    assert visitor.locator("nav.crumbs li").all_inner_texts() == ["/memories", "été"]
    visitor.get_by_role("link", name="日本語 ノート.md", exact=True).click()
    assert visitor.locator("h1").inner_text() == "/memories/été/日本語 ノート.md"
    lines = visitor.locator("table.content tr")
    assert lines.all_inner_texts() == ["1\tこんにちは", "2\tÇa va ? ✓"]
    facts = visitor.locator("dl.facts").inner_text()
    assert "SHA-256" in facts and "Size" in facts
    assert re.search(r"\b[0-9a-f]{64}\b", facts)
    visitor.go_back()
    visitor.get_by_role("link", name="/memories", exact=True).click()
    visitor.get_by_role("link", name="odd/", exact=True).click()
    visitor.get_by_role("link", name="quote\"s & amp#?%.md", exact=True).click()
    assert visitor.locator("h1").inner_text() == "/memories/odd/quote\"s & amp#?%.md"
    assert visitor.locator("table.content td").inner_text() == "awkward"


def test_search_exact_and_ranked(visitor, console):
    sign_in(visitor, console, console.alice)
    for mode, query in [("literal", "Agreed on"), ("ranked", "plan"), ("regex", "Agre+d")]:
        visitor.goto(console.url + "/console/stores/alice")
        visitor.fill("#search-q", query)
        visitor.select_option("#search-mode", mode)
        visitor.get_by_role("button", name="Search").click()
        hits = visitor.locator("section.hit h2").all_inner_texts()
        assert hits == ["/memories/notes/meeting notes.md"], (mode, hits)
        assert "Agreed on a plan." in visitor.locator("table.lines tr.match").first.inner_text()
    visitor.locator("section.hit h2 a").click()
    assert visitor.locator("h1").inner_text() == "/memories/notes/meeting notes.md"


def history(console, store, *contents):
    """A memory in `store` at /memories/doc.md whose versions hold `contents`, oldest first (the
    first written by the agent's tool, the others through the API with the admin key)."""
    console.tool(store, {"command": "create", "path": "/memories/doc.md", "file_text": contents[0]})
    memory = console.memories(store)["/doc.md"]["id"]
    for new in contents[1:]:
        status, out = console.api("POST", f"/v1/memory_stores/{store}/memories/{memory}", {"content": new})
        assert status == 200, out
    return memory


def open_memory(page, console, store, memory):
    page.goto(f"{console.url}/console/stores/{quote(store)}/memories/{memory}")


def test_diff_of_any_two_versions(visitor, console):
    memory = history(
        console,
        "diffs",
        "name: Alice\ncity: Paris\nlikes: tea\n",
        "name: Alice\ncity: Lyon\nlikes: tea\n",
        "name: Alice\ncity: Lyon\nlikes: green tea\nplan: visit\n",
    )
    sign_in(visitor, console, console.admin)
    open_memory(visitor, console, "diffs", memory)
    versions = visitor.locator("table.versions tbody tr")
    assert versions.count() == 3
    assert versions.first.inner_text().count("(current)") == 1
    assert "API key " + console.admin_id in versions.first.inner_text()
    # By default the two newest; the oldest against the newest is chosen here.
    options = visitor.locator("#from option").all()
    visitor.select_option("#from", options[-1].get_attribute("value"))
    visitor.get_by_role("button", name="Show the differences").click()
    assert visitor.locator("h1").inner_text() == "Differences"
    assert "3 lines added, 2 lines removed." in visitor.locator("p.summary").inner_text()
    assert visitor.locator("table.diff tr.del del").all_inner_texts() == ["Paris"]
    assert visitor.locator("table.diff tr.add ins").all_inner_texts() == ["Lyon", "green ", "plan: visit"]
    assert visitor.locator("table.diff tr.hunk").first.inner_text().startswith("@@ -1,3 +1,4 @@")


def test_restore_a_version(visitor, console):
    memory = history(console, "restores", "first draft\n", "second draft\n")
    sign_in(visitor, console, console.admin)
    open_memory(visitor, console, "restores", memory)
    oldest = visitor.locator("table.versions tbody tr").last
    oldest.get_by_role("link", name="Restore…").click()
    assert visitor.locator("h1").inner_text() == "Restore this version?"
    visitor.get_by_role("button", name="Restore").click()
    assert "was restored" in visitor.get_by_role("status").inner_text()
    assert visitor.locator("table.content td").inner_text() == "first draft"
    rows = visitor.locator("table.versions tbody tr")
    assert rows.count() == 3
    assert "API key " + console.admin_id in rows.first.inner_text()
    # The API sees the restored content too.
    assert console.memories("restores")["/doc.md"]["content_sha256"] == hashlib.sha256(b"first draft\n").hexdigest()


def test_redact_erases_the_content_from_every_page(visitor, console):
    secret = "sk-live-REDACTME-0123456789"
    memory = history(console, "redactions", f"token: {secret}\n", "token: (rotated)\n")
    sign_in(visitor, console, console.admin)
    open_memory(visitor, console, "redactions", memory)
    old = visitor.locator("table.versions tbody tr").last
    version_page = old.locator("a").first.get_attribute("href")
    visitor.goto(console.url + version_page)
    assert secret in visitor.locator("table.content").inner_text()
    open_memory(visitor, console, "redactions", memory)
    # The current version offers no redaction (the memory would go on showing it).
    assert visitor.locator("table.versions tbody tr").first.get_by_role("link", name="Redact…").count() == 0
    visitor.locator("table.versions tbody tr").last.get_by_role("link", name="Redact…").click()
    assert "erases its content, its path and its hash for good" in visitor.locator("main").inner_text()
    visitor.get_by_role("button", name="Redact for good").click()
    assert "was redacted" in visitor.get_by_role("status").inner_text()
    assert "redacted" in visitor.locator("table.versions tbody tr").last.inner_text()
    pages = [
        f"/console/stores/redactions/memories/{memory}",
        version_page,
        "/console/stores/redactions",
        "/console/stores/redactions/search?q=REDACTME&mode=literal",
        "/console/stores/redactions/search?q=token&mode=ranked",
    ]
    for page in pages:
        visitor.goto(console.url + page)
        assert secret not in visitor.content(), page
    visitor.goto(console.url + version_page)
    assert "This version was redacted" in visitor.locator("main").inner_text()
    # Nor can it be compared any more: the form offers only versions with content.
    open_memory(visitor, console, "redactions", memory)
    assert visitor.locator("#from").count() == 0


def test_delete_a_memory_then_restore_it(visitor, console):
    console.tool("deletions", {"command": "create", "path": "/memories/a/gone.md", "file_text": "bye\n"})
    memory = console.memories("deletions")["/a/gone.md"]["id"]
    sign_in(visitor, console, console.admin)
    open_memory(visitor, console, "deletions", memory)
    visitor.get_by_role("link", name="Delete this memory…").click()
    assert visitor.locator("h1").inner_text() == "Delete this memory?"
    visitor.get_by_role("link", name="Cancel").click()
    assert "/a/gone.md" in console.memories("deletions")
    visitor.get_by_role("link", name="Delete this memory…").click()
    visitor.get_by_role("button", name="Delete").click()
    assert "was deleted" in visitor.get_by_role("status").inner_text()
    assert "/a/gone.md" not in console.memories("deletions")
    open_memory(visitor, console, "deletions", memory)
    assert "was deleted" in visitor.locator("main").inner_text()
    visitor.locator("table.versions tbody tr").last.get_by_role("link", name="Restore…").click()
    visitor.get_by_role("button", name="Restore").click()
    assert "/a/gone.md" in console.memories("deletions")


def test_archive_a_store(visitor, console):
    console.tool("archives", {"command": "create", "path": "/memories/kept.md", "file_text": "kept\n"})
    sign_in(visitor, console, console.admin)
    visitor.goto(console.url + "/console/stores/archives")
    visitor.get_by_role("link", name="Archive this store…").click()
    assert "read-only for good" in visitor.locator("main").inner_text()
    visitor.get_by_role("button", name="Archive").click()
    assert "was archived" in visitor.get_by_role("status").inner_text()
    assert "(read-only)" in visitor.locator("dl.facts").inner_text()
    assert visitor.get_by_role("link", name="Archive this store…").count() == 0
    status, out = console.api("GET", "/v1/memory_stores/archives")
    assert status == 200 and out["archived_at"] is not None
    status, _ = console.api(
        "POST", "/v1/memory_stores/archives/tool", {"command": "create", "path": "/memories/new.md", "file_text": "x"}
    )
    assert status == 200
    assert "/new.md" not in console.memories("archives")


def test_a_read_only_key_sees_but_cannot_change(visitor, console):
    sign_in(visitor, console, console.reader)
    assert "read-only" in visitor.locator(".who").inner_text()
    assert visitor.get_by_role("link", name="Archive this store…").count() == 0
    memory = console.memories("alice")["/profile.md"]["id"]
    open_memory(visitor, console, "alice", memory)
    assert visitor.get_by_role("link", name="Delete this memory…").count() == 0
    assert visitor.get_by_role("link", name="Restore…").count() == 0
    # Straight to an action's URL: refused, nothing changed.
    response = visitor.goto(f"{console.url}/console/stores/alice/memories/{memory}/delete")
    assert response.status == 403
    token = visitor.context.request.get(console.url + "/console/stores/alice").text()
    csrf = re.search(r'name="csrf" value="([^"]+)"', token).group(1)
    response = visitor.context.request.post(
        f"{console.url}/console/stores/alice/memories/{memory}/delete", form={"csrf": csrf}
    )
    assert response.status == 403
    assert "/profile.md" in console.memories("alice")


def test_keys_add_shown_once_and_revoke(browser, visitor, console):
    sign_in(visitor, console, console.admin)
    visitor.get_by_role("link", name="API keys").click()
    ids = visitor.locator("table.keys tbody td:first-child").all_inner_texts()
    assert {console.admin_id, console.alice_id, console.reader_id, console.bob_id} <= set(ids)
    assert "alice's agent" in visitor.locator("table.keys").inner_text()
    visitor.fill("#store", "bob")
    visitor.check("#read_only")
    visitor.fill("#label", "auditor <b>")
    visitor.fill("#expires", "30d")
    visitor.get_by_role("button", name="Add the key").click()
    assert visitor.locator("h1").inner_text() == "Key added"
    key = visitor.locator("#new-key").input_value()
    assert key.startswith("mkv_")
    key_id = re.search(r"key_[0-9a-f]+", visitor.get_by_role("status").inner_text()).group(0)
    visitor.reload()  # a form post answered: the key is not in any page one can come back to
    visitor.goto(console.url + "/console/keys")
    assert key not in visitor.content()
    row = visitor.locator("table.keys tbody tr").filter(has_text=key_id)
    assert "store bob, read-only" in row.inner_text() and "auditor <b>" in row.inner_text()
    # The new key works at once, in another browser.
    other, watch = new_page(browser, console)
    sign_in(other, console, key)
    assert other.url.endswith("/console/stores/bob")
    # Revoked: its session ends on its next page.
    row.get_by_role("link", name="Revoke…").click()
    visitor.get_by_role("button", name="Revoke").click()
    assert "was revoked" in visitor.get_by_role("status").inner_text()
    assert key_id not in visitor.locator("table.keys").inner_text()
    other.reload()
    assert other.url.endswith("/console/login")
    other.context.close()
    assert watch.events == []


def test_a_bad_key_form_says_why(visitor, console):
    sign_in(visitor, console, console.admin)
    visitor.goto(console.url + "/console/keys")
    visitor.check("#read_only")
    visitor.get_by_role("button", name="Add the key").click()
    assert "read-only is for a store key" in visitor.get_by_role("alert").inner_text()
    visitor.fill("#expires", "soon")
    visitor.fill("#store", "bob")
    visitor.get_by_role("button", name="Add the key").click()
    assert "not a duration" in visitor.get_by_role("alert").inner_text()


def test_settings_of_a_store(visitor, console):
    console.tool("tuned", {"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    sign_in(visitor, console, console.admin)
    visitor.goto(console.url + "/console/stores/tuned")
    visitor.get_by_role("link", name="Settings").click()
    visitor.fill("#max_files", "1")
    visitor.fill("#ttl", "30d")
    visitor.get_by_role("button", name="Save").click()
    assert "were saved" in visitor.get_by_role("status").inner_text()
    assert visitor.locator("#max_files").input_value() == "1"
    status, out = console.api("GET", "/v1/memory_stores/tuned/settings")
    assert out["own"] == {"max_files": 1, "ttl": "30d"}
    # The quota applies to the agent's next write.
    status, out = console.api(
        "POST", "/v1/memory_stores/tuned/tool", {"command": "create", "path": "/memories/b.md", "file_text": "b"}
    )
    assert out["is_error"] is True
    visitor.fill("#max_files", "many")
    visitor.get_by_role("button", name="Save").click()
    assert "max_files must be a whole number" in visitor.get_by_role("alert").inner_text()
    visitor.fill("#max_files", "")
    visitor.fill("#ttl", "")
    visitor.get_by_role("button", name="Save").click()
    status, out = console.api("GET", "/v1/memory_stores/tuned/settings")
    assert out["own"] == {}


def test_sign_out_ends_the_session(visitor, console):
    sign_in(visitor, console, console.admin)
    cookie = visitor.context.cookies()[0]
    visitor.get_by_role("button", name="Sign out").click()
    assert visitor.locator("h1").inner_text() == "Signed out"
    assert visitor.context.cookies() == []
    # The old cookie is worth nothing now.
    visitor.context.add_cookies([cookie])
    visitor.goto(console.url + "/console/stores")
    assert visitor.url.endswith("/console/login")


def test_recent_changes_once_the_change_log_was_trimmed(browser, tmp_path):
    db = tmp_path / "memkv.redb"
    keep = ["--changes-max-entries", "10"]
    commands = [{"command": "create", "path": f"/memories/n{i:03d}.md", "file_text": f"{i}\n"} for i in range(200)]
    run("--db", str(db), *keep, "exec", "--user", "busy", input="\n".join(json.dumps(c) for c in commands) + "\n")
    served = Console(db, tmp_path / "serve.log", keep)
    try:
        page, watch = new_page(browser, served)
        sign_in(page, served, served.admin)
        # The log no longer starts at the beginning (the API says so for a cursor of 0) ...
        status, _ = served.api("GET", "/v1/memory_stores/busy/changes?after=0")
        assert status == 410
        # ... and the store page shows the newest of what it keeps.
        response = page.goto(served.url + "/console/stores/busy")
        assert response.status == 200
        rows = page.locator("table.changes tbody tr").all_inner_texts()
        assert len(rows) == 15
        assert [re.search(r"n(\d+)\.md", r).group(1) for r in rows] == [f"{i:03d}" for i in range(199, 184, -1)]
        page.context.close()
        assert watch.events == []
    finally:
        served.stop()
