/**
 * memkv in this Node process (`db`, the native addon): the golden table's sessions byte for byte,
 * the real SDK tool runner over a recorded session, 8 concurrent promises writing one store, the
 * event loop while writes wait for the disk, one writing process per file, read-only opens beside
 * a writer, and the operator's calls.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import type { BetaToolUseBlock } from '@anthropic-ai/sdk/resources/beta';
import { ToolError } from '@anthropic-ai/sdk/lib/tools/ToolError';
import {
  IN_MEMORY,
  MemkvAPIError,
  MemkvDatabase,
  MemkvLockedError,
  memkvMemoryTool,
  memkvSearchTool,
} from '../src/index.js';
import { native } from '../src/native.js';
import { memkvExec, storeFiles, tempDir } from './support/memkv.js';
import { converse, expectedBlock } from './support/runner.js';
import { memoryCall, type Turn } from './support/scripted-api.js';

const GOLDEN = new URL('../../../tests/data/golden-sessions.jsonl', import.meta.url);
const SESSION = new URL('../../../examples/session.jsonl', import.meta.url);
const SRC_INDEX = fileURLToPath(new URL('../src/index.js', import.meta.url));

let dir: Awaited<ReturnType<typeof tempDir>>;
before(async () => {
  dir = await tempDir();
});
after(async () => {
  await dir.cleanup();
});

type Step = { input: unknown; answer: string };

async function sessions(): Promise<Step[][]> {
  const text = await readFile(GOLDEN, 'utf8');
  return text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => (JSON.parse(l) as { steps: Step[] }).steps);
}

/** A tool's answer to `input`: memkv's content, or a ToolError's. */
async function answer(run: (input: unknown) => Promise<unknown>, input: unknown): Promise<{ content: string; is_error: boolean }> {
  try {
    return { content: String(await run(input)), is_error: false };
  } catch (e) {
    if (e instanceof ToolError) return { content: String(e.content), is_error: true };
    throw e;
  }
}

