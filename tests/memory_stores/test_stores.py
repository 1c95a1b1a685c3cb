"""Memory stores through the real SDK: create, retrieve, update, list with paging, archive,
delete, and the validation of names, descriptions and metadata."""

import re
from datetime import datetime, timezone

import anthropic
import pytest

RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_create_retrieve_update(admin):
    stores = admin.beta.memory_stores
    before = datetime.now(timezone.utc)
    s = stores.create(name="Alice's notes", description="What alice told us", metadata={"user": "alice", "tier": "1"})
    assert s.type == "memory_store"
    assert s.id.startswith("memstore_")
    assert (s.name, s.description, s.metadata) == ("Alice's notes", "What alice told us", {"user": "alice", "tier": "1"})
    assert s.archived_at is None
    assert s.created_at.tzinfo is not None and abs((s.created_at - before).total_seconds()) < 60
    assert stores.retrieve(s.id) == s

    # Times on the wire are RFC 3339 in UTC with milliseconds.
    raw = stores.with_raw_response.retrieve(s.id)
    assert raw.http_response.status_code == 200
    body = raw.http_response.json()
    assert RFC3339_MS.match(body["created_at"]) and RFC3339_MS.match(body["updated_at"]), body
    assert body["archived_at"] is None

    u = stores.update(s.id, name="Alice", metadata={"tier": None, "plan": "pro"})
    assert (u.name, u.description, u.metadata) == ("Alice", "What alice told us", {"user": "alice", "plan": "pro"})
    assert u.created_at == s.created_at and u.updated_at >= s.updated_at
    u = stores.update(s.id, description="")
    assert (u.name, u.description) == ("Alice", "")
    assert stores.retrieve(s.id) == u

    # Defaults: no description, no metadata.
    bare = stores.create(name="bare")
    assert (bare.description, bare.metadata) == ("", {})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": ""},
        {"name": "x" * 256},
        {"name": "line\nbreak"},
        {"name": "ok", "description": "d" * 1025},
        {"name": "ok", "metadata": {f"k{i}": "v" for i in range(17)}},
        {"name": "ok", "metadata": {"": "v"}},
        {"name": "ok", "metadata": {"k" * 65: "v"}},
        {"name": "ok", "metadata": {"k": "v" * 513}},
    ],
)
def test_create_refuses_what_the_api_does_not_take(admin, kwargs):
    with pytest.raises(anthropic.BadRequestError) as e:
        admin.beta.memory_stores.create(**kwargs)
    assert e.value.status_code == 400
    assert e.value.body["error"]["type"] == "invalid_request_error"


def test_limits_are_inclusive(admin):
    s = admin.beta.memory_stores.create(
        name="é" * 255, description="d" * 1024, metadata={f"{i:02d}" + "k" * 62: "v" * 512 for i in range(16)}
    )
    assert len(s.name) == 255 and len(s.metadata) == 16
    # An update may not take the metadata past 16 pairs; nothing changes then.
    with pytest.raises(anthropic.BadRequestError):
        admin.beta.memory_stores.update(s.id, metadata={"one more": "x"})
    assert admin.beta.memory_stores.retrieve(s.id) == s


def test_list_pages_archive_and_delete(admin):
    stores = admin.beta.memory_stores
    made = [stores.create(name=f"store {i}") for i in range(7)]
    ids = sorted(s.id for s in made)

    # Paging, two at a time: every store once, in id order, bounded.
    seen, page, pages = [], stores.list(limit=2), 0
    while True:
        pages += 1
        assert pages <= 10
        assert len(page.data) <= 2
        seen += [s.id for s in page.data]
        if not page.has_next_page():
            break
        page = page.get_next_page()
    assert seen == ids and pages == 4
    # Auto-pagination walks the same pages.
    assert [s.id for s in stores.list(limit=3)] == ids

    archived = stores.archive(made[0].id)
    assert archived.archived_at is not None and archived.updated_at >= made[0].updated_at
    again = stores.archive(made[0].id)
    assert again.archived_at == archived.archived_at
    assert made[0].id not in [s.id for s in stores.list()]
    assert made[0].id in [s.id for s in stores.list(include_archived=True)]
    # Archived stores are read-only: updating the store itself is a 400, as the SDK documents.
    with pytest.raises(anthropic.BadRequestError):
        stores.update(made[0].id, name="renamed")
    assert stores.retrieve(made[0].id).name == "store 0"

    # created_at filters are inclusive.
    t = made[3].created_at
    assert made[3].id in [s.id for s in stores.list(created_at_gte=t, created_at_lte=t)]
    later = stores.list(created_at_gte=made[-1].created_at)
    assert all(s.created_at >= made[-1].created_at for s in later.data)

    deleted = stores.delete(made[1].id)
    assert (deleted.type, deleted.id) == ("memory_store_deleted", made[1].id)
    with pytest.raises(anthropic.NotFoundError):
        stores.retrieve(made[1].id)
    with pytest.raises(anthropic.NotFoundError):
        stores.delete(made[1].id)
    # An archived store may be deleted.
    stores.delete(made[0].id)
    assert [s.id for s in stores.list(include_archived=True)] == sorted(s.id for s in made[2:])


@pytest.mark.parametrize(
    "kwargs", [{"limit": 0}, {"limit": 101}, {"page": "not-a-token"}, {"created_at_gte": "yesterday"}]
)
def test_list_refuses_bad_parameters(admin, kwargs):
    with pytest.raises(anthropic.BadRequestError):
        admin.beta.memory_stores.list(**kwargs)


def test_unknown_stores_are_not_found(admin):
    for bad in ["memstore_000000000000000000000000", "no such store", "x" * 300, "tab\there"]:
        with pytest.raises(anthropic.NotFoundError) as e:
            admin.beta.memory_stores.retrieve(bad)
        assert e.value.body["error"]["type"] == "not_found_error"
