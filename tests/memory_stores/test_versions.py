"""Memory versions through the real SDK: every change recorded with its author, listing with
filters and paging, the versions of a deleted memory, redaction; and an archived store."""

import anthropic
import pytest
from conftest import sha256


def history(admin, store_id, **filters):
    """Every version the listing gives (oldest first), paging two at a time, bounded."""
    versions = admin.beta.memory_stores.memory_versions
    out, page = [], versions.list(store_id, limit=2, **filters)
    for _ in range(100):
        out += page.data
        if not page.has_next_page():
            return out
        page = page.get_next_page()
    raise AssertionError("more than 100 pages")


def test_every_change_is_a_version(served, admin, store):
    memories = admin.beta.memory_stores.memories
    versions = admin.beta.memory_stores.memory_versions
    m = memories.create(store.id, path="/a.md", content="one")
    memories.update(m.id, memory_store_id=store.id, content="two")
    memories.update(m.id, memory_store_id=store.id, path="/b/a.md")
    other = memories.create(store.id, path="/other.md", content="x")
    memories.delete(m.id, memory_store_id=store.id)

    mine = history(admin, store.id, memory_id=m.id)
    assert [v.operation for v in mine] == ["created", "modified", "modified", "deleted"]
    assert [v.path for v in mine] == ["/a.md", "/a.md", "/b/a.md", "/b/a.md"]
    assert all(v.memory_id == m.id and v.memory_store_id == store.id and v.type == "memory_version" for v in mine)
    # Oldest first, ids distinct and increasing; the first is the one create answered.
    assert [v.id for v in mine] == sorted({v.id for v in mine})
    assert mine[0].id == m.memory_version_id
    assert [v.created_at for v in mine] == sorted(v.created_at for v in mine)
    # Listing is basic by default: hashes and sizes, no content; a deleted version has neither.
    assert [v.content for v in mine] == [None] * 4
    assert [v.content_sha256 for v in mine] == [sha256("one"), sha256("two"), sha256("two"), None]
    assert [v.content_size_bytes for v in mine] == [3, 3, 3, None]
    # The author: the admin key that made each change.
    assert all(v.created_by.type == "api_actor" and v.created_by.api_key_id == served.admin_id for v in mine)
    assert all(v.redacted_at is None and v.redacted_by is None for v in mine)

    # view=full carries content; retrieve defaults to full.
    full = versions.list(store.id, memory_id=m.id, view="full")
    assert [v.content for v in full.data] == ["one", "two", "two", None]
    created = versions.retrieve(mine[0].id, memory_store_id=store.id)
    assert (created.operation, created.content, created.path) == ("created", "one", "/a.md")
    assert versions.retrieve(mine[0].id, memory_store_id=store.id, view="basic").content is None

    # Filters.
    assert [v.memory_id for v in history(admin, store.id, operation="created")] == [m.id, other.id]
    assert [v.id for v in history(admin, store.id, operation="deleted")] == [mine[-1].id]
    assert len(history(admin, store.id)) == 5
    assert len(history(admin, store.id, api_key_id=served.admin_id)) == 5
    assert history(admin, store.id, api_key_id="key_000000000000") == []
    assert history(admin, store.id, session_id="sesn_x") == []
    assert history(admin, store.id, service_account_id="svac_x") == []
    newest = mine[-1].created_at
    assert mine[-1].id in [v.id for v in history(admin, store.id, created_at_gte=newest)]
    assert all(v.created_at >= newest for v in history(admin, store.id, created_at_gte=newest))
    oldest = mine[0].created_at
    assert mine[0].id in [v.id for v in history(admin, store.id, created_at_lte=oldest)]
    assert all(v.created_at <= oldest for v in history(admin, store.id, created_at_lte=oldest))

    with pytest.raises(anthropic.BadRequestError):
        versions.list(store.id, operation="renamed")
    with pytest.raises(anthropic.BadRequestError):
        versions.list(store.id, page="garbage")
    with pytest.raises(anthropic.NotFoundError):
        versions.retrieve("memver_nope", memory_store_id=store.id)


def test_redaction(served, admin, store):
    memories = admin.beta.memory_stores.memories
    versions = admin.beta.memory_stores.memory_versions
    m = memories.create(store.id, path="/secret.md", content="the password is hunter2")
    memories.update(m.id, memory_store_id=store.id, content="no secrets here")
    first = history(admin, store.id, memory_id=m.id)[0]

    r = versions.redact(first.id, memory_store_id=store.id)
    assert r.id == first.id and r.operation == "created"
    assert (r.content, r.path, r.content_sha256, r.content_size_bytes) == (None, None, None, None)
    assert r.redacted_at is not None and r.redacted_at >= first.created_at
    assert r.redacted_by.type == "api_actor" and r.redacted_by.api_key_id == served.admin_id
    # The author is kept.
    assert r.created_by == first.created_by
    again = versions.retrieve(first.id, memory_store_id=store.id)
    assert (again.content, again.path, again.redacted_at) == (None, None, r.redacted_at)
    # The memory itself is untouched.
    assert memories.retrieve(m.id, memory_store_id=store.id).content == "no secrets here"
    with pytest.raises(anthropic.NotFoundError):
        versions.redact("memver_nope", memory_store_id=store.id)

    # The current version of a live memory: refused (409, nothing changed), since the memory
    # would go on serving the content through the tool and GET; once the memory is updated or
    # deleted, that version can be redacted.
    current = history(admin, store.id, memory_id=m.id)[-1]
    with pytest.raises(anthropic.ConflictError, match="update the memory .* or delete it first"):
        versions.redact(current.id, memory_store_id=store.id)
    assert versions.retrieve(current.id, memory_store_id=store.id).redacted_at is None
    memories.delete(m.id, memory_store_id=store.id)
    assert versions.redact(current.id, memory_store_id=store.id).redacted_at is not None


def test_an_archived_store_refuses_writes(served, admin, store):
    stores = admin.beta.memory_stores
    memories = stores.memories
    keep = memories.create(store.id, path="/keep.md", content="k")
    drop = memories.create(store.id, path="/drop.md", content="d")
    stores.archive(store.id)

    with pytest.raises(anthropic.ConflictError):
        memories.create(store.id, path="/new.md", content="n")
    with pytest.raises(anthropic.ConflictError):
        memories.update(keep.id, memory_store_id=store.id, content="changed")
    with pytest.raises(anthropic.ConflictError):
        memories.update(keep.id, memory_store_id=store.id, path="/moved.md")
    with pytest.raises(anthropic.BadRequestError):
        stores.update(store.id, description="changed")
    # The memory tool cannot write to it either.
    out = served.tool(admin, store.id, {"command": "create", "path": "/memories/tool.md", "file_text": "t"})
    assert out["is_error"] is True

    # Reads, deleting memories, redaction and deleting the store still work.
    assert memories.retrieve(keep.id, memory_store_id=store.id).content == "k"
    assert sorted(m.path for m in memories.list(store.id)) == ["/drop.md", "/keep.md"]
    memories.delete(drop.id, memory_store_id=store.id)
    assert [m.path for m in memories.list(store.id)] == ["/keep.md"]
    v = history(admin, store.id, memory_id=drop.id)[0]
    assert stores.memory_versions.redact(v.id, memory_store_id=store.id).redacted_at is not None
    stores.delete(store.id)
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve(keep.id, memory_store_id=store.id)
