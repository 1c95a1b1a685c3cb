/**
 * The client's transport, errors and configuration, against a real `memkv serve` (and, for the
 * failures memkv never produces, a real socket that misbehaves).
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  MemkvAPIError,
  MemkvClient,
  MemkvConnectionError,
  MemkvError,
  memkvMemoryHandlers,
  memkvMemoryTool,
  serveLocal,
  type LocalServer,
} from '../src/index.js';
import { addStoreKey, tempDir } from './support/memkv.js';
import { converse } from './support/runner.js';
import { memoryCall } from './support/scripted-api.js';

let dir: Awaited<ReturnType<typeof tempDir>>;
let server: LocalServer;
before(async () => {
  dir = await tempDir();
  server = await serveLocal(dir.db());
});
after(async () => {
  const code = await server?.close();
  await dir?.cleanup();
  assert.equal(code, 0, 'memkv serve exits 0 on SIGTERM');
});

/** A loopback port nothing listens on: bound, noted, and closed again. */
async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A server that answers every request with `status` and `body`, or never answers when `status` is 0. */
async function fixedServer(status: number, body: string, headers: Record<string, string> = {}): Promise<{ url: string; close: () => Promise<void> }> {
  const s: Server = createServer((req, res) => {
    req.resume();
    if (status === 0) return;
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(body);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    },
  };
}

