"""Memories through the real SDK: create, retrieve, update (content, rename, preconditions),
delete (with and without the expected hash), and listing: paging through 250 memories,
`path_prefix` on whole segments, `depth` roll-ups, `view`."""

import math

import anthropic
import pytest
from conftest import sha256


def test_create_retrieve_update_delete(admin, store):
    memories = admin.beta.memory_stores.memories
    m = memories.create(store.id, path="/notes.md", content="Prefers tabs.\n")
    assert m.type == "memory" and m.id.startswith("mem_") and m.memory_version_id.startswith("memver_")
    assert (m.memory_store_id, m.path) == (store.id, "/notes.md")
    # create defaults to view=basic: no content, but its hash and size.
    assert m.content is None
    assert (m.content_sha256, m.content_size_bytes) == (sha256("Prefers tabs.\n"), 14)
    # retrieve defaults to view=full.
    got = memories.retrieve(m.id, memory_store_id=store.id)
    assert got.content == "Prefers tabs.\n" and got.id == m.id and got.path == "/notes.md"
    assert memories.retrieve(m.id, memory_store_id=store.id, view="basic").content is None
    full = memories.create(store.id, path="/full.md", content="ü", view="full")
    assert (full.content, full.content_size_bytes, full.content_sha256) == ("ü", 2, sha256("ü"))
    empty = memories.create(store.id, path="/empty.md", content="")
    assert (empty.content_size_bytes, empty.content_sha256) == (0, sha256(""))

    # Content, under a precondition that holds.
    u = memories.update(
        m.id,
        memory_store_id=store.id,
        content="Prefers spaces.\n",
        precondition={"type": "content_sha256", "content_sha256": m.content_sha256},
    )
    assert u.id == m.id and u.content is None and u.content_sha256 == sha256("Prefers spaces.\n")
    assert u.memory_version_id != m.memory_version_id
    # A stale precondition: 409, nothing changes.
    with pytest.raises(anthropic.ConflictError) as e:
        memories.update(
            m.id,
            memory_store_id=store.id,
            content="lost update",
            precondition={"type": "content_sha256", "content_sha256": m.content_sha256},
        )
    assert e.value.status_code == 409
    assert memories.retrieve(m.id, memory_store_id=store.id).content == "Prefers spaces.\n"

    # A rename keeps the id (the precondition still refers to the content).
    r = memories.update(
        m.id,
        memory_store_id=store.id,
        path="/people/alice.md",
        precondition={"type": "content_sha256", "content_sha256": u.content_sha256},
        view="full",
    )
    assert (r.id, r.path, r.content) == (m.id, "/people/alice.md", "Prefers spaces.\n")
    assert memories.retrieve(m.id, memory_store_id=store.id).path == "/people/alice.md"
    # Onto a taken path, or a create at one: 409.
    with pytest.raises(anthropic.ConflictError):
        memories.update(m.id, memory_store_id=store.id, path="/full.md")
    with pytest.raises(anthropic.ConflictError):
        memories.create(store.id, path="/people/alice.md", content="again")

    # Delete with a stale hash: 409 and nothing deleted; with the right one: gone.
    with pytest.raises(anthropic.ConflictError):
        memories.delete(m.id, memory_store_id=store.id, expected_content_sha256=m.content_sha256)
    assert memories.retrieve(m.id, memory_store_id=store.id).id == m.id
    d = memories.delete(m.id, memory_store_id=store.id, expected_content_sha256=u.content_sha256)
    assert (d.type, d.id) == ("memory_deleted", m.id)
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve(m.id, memory_store_id=store.id)
    with pytest.raises(anthropic.NotFoundError):
        memories.delete(m.id, memory_store_id=store.id)
    # Unconditional delete.
    memories.delete(empty.id, memory_store_id=store.id)
    assert [x.path for x in memories.list(store.id)] == ["/full.md"]


@pytest.mark.parametrize("path", ["notes.md", "/", "/a/../b.md", "/a//b.md", "/bad\x00name"])
def test_bad_paths_are_refused(admin, store, path):
    with pytest.raises(anthropic.BadRequestError):
        admin.beta.memory_stores.memories.create(store.id, path=path, content="x")
    assert list(admin.beta.memory_stores.memories.list(store.id)) == []


