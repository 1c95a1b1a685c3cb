/**
 * The SDK's own memory sync (`SessionMemoryStores`, what the environment worker runs for a
 * session's memory stores) keeping a sandbox directory and a real `memkv serve` store in step,
 * with the SDK client's default retries: files written in the directory become memories
 * (versions by the worker's key), memory-tool writes reach the directory, an edit on both sides
 * ends as the SDK documents (the server's version wins), and memkv's 409 and 400 answers are
 * never retried (counted in the server's request log).
 *
 * The sync's cadence and its delete window read the clock (`Date.now()` up to SDK 1.14,
 * `performance.now()` from 1.16 on), which the test moves forward instead of waiting: both clocks,
 * so that the test runs the same against either SDK (tools/test-typescript.sh runs both). Timers
 * themselves stay real.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { mock, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { MARKER_PATH, SessionMemoryStores } from '@anthropic-ai/sdk/tools/agent-toolset/node';
import type { BetaManagedAgentsSession } from '@anthropic-ai/sdk/resources/beta/sessions/sessions';
import { MemkvClient } from '../src/index.js';
import { MEMKV_BIN, tempDir } from './support/memkv.js';

const MEMORY_ROUTE = 'route="/v1/memory_stores/{memory_store_id}/memories/{memory_id}"';
const MEMORIES_ROUTE = 'route="/v1/memory_stores/{memory_store_id}/memories"';

/** `memkv keys add ARGS`: the key's id and the key. */
function addKey(db: string, ...scope: string[]): Promise<{ id: string; key: string }> {
  return new Promise((resolve, reject) => {
    execFile(MEMKV_BIN, ['--db', db, 'keys', 'add', ...scope], { timeout: 30_000 }, (error, stdout) => {
      if (error) return reject(error);
      const lines = stdout.trimEnd().split('\n');
      resolve({ id: /^added (key_[0-9a-f]+) /.exec(lines[0]!)![1]!, key: lines.at(-1)!.trim() });
    });
  });
}

/** `memkv serve` on a free loopback port with its whole stderr (a line per request) kept. */
async function serveLogged(db: string): Promise<{ baseURL: string; stop: () => Promise<string[]> }> {
  const child = spawn(MEMKV_BIN, ['--db', db, 'serve', '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stderr.setEncoding('utf8').on('data', (c: string) => (log += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const first = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`memkv serve did not start: ${log}`)), 15_000);
    createInterface({ input: child.stdout }).once('line', (line) => {
      clearTimeout(timer);
      resolve(line);
    });
  });
  assert.match(first, /^listening on http:\/\/127\.0\.0\.1:\d+$/);
  return {
    baseURL: first.replace('listening on ', ''),
    async stop() {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      assert.equal(code, 0, 'memkv serve exits 0 on SIGTERM');
      return log.split('\n').filter((l) => l.includes(' request '));
    },
  };
}

/** `Date.now()` and `performance.now()`, both moved forward by `tick`; `reset` puts both back. */
function clock(): { tick: (ms: number) => void; reset: () => void } {
  mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
  const realNow = performance.now.bind(performance);
  let ahead = 0;
  mock.method(performance, 'now', () => realNow() + ahead);
  return {
    tick(ms) {
      mock.timers.tick(ms);
      ahead += ms;
    },
    reset() {
      mock.timers.reset();
      mock.restoreAll();
    },
  };
}

/** The session the worker would fetch from the sessions API, which memkv does not serve. */
function session(storeId: string, mount: string): BetaManagedAgentsSession {
  return {
    resources: [{ type: 'memory_store', memory_store_id: storeId, mount_path: mount, access: 'read_write' }],
  } as unknown as BetaManagedAgentsSession;
}