describe('MemkvClient', () => {
  test('answers a command with memkv content and is_error', async () => {
    const client = new MemkvClient({ baseURL: server.baseURL, apiKey: server.apiKey });
    assert.deepEqual(
      await client.tool('client-a', { command: 'create', path: '/memories/x.md', file_text: 'x\n' }),
      { content: 'File created successfully at: /memories/x.md', is_error: false },
    );
    assert.deepEqual(await client.tool('client-a', { command: 'delete', path: '/memories/nope' }), {
      content: 'Error: The path /memories/nope does not exist',
      is_error: true,
    });
  });

  test('the store id is one percent-encoded path segment', () => {
    const client = new MemkvClient({ baseURL: 'http://127.0.0.1:1/', apiKey: 'k' });
    assert.equal(client.toolURL('team/a b?#%'), 'http://127.0.0.1:1/v1/memory_stores/team%2Fa%20b%3F%23%25/tool');
    assert.equal(client.toolURL('.'), 'http://127.0.0.1:1/v1/memory_stores/%2E/tool');
    assert.equal(client.toolURL('..'), 'http://127.0.0.1:1/v1/memory_stores/%2E%2E/tool');
    assert.equal(client.toolURL('a..'), 'http://127.0.0.1:1/v1/memory_stores/a../tool');
  });

  test('baseURL and apiKey default to MEMKV_URL and MEMKV_API_KEY', async () => {
    const saved = { url: process.env['MEMKV_URL'], key: process.env['MEMKV_API_KEY'] };
    try {
      delete process.env['MEMKV_URL'];
      delete process.env['MEMKV_API_KEY'];
      assert.throws(() => new MemkvClient(), (e) => e instanceof MemkvError && /MEMKV_URL/.test(e.message));
      process.env['MEMKV_URL'] = server.baseURL;
      assert.throws(() => new MemkvClient(), (e) => e instanceof MemkvError && /MEMKV_API_KEY/.test(e.message));
      process.env['MEMKV_API_KEY'] = server.apiKey;
      const handlers = memkvMemoryHandlers({ store: 'from-env' });
      assert.equal(
        await handlers.view({ command: 'view', path: '/memories' }),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories",
      );
    } finally {
      restore('MEMKV_URL', saved.url);
      restore('MEMKV_API_KEY', saved.key);
    }
  });

  test('a model mistake is a ToolError with memkv exact content', async () => {
    const handlers = memkvMemoryHandlers({ store: 'errors', baseURL: server.baseURL, apiKey: server.apiKey });
    await assert.rejects(
      Promise.resolve(handlers.view({ command: 'view', path: '/etc/passwd' })),
      (e: unknown) =>
        e instanceof Error &&
        e.name === 'ToolError' &&
        (e as { content?: unknown }).content === 'Error: Path must start with /memories, got: /etc/passwd',
    );
  });

  test('a wrong key is a MemkvAPIError 401 authentication_error', async () => {
    const client = new MemkvClient({ baseURL: server.baseURL, apiKey: 'not-a-key' });
    await assert.rejects(client.tool('s', { command: 'view', path: '/memories' }), (e: unknown) => {
      assert.ok(e instanceof MemkvAPIError);
      assert.equal(e.status, 401);
      assert.equal(e.errorType, 'authentication_error');
      assert.doesNotMatch(e.message, /not-a-key/);
      return true;
    });
  });

  test('a store key works on its store only; on another it is a MemkvAPIError 404', async () => {
    // Added while the server runs: it sees new keys without a restart.
    const key = await addStoreKey(dir.db(), 'owner');
    const client = new MemkvClient({ baseURL: server.baseURL, apiKey: key });
    assert.equal((await client.tool('owner', { command: 'view', path: '/memories' })).is_error, false);
    await assert.rejects(client.tool('someone-else', { command: 'view', path: '/memories' }), (e: unknown) => {
      assert.ok(e instanceof MemkvAPIError);
      assert.deepEqual([e.status, e.errorType], [404, 'not_found_error']);
      return true;
    });
  });

  test('no server is a MemkvConnectionError', async () => {
    const port = await deadPort();
    const client = new MemkvClient({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'k', timeoutMs: 5_000 });
    await assert.rejects(client.tool('s', { command: 'view', path: '/memories' }), (e: unknown) => {
      assert.ok(e instanceof MemkvConnectionError);
      assert.equal(e.timedOut, false);
      assert.match(e.message, /cannot reach .*ECONNREFUSED/);
      return true;
    });
  });

  test('no answer within timeoutMs is a MemkvConnectionError that timed out', async () => {
    const silent = await fixedServer(0, '');
    try {
      const client = new MemkvClient({ baseURL: silent.url, apiKey: 'k', timeoutMs: 200 });
      const started = Date.now();
      await assert.rejects(client.tool('s', { command: 'view', path: '/memories' }), (e: unknown) => {
        assert.ok(e instanceof MemkvConnectionError);
        assert.equal(e.timedOut, true);
        assert.match(e.message, /within 200 ms/);
        return true;
      });
      assert.ok(Date.now() - started < 5_000);
    } finally {
      await silent.close();
    }
  });

  test('an error envelope and a foreign body are MemkvAPIErrors', async () => {
    const busy = await fixedServer(
      503,
      JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'busy' } }),
      { 'retry-after': '2' },
    );
    const html = await fixedServer(200, '<html>proxy</html>');
    try {
      await assert.rejects(new MemkvClient({ baseURL: busy.url, apiKey: 'k' }).tool('s', {}), (e: unknown) => {
        assert.ok(e instanceof MemkvAPIError);
        assert.deepEqual([e.status, e.errorType, e.retryAfter], [503, 'overloaded_error', 2]);
        assert.equal(e.message, 'memkv serve answered 503 overloaded_error: busy');
        return true;
      });
      await assert.rejects(new MemkvClient({ baseURL: html.url, apiKey: 'k' }).tool('s', {}), (e: unknown) => {
        assert.ok(e instanceof MemkvAPIError);
        assert.equal(e.status, 200);
        assert.match(e.message, /not JSON/);
        return true;
      });
    } finally {
      await busy.close();
      await html.close();
    }
  });

  test('the runner reports a transport failure to the model as an error result', async () => {
    const port = await deadPort();
    const memory = memkvMemoryTool({ store: 's', baseURL: `http://127.0.0.1:${port}`, apiKey: 'k' });
    const { results } = await converse(memory, [[memoryCall('t1', { command: 'view', path: '/memories' })]]);
    assert.equal(results.length, 1);
    const [block] = results[0]!;
    assert.equal(block?.tool_use_id, 't1');
    assert.equal(block?.is_error, true);
    assert.match(String(block?.content), /^Error: memkv: cannot reach http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED; nothing was sent$/);
  });
});

describe('serveLocal', () => {
  test('a missing binary is a MemkvError that says where to put one', async () => {
    await assert.rejects(serveLocal(dir.db('nobin'), { bin: '/nonexistent/memkv' }), (e: unknown) => {
      assert.ok(e instanceof MemkvError);
      assert.match(e.message, /no `\/nonexistent\/memkv` binary to run: put memkv on PATH .*set MEMKV_BIN/);
      assert.doesNotMatch(e.message, /spawn .* ENOENT/);
      return true;
    });
  });

  test('close stops the server: exit 0, and the port refuses connections', async () => {
    const local = await serveLocal(dir.db('closing'));
    const ready = await fetch(`${local.baseURL}/readyz`);
    assert.equal(ready.status, 200);
    await ready.arrayBuffer();
    assert.equal(await local.close(), 0);
    assert.equal(await local.close(), 0, 'close is idempotent');
    await assert.rejects(fetch(`${local.baseURL}/healthz`, { signal: AbortSignal.timeout(5_000) }));
  });
});

function restore(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}
