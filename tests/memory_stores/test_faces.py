"""The two faces of one store: memory-tool commands on the tool route interleaved with the
memory-stores API, each seeing the other's writes; and keys: a store key reaches its own
store only, creating and listing stores needs an admin key, keyless writes have no author."""

import subprocess
import time

import anthropic
import httpx2
import pytest

from conftest import BIN, TIMEOUT, Served, sha256


def test_tool_and_api_see_each_others_writes(served, admin, store):
    memories = admin.beta.memory_stores.memories
    tool = lambda command: served.tool(admin, store.id, command)  # noqa: E731

    # The tool writes; the API sees it, under the same path less /memories.
    out = tool({"command": "create", "path": "/memories/projects/plan.md", "file_text": "step one\n"})
    assert out == {"content": "File created successfully at: /memories/projects/plan.md", "is_error": False}
    [m] = list(memories.list(store.id, view="full"))
    assert (m.path, m.content, m.content_sha256) == ("/projects/plan.md", "step one\n", sha256("step one\n"))

    # The API writes; the tool sees it.
    memories.update(m.id, memory_store_id=store.id, content="step one\nstep two\n")
    out = tool({"command": "view", "path": "/memories/projects/plan.md"})
    assert out["content"] == (
        "Here's the content of /memories/projects/plan.md with line numbers:\n     1\tstep one\n     2\tstep two"
    )
    api_made = memories.create(store.id, path="/projects/notes.md", content="n")
    out = tool({"command": "view", "path": "/memories"})
    assert "/memories/projects/notes.md" in out["content"] and not out["is_error"]

    # The tool edits and renames; the API sees the same memory, id kept, with a version each.
    tool({"command": "str_replace", "path": "/memories/projects/plan.md", "old_str": "two", "new_str": "2"})
    assert memories.retrieve(m.id, memory_store_id=store.id).content == "step one\nstep 2\n"
    out = tool({"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/done"})
    assert out["is_error"] is False
    moved = memories.retrieve(m.id, memory_store_id=store.id)
    assert (moved.id, moved.path) == (m.id, "/done/plan.md")
    assert memories.retrieve(api_made.id, memory_store_id=store.id).path == "/done/notes.md"
    ops = [v.operation for v in admin.beta.memory_stores.memory_versions.list(store.id, memory_id=m.id)]
    assert ops == ["created", "modified", "modified", "modified"]

    # A precondition taken before a tool write is stale after it.
    before = memories.retrieve(m.id, memory_store_id=store.id)
    tool({"command": "insert", "path": "/memories/done/plan.md", "insert_line": 0, "insert_text": "title\n"})
    with pytest.raises(anthropic.ConflictError):
        memories.update(
            m.id,
            memory_store_id=store.id,
            content="clobber",
            precondition={"type": "content_sha256", "content_sha256": before.content_sha256},
        )
    assert memories.retrieve(m.id, memory_store_id=store.id).content == "title\nstep one\nstep 2\n"

    # The tool deletes a directory: one `deleted` version per memory; the API finds neither.
    tool({"command": "delete", "path": "/memories/done"})
    for gone in (m.id, api_made.id):
        with pytest.raises(anthropic.NotFoundError):
            memories.retrieve(gone, memory_store_id=store.id)
        last = list(admin.beta.memory_stores.memory_versions.list(store.id, memory_id=gone))[-1]
        assert last.operation == "deleted" and last.created_by.api_key_id == served.admin_id
    out = tool({"command": "view", "path": "/memories"})
    assert out["content"].endswith("0B\t/memories")
    # An API delete is seen by the tool too.
    x = memories.create(store.id, path="/x.md", content="x")
    memories.delete(x.id, memory_store_id=store.id)
    assert tool({"command": "view", "path": "/memories/x.md"})["is_error"] is True


def test_a_store_the_tool_wrote_is_a_memory_store(served, admin):
    out = served.tool(admin, "alice", {"command": "create", "path": "/memories/a.md", "file_text": "hi"})
    assert out["is_error"] is False
    s = admin.beta.memory_stores.retrieve("alice")
    assert (s.id, s.name, s.description, s.metadata, s.archived_at) == ("alice", "alice", "", {}, None)
    assert "alice" in [x.id for x in admin.beta.memory_stores.list()]
    [m] = list(admin.beta.memory_stores.memories.list("alice"))
    assert m.path == "/a.md" and m.memory_store_id == "alice"


