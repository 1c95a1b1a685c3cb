"""The anthropic SDK's own memory sync (`SessionMemoryStores`, what `EnvironmentWorker` runs for
a session's memory stores) keeping a sandbox directory and a `memkv serve` store in step, with
the SDK client's default retries: files written in the directory become memories (versions by
the worker's key), memory-tool writes reach the directory, an edit on both sides ends as the SDK
documents (the server's version wins), and memkv's 409 and 400 answers are never retried.

The sync's cadence and its delete window are read from the SDK module's clock, which the tests
move forward instead of waiting."""

import asyncio
import logging

import anthropic
import pytest
from anthropic.lib.tools import _memories
from anthropic.lib.tools._memories import MARKER_PATH, SessionMemoryStores
from anthropic.types.beta import BetaManagedAgentsSession
from anthropic.types.beta.sessions import BetaManagedAgentsMemoryStoreResource

from conftest import TIMEOUT, Served, sha256

MEMORY_ROUTE = 'route="/v1/memory_stores/{memory_store_id}/memories/{memory_id}"'
MEMORIES_ROUTE = 'route="/v1/memory_stores/{memory_store_id}/memories"'


class Clock:
    """Stands in for `time.monotonic` in the SDK's sync module."""

    def __init__(self):
        self.now = 1_000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(_memories, "monotonic", clock)
    return clock


def session(store_id, mount):
    """The session the worker would fetch from the sessions API, which memkv does not serve: its
    memory-store resources are all `SessionMemoryStores` reads."""
    return BetaManagedAgentsSession.model_construct(
        resources=[
            BetaManagedAgentsMemoryStoreResource(
                type="memory_store", memory_store_id=store_id, mount_path=str(mount), access="read_write"
            )
        ]
    )