describe('memkv in this process', () => {
  test('the golden sessions answer byte for byte through the addon', async () => {
    const all = await sessions();
    assert.ok(all.length >= 10);
    for (const [n, steps] of all.entries()) {
      const db = await native().open(IN_MEMORY, false, false);
      for (const [i, step] of steps.entries()) {
        const reply = await db.tool('tester', JSON.stringify(step.input));
        assert.equal(reply.status, 200);
        assert.equal(reply.body, step.answer, `session ${n + 1} step ${i}: ${JSON.stringify(step.input).slice(0, 200)}`);
      }
      await db.close();
    }
  });

  test('the golden sessions through memkvMemoryTool, as the runner calls it', async () => {
    let checked = 0;
    for (const steps of await sessions()) {
      const bare = steps.every((s) => typeof s.input === 'object' && s.input !== null && !Array.isArray(s.input) && (s.input as { type?: unknown }).type !== 'tool_use');
      if (!bare) continue;
      const tool = memkvMemoryTool({ store: 'tester', db: IN_MEMORY });
      for (const step of steps) {
        const want = JSON.parse(step.answer) as { content: string; is_error: boolean };
        assert.deepEqual(await answer((input) => Promise.resolve(tool.run(input as never)), step.input), want, JSON.stringify(step.input).slice(0, 200));
        checked++;
      }
    }
    assert.ok(checked >= 100, `${checked}`);
  });

  test('the SDK tool runner over a recorded session answers as memkv exec', async () => {
    const lines = (await readFile(SESSION, 'utf8')).split('\n').filter((l) => l.trim().length > 0);
    const calls = lines.map((l, i) => {
      const value = JSON.parse(l) as Record<string, unknown>;
      return value['type'] === 'tool_use' ? (value as unknown as BetaToolUseBlock) : memoryCall(`s${i + 1}`, value);
    });
    // One call a turn: the runner runs the calls of one turn at once, and exec answers in order.
    const turns: Turn[] = calls.map((c) => [c]);
    const file = dir.db('runner');
    const conversation = await converse(memkvMemoryTool({ store: 'dana', db: file }), turns);
    const expected = await memkvExec(dir.db('runner-ref'), 'dana', lines.map((l) => JSON.parse(l)));
    let k = 0;
    turns.forEach((turn, i) => {
      assert.deepEqual(conversation.results[i], turn.map((b) => expectedBlock(b as BetaToolUseBlock, expected[k++]!)), `turn ${i + 1}`);
    });
  });

  test('memory and search tools on one MemkvDatabase; search and the operator calls', async () => {
    const db = await MemkvDatabase.open(IN_MEMORY);
    const memory = memkvMemoryTool({ store: 'dana', db });
    const search = memkvSearchTool({ store: 'dana', db });
    await memory.run({ command: 'create', path: '/memories/car.md', file_text: 'Drives a Prius.\n' } as never);
    await memory.run({ command: 'str_replace', path: '/memories/car.md', old_str: 'Prius', new_str: 'Prius, blue' } as never);
    assert.equal(await search.run({ query: 'prius' }, undefined as never), '/memories/car.md (score 0.29)\n/memories/car.md:1: Drives a Prius, blue.');
    await assert.rejects(Promise.resolve(search.run({ query: '(', mode: 'regex' }, undefined as never)), ToolError);
    assert.deepEqual((await db.search('dana', { q: 'prius' })).data.map((h) => h.path), ['/car.md']);
    await assert.rejects(db.search('dana', { q: 'x', limit: 0 }), (e) => e instanceof MemkvAPIError && e.status === 400);
    assert.deepEqual((await db.stores()).map((s) => s['id']), ['dana']);
    assert.deepEqual((await db.history('dana', '/memories/car.md')).map((v) => v['operation']), ['created', 'modified']);
    const file = join(dir.path, 'dana.jsonl');
    assert.equal((await db.export(file))['files'], 1);
    const other = await MemkvDatabase.open(IN_MEMORY);
    assert.equal((await other.importFile(file))['files'], 1);
    await assert.rejects(other.importFile(file), (e) => e instanceof MemkvAPIError && e.status === 400);
    assert.deepEqual(await db.expire(true), []);
    assert.equal(await db.deleteStore('dana'), true);
    assert.equal(await db.deleteStore('dana'), false);
    assert.throws(() => memkvMemoryTool({ store: 'dana', db, baseURL: 'http://127.0.0.1:1' }), TypeError);
    await assert.rejects(db.search('dana', { q: 'x', limit: 2.5 }), (e) => e instanceof MemkvAPIError && e.status === 400 && /limit must be an integer/.test(e.message));
    // Closed while a call is under way: the call finishes, later ones are refused.
    const pending = memory.run({ command: 'view', path: '/memories' } as never);
    await db.close();
    assert.match(String(await pending), /^Here're the files/);
    await assert.rejects(Promise.resolve(memory.run({ command: 'view', path: '/memories' } as never)), /closed/);
  });

  test('8 concurrent promises writing one store: every call answered once, nothing lost', async () => {
    const file = dir.db('eight');
    const tool = memkvMemoryTool({ store: 'team', db: file });
    const run = (input: unknown) => answer((i) => Promise.resolve(tool.run(i as never)), input);
    await run({ command: 'create', path: '/memories/log.md', file_text: '' });
    const answers = await Promise.all(
      Array.from({ length: 8 }, async (_, t) => {
        const mine: Array<{ content: string; is_error: boolean }> = [];
        for (let i = 0; i < 20; i++) {
          mine.push(await run({ command: 'create', path: `/memories/p${i}.md`, file_text: `from ${t}\n` }));
          mine.push(await run({ command: 'insert', path: '/memories/log.md', insert_line: 0, insert_text: `t${t} i${i}\n` }));
        }
        return mine;
      }),
    );
    assert.ok(answers.every((a) => a.length === 40));
    for (let i = 0; i < 20; i++) {
      const path = `/memories/p${i}.md`;
      const made = answers.flatMap((a, t) => (a.some((x) => x.content === `File created successfully at: ${path}` && !x.is_error) ? [t] : []));
      const refused = answers.flatMap((a, t) => (a.some((x) => x.content === `Error: File ${path} already exists` && x.is_error) ? [t] : []));
      assert.equal(made.length, 1, path);
      assert.deepEqual([...made, ...refused].sort(), [0, 1, 2, 3, 4, 5, 6, 7]);
    }
    const view = (await run({ command: 'view', path: '/memories/log.md' })).content.split('\n').slice(1);
    const want = Array.from({ length: 8 }, (_, t) => Array.from({ length: 20 }, (_, i) => `t${t} i${i}`)).flat();
    assert.deepEqual(view.map((l) => l.split('\t')[1]).sort(), want.sort());
  });

  test('the event loop runs while writes wait for the disk', async () => {
    const tool = memkvMemoryTool({ store: 'loop', db: dir.db('loop') });
    let ticks = 0;
    let done = false;
    const tick = () => {
      ticks++;
      if (!done) setImmediate(tick);
    };
    setImmediate(tick);
    await Promise.all(
      Array.from({ length: 16 }, async (_, w) => {
        for (let i = 0; i < 10; i++) await tool.run({ command: 'create', path: `/memories/w${w}/f${i}.md`, file_text: 'x\n' } as never);
      }),
    );
    done = true;
    // 160 durable writes: a binding that ran them on this thread would leave no turn of the loop between them.
    assert.ok(ticks > 100, `${ticks} turns of the event loop`);
  });
});

/** A second Node process holding `file` open (shared or not) until its stdin closes. */
async function hold(file: string, shared: boolean): Promise<ChildProcessWithoutNullStreams> {
  const script = `
    const { MemkvDatabase, memkvMemoryTool } = await import(${JSON.stringify(SRC_INDEX)});
    const db = MemkvDatabase.openSync(process.argv[1], { shared: process.argv[2] === 'shared' });
    await memkvMemoryTool({ store: 'dana', db }).run({ command: 'create', path: '/memories/a.md', file_text: 'held\\n' });
    console.log('ready');
    process.stdin.on('end', async () => { await db.close(); process.exit(0); }).resume();
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, file, shared ? 'shared' : 'alone'], { stdio: 'pipe' });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr.on('data', (c) => (err += c));
    child.stdout.on('data', (c) => {
      out += c;
      if (out.includes('ready')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`the holder exited ${code}: ${err}`)));
  });
  return child;
}

async function release(child: ChildProcessWithoutNullStreams): Promise<void> {
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.stdin.end();
  assert.equal(await exited, 0);
}

describe('one writing process per file', () => {
  test('a file another process writes is refused at once, with the remedy', async () => {
    const file = dir.db('locked');
    const holder = await hold(file, false);
    try {
      const started = Date.now();
      await assert.rejects(MemkvDatabase.open(file), (e) => {
        assert.ok(e instanceof MemkvLockedError);
        assert.match(e.message, /the database is open in another process/);
        assert.match(e.message, /memkv serve --db/);
        return true;
      });
      assert.throws(() => memkvMemoryTool({ store: 'dana', db: file }), MemkvLockedError);
      assert.ok(Date.now() - started < 10_000);
    } finally {
      await release(holder);
    }
    const tool = memkvMemoryTool({ store: 'dana', db: file });
    assert.match(String(await tool.run({ command: 'view', path: '/memories/a.md' } as never)), /\theld$/);
  });

  test('read-only beside a shared writer', async () => {
    const file = dir.db('shared');
    const holder = await hold(file, true);
    try {
      const reader = await MemkvDatabase.open(file, { readOnly: true });
      assert.equal(reader.readOnly, true);
      const tool = memkvMemoryTool({ store: 'dana', db: reader });
      assert.match(String(await tool.run({ command: 'view', path: '/memories/a.md' } as never)), /\theld$/);
      await assert.rejects(Promise.resolve(tool.run({ command: 'create', path: '/memories/b.md', file_text: 'x' } as never)), (e) => e instanceof ToolError && /read-only/.test(String(e.content)));
      await reader.close();
    } finally {
      await release(holder);
    }
    assert.deepEqual(Object.keys(await storeFiles(file, 'dana')), ['/memories/a.md']);
  });
});
