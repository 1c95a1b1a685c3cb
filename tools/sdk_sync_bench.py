"""One sandbox's memory sync as the anthropic SDK's worker runs it (`SessionMemoryStores`), driven
line by line from stdin by the sync benchmark (crates/memkv-bench-compare/benches/sync.rs):

    download   the store downloaded into MOUNT (which must not exist yet); answers `ok SECONDS`
    sync       waits until a sync is due (the interval since the last), then times that
               `sync_if_due()`; answers `ok SECONDS`
    loop       from now on, `sync_if_due()` every --tick seconds, as the worker calls it after
               each tool call (a sync runs whenever the interval has passed); answers `ok`
    stop       the loop stopped (after the sync in progress, if any); answers `ok`
    quit       `dispose()` (which removes MOUNT), then exit

Usage: python tools/sdk_sync_bench.py --url URL --store ID --mount DIR --workdir DIR
       [--interval 5] [--tick 0.1]   (the key in $MEMKV_API_KEY)

Each answer is one line on stdout; the SDK's own log goes to stderr.
"""

import argparse
import logging
import os
import sys
import time

import anyio
from anthropic import AsyncAnthropic
from anthropic.lib.tools import _memories
from anthropic.lib.tools._memories import SessionMemoryStores
from anthropic.types.beta import BetaManagedAgentsSession
from anthropic.types.beta.sessions import BetaManagedAgentsMemoryStoreResource


def answer(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--mount", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--interval", type=float, default=_memories.MIN_MEMORY_SYNC_INTERVAL)
    p.add_argument("--tick", type=float, default=0.1)
    a = p.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

    client = AsyncAnthropic(api_key=os.environ["MEMKV_API_KEY"], base_url=a.url, timeout=60)
    stores = SessionMemoryStores(client, workdir=a.workdir, sync_interval=a.interval)
    session = BetaManagedAgentsSession.model_construct(
        resources=[
            BetaManagedAgentsMemoryStoreResource(
                type="memory_store", memory_store_id=a.store, mount_path=a.mount, access="read_write"
            )
        ]
    )
    # One sync at a time, as the worker's lock keeps them (docs/sandbox-sync.md).
    lock = anyio.Lock()
    looping = anyio.Event()
    stopped = anyio.Event()
    started = False

    async def loop() -> None:
        while not looping.is_set():
            async with lock:
                await stores.sync_if_due()
            await anyio.sleep(a.tick)
        stopped.set()

    async with anyio.create_task_group() as tg:
        while True:
            line = (await anyio.to_thread.run_sync(sys.stdin.readline)).strip()
            if line == "download":
                t = time.monotonic()
                await stores.download(session)
                answer(f"ok {time.monotonic() - t:.6f}")
            elif line == "sync":
                # The next sync_if_due that runs: after the interval, as the worker would.
                due = stores._last_sync + a.interval  # noqa: SLF001 (read only)
                await anyio.sleep(max(0.0, due - _memories.monotonic()) + 0.01)
                async with lock:
                    t = time.monotonic()
                    await stores.sync_if_due()
                    answer(f"ok {time.monotonic() - t:.6f}")
            elif line == "loop":
                tg.start_soon(loop)
                started = True
                answer("ok")
            elif line == "stop":
                looping.set()
                if started:
                    await stopped.wait()
                answer("ok")
            elif line in ("quit", ""):
                looping.set()
                async with lock:
                    await stores.dispose()
                await client.close()
                answer("ok")
                return
            else:
                answer(f"error unknown command {line!r}")


if __name__ == "__main__":
    anyio.run(main)