def test_sandbox_and_store_stay_in_step(tmp_path, clock, caplog):
    caplog.set_level(logging.INFO, logger="anthropic.lib.tools.agent_toolset")
    with Served(tmp_path / "memkv.redb", log=tmp_path / "serve.log") as served:
        _, admin_key = served.add_key("--admin")
        admin = served.client(admin_key)
        store = admin.beta.memory_stores.create(name="sandbox")
        worker_id, worker_key = served.add_key("--store", store.id)
        memories = admin.beta.memory_stores.memories

        def tool(command):
            out = served.tool(admin, store.id, command)
            assert out["is_error"] is False, out
            return out["content"]

        def remote():
            return {m.path: m.content for m in memories.list(store.id, view="full")}

        tool({"command": "create", "path": "/memories/notes/today.md", "file_text": "remote v1\n"})
        mount = tmp_path / "sandbox" / "memories"
        race = {"armed": False}

        async def before_send(request):
            # Once armed, the memory tool edits plan.md after the sync has listed it and before
            # its upload (whose precondition is the listed sha) reaches the server.
            if race["armed"] and request.method == "POST" and request.url.path.rsplit("/", 2)[-2] == "memories":
                race["armed"] = False
                tool({"command": "str_replace", "path": "/memories/plan.md", "old_str": "sandbox", "new_str": "tool"})

        async def run():
            http = anthropic.DefaultAsyncHttpxClient(event_hooks={"request": [before_send]})
            # The SDK's default retries (2): any retried refusal would show in the server's log.
            client = anthropic.AsyncAnthropic(api_key=worker_key, base_url=served.url, timeout=TIMEOUT, http_client=http)
            sync = SessionMemoryStores(client, workdir=tmp_path / "work")

            async def sync_now():
                clock.now += 15
                await sync.sync_if_due()

            # Download: the store's memories, and the marker naming the store.
            await sync.download(session(store.id, mount))
            assert (mount / "notes" / "today.md").read_text() == "remote v1\n"
            assert (mount / MARKER_PATH).read_text() == f"version 1\n{store.id}"

            # A file written in the sandbox becomes a memory, its version by the worker's key.
            (mount / "plan.md").write_text("from the sandbox\n")
            await sync_now()
            assert remote()["/plan.md"] == "from the sandbox\n"
            [plan] = [m for m in memories.list(store.id) if m.path == "/plan.md"]
            [v] = admin.beta.memory_stores.memory_versions.list(store.id, memory_id=plan.id)
            assert (v.operation, v.created_by.api_key_id) == ("created", worker_id)
            assert tool({"command": "view", "path": "/memories/plan.md"}).endswith("1\tfrom the sandbox")

            # Memory-tool writes reach the sandbox.
            tool({"command": "create", "path": "/memories/notes/tomorrow.md", "file_text": "later\n"})
            tool({"command": "str_replace", "path": "/memories/notes/today.md", "old_str": "v1", "new_str": "v2"})
            await sync_now()
            assert (mount / "notes" / "tomorrow.md").read_text() == "later\n"
            assert (mount / "notes" / "today.md").read_text() == "remote v2\n"

            # Both sides edit before a sync: the server's version wins, on both sides.
            (mount / "notes" / "today.md").write_text("sandbox edit\n")
            tool({"command": "str_replace", "path": "/memories/notes/today.md", "old_str": "v2", "new_str": "v3"})
            await sync_now()
            assert (mount / "notes" / "today.md").read_text() == "remote v3\n"
            assert remote()["/notes/today.md"] == "remote v3\n"

            # Both sides edit during a sync: the upload's precondition fails (409, sent once), the
            # sandbox's edit loses and the next sync brings the tool's.
            (mount / "plan.md").write_text("from the sandbox, edited\n")
            race["armed"] = True
            await sync_now()
            assert race["armed"] is False
            assert remote()["/plan.md"] == "from the tool\n"
            await sync_now()
            assert (mount / "plan.md").read_text() == "from the tool\n"

            # A file over memkv's --max-file-bytes is refused (400, sent once) and left out; the
            # rest goes on syncing.
            (mount / "big.md").write_text("x" * 200_000)
            (mount / "small.md").write_text("fits\n")
            await sync_now()
            await sync_now()
            files = remote()
            assert "/big.md" not in files and files["/small.md"] == "fits\n"

            # A file deleted in the sandbox is deleted in memkv once the SDK's window has passed.
            (mount / "notes" / "tomorrow.md").unlink()
            await sync_now()
            assert "/notes/tomorrow.md" in remote()
            clock.now += _memories.DELETE_CORROBORATION_SECONDS
            await sync_now()
            assert "/notes/tomorrow.md" not in remote()

            await sync.finish()
            await sync.dispose()
            await client.close()

        asyncio.run(run())
        admin.close()
        served.stop()

        # Each refusal was sent once: no retry of a 409 or a 400.
        conflicts = served.requests(409)
        assert len(conflicts) == 1 and MEMORY_ROUTE in conflicts[0], conflicts
        refused = served.requests(400)
        assert len(refused) == 1 and MEMORIES_ROUTE in refused[0], refused
        assert not served.requests(500) and not served.requests(503)

    messages = [r.getMessage() for r in caplog.records]
    assert any("the upload was refused and the local edit loses" in m for m in messages), messages
    assert any("the server rejected this memory file" in m and "big.md" in m for m in messages), messages


def test_refusals_say_not_to_retry(served, admin, store):
    """The header behind the SDKs' decision, on each kind of refusal, and the decision itself: a
    client with default retries sends a conflicting update once."""
    m = admin.beta.memory_stores.memories.create(store.id, path="/a.md", content="one")
    stale = {"type": "content_sha256", "content_sha256": sha256("other")}
    with served.client(served.admin_key).with_options(max_retries=2) as retrying:
        with pytest.raises(anthropic.ConflictError) as conflict:
            retrying.beta.memory_stores.memories.update(m.id, memory_store_id=store.id, content="two", precondition=stale)
        assert conflict.value.response.headers["x-should-retry"] == "false"
        with pytest.raises(anthropic.ConflictError) as taken:
            retrying.beta.memory_stores.memories.create(store.id, path="/a.md", content="again")
        assert taken.value.response.headers["x-should-retry"] == "false"
        with pytest.raises(anthropic.NotFoundError) as missing:
            retrying.beta.memory_stores.memories.retrieve("mem_missing", memory_store_id=store.id)
        assert missing.value.response.headers["x-should-retry"] == "false"
    with served.client("not-a-key") as stranger:
        with pytest.raises(anthropic.AuthenticationError) as unauthenticated:
            stranger.beta.memory_stores.list()
        assert unauthenticated.value.response.headers["x-should-retry"] == "false"
    # A success carries no advice.
    assert "x-should-retry" not in admin.beta.memory_stores.with_raw_response.retrieve(store.id).headers