def test_a_store_key_reaches_its_own_store_only(served, admin):
    mine = admin.beta.memory_stores.create(name="mine")
    theirs = admin.beta.memory_stores.create(name="theirs")
    their_memory = admin.beta.memory_stores.memories.create(theirs.id, path="/t.md", content="t")
    key_id, key = served.add_key("--store", mine.id)
    with served.client(key) as client:
        stores = client.beta.memory_stores
        assert stores.retrieve(mine.id).name == "mine"
        m = stores.memories.create(mine.id, path="/m.md", content="m")
        [v] = stores.memory_versions.list(mine.id).data
        assert v.created_by.type == "api_actor" and v.created_by.api_key_id == key_id
        assert [x.id for x in stores.memory_versions.list(mine.id, api_key_id=key_id)] == [v.id]

        # Another store: 404, byte for byte the answer for a store that does not exist.
        def answer(store_id):
            with pytest.raises(anthropic.NotFoundError) as e:
                stores.retrieve(store_id)
            return e.value.response.content

        assert answer(theirs.id) == answer("memstore_000000000000000000000000")
        for call in (
            lambda: stores.memories.list(theirs.id),
            lambda: stores.memories.retrieve(their_memory.id, memory_store_id=theirs.id),
            lambda: stores.memories.create(theirs.id, path="/x.md", content="x"),
            lambda: stores.memory_versions.list(theirs.id),
            lambda: stores.archive(theirs.id),
            lambda: stores.delete(theirs.id),
        ):
            with pytest.raises(anthropic.NotFoundError):
                call()
        # Creating and listing stores needs an admin key.
        with pytest.raises(anthropic.PermissionDeniedError):
            stores.create(name="more")
        with pytest.raises(anthropic.PermissionDeniedError):
            stores.list()
        # The tool route of the other store: the same 404.
        with pytest.raises(anthropic.NotFoundError):
            served.tool(client, theirs.id, {"command": "view", "path": "/memories"})
        assert served.tool(client, mine.id, {"command": "view", "path": "/memories/m.md"})["is_error"] is False
    assert admin.beta.memory_stores.retrieve(theirs.id).archived_at is None
    assert admin.beta.memory_stores.memories.retrieve(m.id, memory_store_id=mine.id).content == "m"

    with served.client("mkv_" + "0" * 64) as stranger:
        with pytest.raises(anthropic.AuthenticationError):
            stranger.beta.memory_stores.retrieve(mine.id)


def test_keyless_only_with_no_auth(tmp_path):
    # No key and no --no-auth: nothing is served (the SDK sees 401), revoking the last key
    # included.
    with Served(tmp_path / "closed.redb") as served:
        with served.client("unused") as client:
            with pytest.raises(anthropic.AuthenticationError, match="no API key exists"):
                client.beta.memory_stores.list()
        key_id, key = served.add_key("--admin")
        with served.client(key) as admin:
            admin.beta.memory_stores.list()
        subprocess.run(
            [BIN, "--db", served.db, "keys", "revoke", key_id], check=True, timeout=TIMEOUT, capture_output=True
        )
        # The server sees the revocation at its next look at the keys file, within a second.
        deadline = time.monotonic() + 10
        with served.client(key) as admin:
            while True:
                try:
                    admin.beta.memory_stores.list()
                except anthropic.AuthenticationError as e:
                    assert "no API key exists" in str(e)
                    break
                assert time.monotonic() < deadline, "the revoked key still works"
                time.sleep(0.1)
    with Served(tmp_path / "open.redb", ["--no-auth"]) as served:
        with served.client("unused") as client:
            s = client.beta.memory_stores.create(name="open")
            m = client.beta.memory_stores.memories.create(s.id, path="/a.md", content="a")
            [v] = client.beta.memory_stores.memory_versions.list(s.id).data
            assert v.memory_id == m.id and v.created_by is None
            assert [x.id for x in client.beta.memory_stores.list()] == [s.id]


def test_errors_in_the_api_envelope(served, store):
    # Raw HTTP, to see the envelope and statuses as sent.
    base = f"{served.url}/v1/memory_stores/{store.id}"
    headers = {"x-api-key": served.admin_key, "anthropic-beta": "agent-memory-2026-07-22"}
    with httpx2.Client(timeout=30) as http:
        r = http.post(f"{base}/memories?beta=true", headers=headers, json={"path": "/a.md", "content": "a"})
        assert r.status_code == 200, r.text
        m = r.json()
        r = http.post(f"{base}/memories", headers=headers, json={"path": "/a.md", "content": "a"})
        assert r.status_code == 409 and r.json()["error"]["type"] == "invalid_request_error"
        assert set(r.json()) == {"type", "error"} and r.json()["type"] == "error"
        r = http.post(f"{base}/memories", headers=headers, json={"path": "/b.md", "content": "b", "extra": 1})
        assert r.status_code == 400
        r = http.post(f"{base}/memories", headers=headers, content=b"{not json", )
        assert r.status_code == 400
        r = http.post(f"{base}/memories", headers=headers, json={"path": "/b.md"})
        assert r.status_code == 400 and "content" in r.json()["error"]["message"]
        r = http.get(f"{base}/memories/{m['id']}", headers={"x-api-key": "wrong"})
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        r = http.put(f"{base}/memories/{m['id']}", headers=headers, json={})
        assert r.status_code == 405
        r = http.get(f"{base}/memories", headers=headers)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert r.headers["request-id"].startswith("req_")
        # The metrics label requests by route pattern, never by store or memory id.
        metrics = http.get(f"{served.url}/metrics", headers=headers).text
        assert 'route="/v1/memory_stores/{memory_store_id}/memories"' in metrics
        assert store.id not in metrics