test('a sandbox directory and a memkv store stay in step through the SDK memory sync', async () => {
  const dir = await tempDir();
  const db = dir.db();
  const admin = await addKey(db, '--admin');
  const server = await serveLogged(db);
  const warnings: string[] = [];
  const quiet = () => {};
  const logger = { debug: quiet, info: quiet, warn: (message: string) => warnings.push(message), error: quiet };
  const time = clock();
  let requests: string[] = [];
  try {
    const api = new Anthropic({ apiKey: admin.key, baseURL: server.baseURL, maxRetries: 0 });
    const store = await api.beta.memoryStores.create({ name: 'sandbox' });
    const worker = await addKey(db, '--store', store.id);
    const memoryTool = new MemkvClient({ baseURL: server.baseURL, apiKey: admin.key });
    const tool = async (input: object) => {
      const out = await memoryTool.tool(store.id, input);
      assert.equal(out.is_error, false, out.content);
      return out.content;
    };
    const remote = async () => {
      const files: Record<string, string> = {};
      for await (const m of api.beta.memoryStores.memories.list(store.id, { view: 'full' })) {
        if (m.type === 'memory') files[m.path] = m.content ?? '';
      }
      return files;
    };

    // Once armed, the memory tool edits plan.md after the sync has listed it and before its
    // upload (whose precondition is the listed sha) reaches the server.
    let armed = false;
    const racing: typeof fetch = async (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (armed && init?.method === 'POST' && url.pathname.split('/').at(-2) === 'memories') {
        armed = false;
        await tool({ command: 'str_replace', path: '/memories/plan.md', old_str: 'sandbox', new_str: 'tool' });
      }
      return fetch(input, init);
    };
    // The SDK's default retries (2): any retried refusal would show in the server's log.
    const client = new Anthropic({ apiKey: worker.key, baseURL: server.baseURL, fetch: racing, logger });
    const sync = new SessionMemoryStores(client, { workdir: join(dir.path, 'work') });
    const syncNow = async () => {
      time.tick(15_000);
      await sync.syncIfDue();
    };

    await tool({ command: 'create', path: '/memories/notes/today.md', file_text: 'remote v1\n' });
    const mount = join(dir.path, 'sandbox', 'memories');
    await mkdir(join(dir.path, 'sandbox'));
    const local = (p: string) => readFile(join(mount, p), 'utf8');

    // Download: the store's memories, and the marker naming the store.
    await sync.download(session(store.id, mount));
    assert.equal(await local('notes/today.md'), 'remote v1\n');
    assert.equal(await local(MARKER_PATH), `version 1\n${store.id}`);

    // A file written in the sandbox becomes a memory, its version by the worker's key.
    await writeFile(join(mount, 'plan.md'), 'from the sandbox\n');
    await syncNow();
    assert.equal((await remote())['/plan.md'], 'from the sandbox\n');
    const plan = (await api.beta.memoryStores.memories.list(store.id)).data.find((m) => m.path === '/plan.md');
    assert.ok(plan?.type === 'memory');
    const versions = (await api.beta.memoryStores.memoryVersions.list(store.id, { memory_id: plan.id })).data;
    assert.deepEqual(
      versions.map((v) => [v.operation, v.created_by?.type === 'api_actor' ? v.created_by.api_key_id : null]),
      [['created', worker.id]],
    );
    assert.match(await tool({ command: 'view', path: '/memories/plan.md' }), /1\tfrom the sandbox$/);

    // Memory-tool writes reach the sandbox.
    await tool({ command: 'create', path: '/memories/notes/tomorrow.md', file_text: 'later\n' });
    await tool({ command: 'str_replace', path: '/memories/notes/today.md', old_str: 'v1', new_str: 'v2' });
    await syncNow();
    assert.equal(await local('notes/tomorrow.md'), 'later\n');
    assert.equal(await local('notes/today.md'), 'remote v2\n');

    // Both sides edit before a sync: the server's version wins, on both sides.
    await writeFile(join(mount, 'notes/today.md'), 'sandbox edit\n');
    await tool({ command: 'str_replace', path: '/memories/notes/today.md', old_str: 'v2', new_str: 'v3' });
    await syncNow();
    assert.equal(await local('notes/today.md'), 'remote v3\n');
    assert.equal((await remote())['/notes/today.md'], 'remote v3\n');

    // Both sides edit during a sync: the upload's precondition fails (409, sent once), the
    // sandbox's edit loses and the next sync brings the tool's.
    await writeFile(join(mount, 'plan.md'), 'from the sandbox, edited\n');
    armed = true;
    await syncNow();
    assert.equal(armed, false);
    assert.equal((await remote())['/plan.md'], 'from the tool\n');
    await syncNow();
    assert.equal(await local('plan.md'), 'from the tool\n');

    // A file over memkv's --max-file-bytes is refused (400, sent once) and left out; the rest
    // goes on syncing.
    await writeFile(join(mount, 'big.md'), 'x'.repeat(200_000));
    await writeFile(join(mount, 'small.md'), 'fits\n');
    await syncNow();
    await syncNow();
    const files = await remote();
    assert.equal(files['/big.md'], undefined);
    assert.equal(files['/small.md'], 'fits\n');

    // A file deleted in the sandbox is deleted in memkv once the SDK's window (30 s) has passed.
    await unlink(join(mount, 'notes/tomorrow.md'));
    await syncNow();
    assert.ok('/notes/tomorrow.md' in (await remote()));
    time.tick(30_000);
    await syncNow();
    assert.ok(!('/notes/tomorrow.md' in (await remote())));

    await sync.finish();
    await sync.dispose();
  } finally {
    time.reset();
    requests = await server.stop();
    await dir.cleanup();
  }

  // Each refusal was sent once: no retry of a 409 or a 400.
  const withStatus = (s: number) => requests.filter((l) => l.includes(` status=${s} `));
  assert.equal(withStatus(409).length, 1, withStatus(409).join('\n'));
  assert.ok(withStatus(409)[0]!.includes(MEMORY_ROUTE));
  assert.equal(withStatus(400).length, 1, withStatus(400).join('\n'));
  assert.ok(withStatus(400)[0]!.includes(MEMORIES_ROUTE));
  assert.deepEqual([...withStatus(500), ...withStatus(503)], []);
  assert.ok(warnings.some((w) => w.includes('the upload was refused and the local edit loses')), warnings.join('\n'));
  assert.ok(warnings.some((w) => w.includes('the server rejected this memory file')), warnings.join('\n'));
});
