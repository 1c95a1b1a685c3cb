/**
 * The client against servers that misbehave on a real loopback socket (support/rogue.ts): answers
 * are capped at `maxAnswerBytes`, a connection lost after the request leaves the outcome unknown,
 * and `timeoutMs` bounds a trickled answer. Each runs on both transports: `fetch`, and `node:http`
 * (the store ids `.` and `..`).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DEFAULT_MAX_ANSWER_BYTES, MemkvAPIError, MemkvClient, MemkvConnectionError, memkvMemoryTool } from '../src/index.js';
import { converse } from './support/runner.js';
import { memoryCall } from './support/scripted-api.js';
import { GIB, flood, hangUp, rogueServer, trickle, type Behaviour } from './support/rogue.js';

const VIEW = { command: 'view', path: '/memories' };
const UNKNOWN = /the command may or may not have been applied \(wholly or not at all: each memkv command is one transaction\)$/;
const MIB = 1024 * 1024;
/** `s` goes through `fetch`; `..` through `node:http`. */
const STORES = [
  ['fetch', 's'],
  ['node:http', '..'],
] as const;

async function withRogue<T>(behave: Behaviour, fn: (url: string, rogue: Awaited<ReturnType<typeof rogueServer>>) => Promise<T>): Promise<T> {
  const rogue = await rogueServer(behave);
  try {
    return await fn(rogue.url, rogue);
  } finally {
    await rogue.close();
  }
}

describe('the answer is capped at maxAnswerBytes', () => {
  test('the default is 8 MiB', () => {
    assert.equal(DEFAULT_MAX_ANSWER_BYTES, 8 * MIB);
    assert.equal(new MemkvClient({ baseURL: 'http://127.0.0.1:1', apiKey: 'k' }).maxAnswerBytes, 8 * MIB);
    assert.throws(() => new MemkvClient({ baseURL: 'http://127.0.0.1:1', apiKey: 'k', maxAnswerBytes: 0 }), /maxAnswerBytes/);
  });

  for (const [transport, store] of STORES) {
    test(`${transport}: an answer announcing 1 GiB is refused at its headers`, async () => {
      await withRogue(flood(true), async (url, rogue) => {
        const before = process.memoryUsage();
        const client = new MemkvClient({ baseURL: url, apiKey: 'k' });
        await assert.rejects(client.tool(store, VIEW), (e: unknown) => {
          assert.ok(e instanceof MemkvAPIError, String(e));
          assert.deepEqual([e.status, e.errorType], [200, 'answer_too_large']);
          assert.match(e.message, new RegExp(`announces ${GIB} bytes, more than maxAnswerBytes=${8 * MIB}`));
          assert.match(e.message, UNKNOWN);
          return true;
        });
        const grew = process.memoryUsage().arrayBuffers - before.arrayBuffers;
        // The client hung up at the headers: the server got out what the socket buffers hold.
        assert.ok(rogue.sent < 64 * MIB, `the server sent ${rogue.sent} bytes`);
        assert.ok(grew < 32 * MIB, `array buffers grew by ${grew} bytes`);
      });
    });

    test(`${transport}: an unannounced flood is cut at maxAnswerBytes`, async () => {
      await withRogue(flood(false), async (url, rogue) => {
        const before = process.memoryUsage();
        const client = new MemkvClient({ baseURL: url, apiKey: 'k', maxAnswerBytes: 2 * MIB });
        await assert.rejects(client.tool(store, VIEW), (e: unknown) => {
          assert.ok(e instanceof MemkvAPIError, String(e));
          assert.equal(e.errorType, 'answer_too_large');
          assert.match(e.message, /goes on past the limit, more than maxAnswerBytes=2097152/);
          return true;
        });
        const grew = process.memoryUsage().arrayBuffers - before.arrayBuffers;
        assert.ok(rogue.sent < 64 * MIB, `the server sent ${rogue.sent} bytes`);
        assert.ok(grew < 32 * MIB, `array buffers grew by ${grew} bytes`);
      });
    });
  }
});

describe('a connection closed after the request was sent', () => {
  for (const [transport, store] of STORES) {
    test(`${transport}: says the outcome is unknown, not that memkv cannot be reached`, async () => {
      await withRogue(hangUp, async (url, rogue) => {
        const client = new MemkvClient({ baseURL: url, apiKey: 'k' });
        await assert.rejects(client.tool(store, { command: 'create', path: '/memories/a.md', file_text: 'x' }), (e: unknown) => {
          assert.ok(e instanceof MemkvConnectionError, String(e));
          assert.equal(e.timedOut, false);
          assert.doesNotMatch(e.message, /cannot reach/);
          assert.match(e.message, new RegExp(`^memkv: the connection to ${url} broke before an answer came \\(\\w+\\); `));
          assert.match(e.message, UNKNOWN);
          return true;
        });
        assert.equal(rogue.requests, 1, 'the request was read in full before the server hung up');
      });
    });
  }

  test('the runner reports it to the model as such', async () => {
    await withRogue(hangUp, async (url) => {
      const memory = memkvMemoryTool({ store: 's', baseURL: url, apiKey: 'k' });
      const { results } = await converse(memory, [[memoryCall('t1', VIEW)]]);
      const [block] = results[0]!;
      assert.equal(block?.is_error, true);
      assert.match(String(block?.content), /^Error: memkv: the connection to http:\/\/127\.0\.0\.1:\d+ broke before an answer came/);
    });
  });
});

describe('timeoutMs bounds a trickled answer', () => {
  for (const [transport, store] of STORES) {
    test(`${transport}: one byte every 200 ms, timeoutMs 1000`, async () => {
      await withRogue(trickle(200), async (url) => {
        const client = new MemkvClient({ baseURL: url, apiKey: 'k', timeoutMs: 1_000 });
        const started = Date.now();
        await assert.rejects(client.tool(store, VIEW), (e: unknown) => {
          assert.ok(e instanceof MemkvConnectionError, String(e));
          assert.equal(e.timedOut, true);
          assert.match(e.message, /within 1000 ms; the command may or may not have been applied/);
          return true;
        });
        const took = Date.now() - started;
        assert.ok(took >= 950 && took < 2_000, `took ${took} ms`);
      });
    });
  }
});