def test_bad_ids_and_hashes(admin, store):
    memories = admin.beta.memory_stores.memories
    m = memories.create(store.id, path="/a.md", content="a")
    for bad in ["mem_nope", "memver_0000000000000001", "x"]:
        with pytest.raises(anthropic.NotFoundError):
            memories.retrieve(bad, memory_store_id=store.id)
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve(m.id, memory_store_id="memstore_000000000000000000000000")
    with pytest.raises(anthropic.BadRequestError):
        memories.delete(m.id, memory_store_id=store.id, expected_content_sha256="ABC")
    with pytest.raises(anthropic.BadRequestError):
        memories.update(m.id, memory_store_id=store.id, content="b", precondition={"type": "content_sha256", "content_sha256": "zz"})
    with pytest.raises(anthropic.BadRequestError):
        memories.update(m.id, memory_store_id=store.id, content="b", precondition={"type": "etag"})
    assert memories.retrieve(m.id, memory_store_id=store.id).content == "a"


def test_paging_through_250_memories(admin, store):
    memories = admin.beta.memory_stores.memories
    paths = sorted(f"/bulk/d{i % 10}/m{i:03}.md" for i in range(250))
    for p in paths:
        memories.create(store.id, path=p, content=p)
    # Neighbours that a prefix of /bulk/ must not match, and a memory at the top.
    memories.create(store.id, path="/bulk-archive/old.md", content="old")
    memories.create(store.id, path="/bulkfile.md", content="b")
    memories.create(store.id, path="/top.md", content="t")

    limit = 37
    seen, page, pages = [], memories.list(store.id, path_prefix="/bulk/", limit=limit), 0
    while True:
        pages += 1
        assert pages <= 20
        assert len(page.data) <= limit
        for item in page.data:
            assert item.type == "memory" and item.content is None
            assert item.content_sha256 == sha256(item.path)
        seen += [item.path for item in page.data]
        if not page.has_next_page():
            break
        page = page.get_next_page()
    assert seen == paths
    assert pages == math.ceil(250 / limit)

    # The default limit is 20; auto-pagination walks every page.
    first = memories.list(store.id, path_prefix="/bulk/d3/")
    assert len(first.data) == 20 and first.next_page
    assert [m.path for m in memories.list(store.id, path_prefix="/bulk/d3/")] == [p for p in paths if p.startswith("/bulk/d3/")]

    # view=full: content, at most 20 a page whatever the limit.
    full = memories.list(store.id, path_prefix="/bulk/", view="full", limit=100)
    assert 0 < len(full.data) <= 20 and all(m.content == m.path for m in full.data)
    assert len(memories.list(store.id, path_prefix="/bulk/", limit=100).data) == 100

    # depth=1 at the root: the top-level memories and one prefix per directory.
    top = memories.list(store.id, depth=1, limit=100)
    # Path order is segment order: "bulk" < "bulk-archive" < "bulkfile.md".
    assert [(i.type, i.path) for i in top.data] == [
        ("memory_prefix", "/bulk/"),
        ("memory_prefix", "/bulk-archive/"),
        ("memory", "/bulkfile.md"),
        ("memory", "/top.md"),
    ]
    assert top.next_page is None
    # depth=1 below /bulk/: ten directories, each a prefix to drill into.
    dirs = memories.list(store.id, path_prefix="/bulk/", depth=1, limit=100)
    assert [(i.type, i.path) for i in dirs.data] == [("memory_prefix", f"/bulk/d{i}/") for i in range(10)]
    inner = memories.list(store.id, path_prefix=dirs.data[4].path, depth=1, limit=100)
    assert [i.path for i in inner.data] == [p for p in paths if p.startswith("/bulk/d4/")]
    # Prefixes count toward the limit and page like memories.
    two = memories.list(store.id, path_prefix="/bulk/", depth=1, limit=3)
    assert len(two.data) == 3 and two.next_page
    assert [i.path for i in memories.list(store.id, path_prefix="/bulk/", depth=1, limit=3)] == [
        f"/bulk/d{i}/" for i in range(10)
    ]
    # depth=2 reaches the memories again.
    assert len(list(memories.list(store.id, path_prefix="/bulk/", depth=2, limit=100))) == 250
    # A prefix with nothing below it: an empty page.
    assert list(memories.list(store.id, path_prefix="/nothing/here/")) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"limit": 0},
        {"limit": 101},
        {"view": "everything"},
        {"path_prefix": "/bulk"},
        {"path_prefix": "bulk/"},
        {"depth": -1},
        {"page": "garbage"},
    ],
)
def test_list_refuses_bad_parameters(admin, store, kwargs):
    with pytest.raises(anthropic.BadRequestError):
        admin.beta.memory_stores.memories.list(store.id, **kwargs)
