"""The anthropic SDK's write-through (2.17.0 on) against `memkv serve`: in a session with a memory
store attached, the agent's `write` and `edit` of a file in the store's folder go to the store
first (`SessionMemoryStores.write_file`), and the file is written only once memkv has saved the
change. A refusal reaches the agent as the tool's error, memkv's own message word for word, and
the file stays as it was.

Driven as `EnvironmentWorker` drives it: the SDK's own file tools on an `AgentToolContext` whose
memory writes go to `write_file` under the lock the syncs also take. Skipped before 2.17.0, which
has no write-through (tools/test-memory-stores.sh runs it in its current-SDK run)."""

import asyncio
import json
from functools import partial

import anthropic
import anyio
import pytest
from anthropic.lib.tools import _memories
from anthropic.lib.tools._beta_functions import ToolError
from anthropic.lib.tools.agent_toolset import AgentToolContext, beta_edit_tool, beta_write_tool
from anthropic.lib.tools._memories import SessionMemoryStores

from conftest import TIMEOUT, Served
from test_sandbox_sync import session

SDK = tuple(int(part) for part in anthropic.__version__.split(".")[:2])
pytestmark = pytest.mark.skipif(SDK < (2, 17), reason=f"anthropic {anthropic.__version__} has no write-through")


def test_agent_writes_reach_memkv_before_the_file(tmp_path):
    with Served(tmp_path / "memkv.redb") as served:
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

        tool({"command": "create", "path": "/memories/notes.md", "file_text": "- likes tea\n"})
        mount = tmp_path / "sandbox" / "memories"
        # memkv's message of each refusal, as it left the server.
        refusals = []

        async def on_response(response):
            if response.status_code >= 400:
                await response.aread()
                refusals.append((response.status_code, json.loads(response.content)["error"]["message"]))

        async def run():
            http = anthropic.DefaultAsyncHttpxClient(event_hooks={"response": [on_response]})
            client = anthropic.AsyncAnthropic(api_key=worker_key, base_url=served.url, timeout=TIMEOUT, http_client=http)
            stores = SessionMemoryStores(client, workdir=tmp_path / "work")
            await stores.download(session(store.id, mount))
            # What the worker does for a session's file tools.
            ctx = AgentToolContext(workdir=str(tmp_path / "work"), allowed_roots=stores.roots)
            ctx._write_memory_file = partial(stores.write_file, lock=anyio.Lock())
            write, edit = beta_write_tool(ctx), beta_edit_tool(ctx)

            async def agent(tool, **input):
                """What the agent reads back: the tool's result, or its error."""
                try:
                    return await tool.call(input)
                except ToolError as e:
                    return f"ERROR {e.content}"

            # A new file becomes a memory, its version by the worker's key, and then a file.
            plan = str(mount / "plan.md")
            assert await agent(write, file_path=plan, content="step 1\n") == f"wrote 7 bytes to {plan}"
            assert remote()["/plan.md"] == "step 1\n"
            [created] = [m for m in memories.list(store.id) if m.path == "/plan.md"]
            [v] = admin.beta.memory_stores.memory_versions.list(store.id, memory_id=created.id)
            assert (v.operation, v.created_by.api_key_id) == ("created", worker_id)
            assert (mount / "plan.md").read_text() == "step 1\n"

            # An edit is an update under the precondition of the content last synced.
            assert await agent(edit, file_path=plan, old_string="1", new_string="2") == f"edited {plan} (1 replacement(s))"
            assert remote()["/plan.md"] == "step 2\n"
            assert tool({"command": "view", "path": "/memories/plan.md"}).endswith("1\tstep 2")

            # The memory changed on the server since the last sync: memkv's 409 reaches the agent,
            # the edit is not made anywhere, and the SDK pulls the server's version into the file.
            tool({"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "green tea"})
            notes = str(mount / "notes.md")
            answer = await agent(edit, file_path=notes, old_string="tea", new_string="coffee")
            [(status, message)] = refusals
            assert status == 409
            assert answer == (
                f"ERROR edit: {notes}: not saved to memory, so the change was not made: {message}. "
                "Read the file again before you retry."
            )
            assert remote()["/notes.md"] == "- likes green tea\n"
            assert (mount / "notes.md").read_text() == "- likes green tea\n"

            # A path the memory tool took since the last sync: the create's 409, the same way.
            tool({"command": "create", "path": "/memories/todo.md", "file_text": "from the tool\n"})
            todo = str(mount / "todo.md")
            answer = await agent(write, file_path=todo, content="from the agent\n")
            (status, message) = refusals[-1]
            assert (len(refusals), status) == (2, 409)
            assert answer == (
                f"ERROR write: {todo}: not saved to memory, so the change was not made: {message}. "
                "Read the file again before you retry."
            )
            assert remote()["/todo.md"] == "from the tool\n"
            assert (mount / "todo.md").read_text() == "from the tool\n"

            # Over memkv's --max-file-bytes: the 400's message, and no file.
            big = str(mount / "big.md")
            answer = await agent(write, file_path=big, content="x" * 200_000)
            (status, message) = refusals[-1]
            assert (len(refusals), status) == (3, 400)
            assert answer == f"ERROR write: {big}: not saved to memory, so the change was not made: {message}"
            assert not (mount / "big.md").exists() and "/big.md" not in remote()

            await stores.finish()
            await stores.dispose()
            await client.close()

        asyncio.run(run())
        admin.close()
    # The refused writes were each sent once: memkv's 4xx carry `x-should-retry: false`.
    assert [status for status, _ in refusals] == [409, 409, 400]
    assert _memories.NOT_SAVED == "not saved to memory, so the change was not made"
