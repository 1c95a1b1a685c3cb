/**
 * The real SDK tool runner (`client.beta.messages.toolRunner`) with memkv's memory tool, against a
 * scripted Messages API and a real `memkv serve`. Expected answers come from `memkv exec`.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import type { BetaToolUseBlock } from '@anthropic-ai/sdk/resources/beta';
import Anthropic from '@anthropic-ai/sdk';
import { memkvMemoryTool, serveLocal } from '../src/index.js';
import { memkvExec, storeFiles, storeUsers, tempDir, withServer } from './support/memkv.js';
import { converse, expectedBlock } from './support/runner.js';
import { FINAL_TEXT, ScriptedMessagesAPI, memoryCall as call, type Turn } from './support/scripted-api.js';

const SESSION = new URL('../../../examples/session.jsonl', import.meta.url);

let dir: Awaited<ReturnType<typeof tempDir>>;
before(async () => {
  dir = await tempDir();
});
after(async () => {
  await dir.cleanup();
});

/** The inputs of every memory call of `turns`, in the model's order. */
const inputs = (turns: Turn[]) => turns.flat().map((b) => (b as BetaToolUseBlock).input);

describe('toolRunner with memkvMemoryTool', () => {
  test('every command, several per turn and across turns, answers as memkv exec does', async () => {
    const turns: Turn[] = [
      [
        call('c1', { command: 'create', path: '/memories/notes.md', file_text: 'a\nb\nc\n' }),
        call('c2', { command: 'create', path: '/memories/dir/x.md', file_text: 'x\n' }),
      ],
      [
        call('v1', { command: 'view', path: '/memories' }),
        call('v2', { command: 'view', path: '/memories/notes.md' }),
      ],
      [
        call('s1', { command: 'str_replace', path: '/memories/notes.md', old_str: 'b', new_str: 'B' }),
        call('r1', { command: 'rename', old_path: '/memories/dir', new_path: '/memories/dir2' }),
      ],
      [
        call('i1', { command: 'insert', path: '/memories/notes.md', insert_line: 0, insert_text: 'top\n' }),
        call('d1', { command: 'delete', path: '/memories/dir2/x.md' }),
      ],
      [
        call('v3', { command: 'view', path: '/memories/notes.md', view_range: [1, 2] }),
        call('v4', { command: 'view', path: '/memories/' }),
        call('v5', { command: 'view', path: '/memories/dir2/x.md' }),
        call('e1', { command: 'view', path: '/memories/../etc/passwd' }),
      ],
      [
        call('m1', { command: 'frobnicate', path: '/memories' }),
        call('m2', { path: '/memories' }),
        call('m3', { command: 'create', path: '/memories/n.md' }),
        call('m4', { command: 'insert', path: '/memories/notes.md', insert_line: '1', insert_text: 'x' }),
      ],
    ];
    const db = dir.db('commands');
    const conversation = await withServer(db, (server) =>
      converse(memkvMemoryTool({ store: 'dana', baseURL: server.baseURL, apiKey: server.apiKey }), turns),
    );

    const reference = dir.db('commands-ref');
    const expected = await memkvExec(reference, 'dana', inputs(turns));
    let k = 0;
    assert.equal(conversation.results.length, turns.length);
    turns.forEach((turn, i) => {
      assert.deepEqual(
        conversation.results[i],
        turn.map((b) => expectedBlock(b as BetaToolUseBlock, expected[k++]!)),
        `turn ${i + 1}`,
      );
    });
    // The reference is memkv's own contract, not whatever it printed today.
    const flat = conversation.results.flat();
    const [created, missing, escape] = [flat[0], flat[10], flat[11]];
    assert.deepEqual(created, {
      type: 'tool_result',
      tool_use_id: 'c1',
      content: 'File created successfully at: /memories/notes.md',
    });
    assert.deepEqual(missing, {
      type: 'tool_result',
      tool_use_id: 'v5',
      content: 'The path /memories/dir2/x.md does not exist. Please provide a valid path.',
      is_error: true,
    });
    assert.equal(escape?.is_error, true);
    assert.match(String(escape?.content), /^Error: Invalid path \/memories\/\.\.\/etc\/passwd: /);
    // Malformed input reaches memkv too (not the SDK's "... not implemented").
    assert.deepEqual(
      flat.slice(12).map((r) => [r.content, r.is_error]),
      [
        ['Error: Unknown command: "frobnicate"', true],
        ['Error: Unknown command: null', true],
        ['Error: Missing required parameter `file_text` for command `create`', true],
        ['Error: Invalid parameter `insert_line` for command `insert`: expected integer', true],
      ],
    );
    assert.equal(conversation.final.content[0]?.type === 'text' && conversation.final.content[0].text, FINAL_TEXT);

    const files = await storeFiles(db, 'dana');
    assert.deepEqual(files, { '/memories/notes.md': 'top\na\nB\nc\n' });
    assert.deepEqual(files, await storeFiles(reference, 'dana'));
  });

  test('calls of one turn to one store run at once, each answered as it would be alone', async () => {
    const setup = [
      { command: 'create', path: '/memories/a.md', file_text: 'alpha\nbeta\n' },
      { command: 'create', path: '/memories/b.md', file_text: 'one\ntwo\nthree\n' },
      { command: 'create', path: '/memories/c.md', file_text: 'first\nlast\n' },
      { command: 'create', path: '/memories/d.md', file_text: 'dee\n' },
      { command: 'create', path: '/memories/gone/f.md', file_text: 'f\n' },
    ];
    // Each call touches its own file (or only reads one no other call writes), so no answer depends
    // on the order in which the server happens to run them.
    const concurrent: Turn = [
      call('p1', { command: 'view', path: '/memories/a.md' }),
      call('p2', { command: 'view', path: '/memories/a.md', view_range: [2, 2] }),
      call('p3', { command: 'str_replace', path: '/memories/b.md', old_str: 'two', new_str: 'TWO' }),
      call('p4', { command: 'insert', path: '/memories/c.md', insert_line: 1, insert_text: 'middle' }),
      call('p5', { command: 'rename', old_path: '/memories/d.md', new_path: '/memories/moved/d.md' }),
      call('p6', { command: 'create', path: '/memories/e.md', file_text: 'new\n' }),
      call('p7', { command: 'delete', path: '/memories/gone' }),
      call('p8', { command: 'view', path: '/memories/missing.md' }),
      call('p9', { command: 'create', path: '/memories/a.md', file_text: 'clobber\n' }),
    ];
    const turns: Turn[] = [setup.map((input, i) => call(`s${i}`, input)), concurrent];

    // Count the requests in flight at once: the runner must send the turn's calls together.
    let inFlight = 0;
    let maxInFlight = 0;
    const countingFetch: typeof fetch = async (...args) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        return await fetch(...args);
      } finally {
        inFlight--;
      }
    };

    const db = dir.db('concurrent');
    const conversation = await withServer(db, (server) =>
      converse(
        memkvMemoryTool({ store: 'conc', baseURL: server.baseURL, apiKey: server.apiKey, fetch: countingFetch }),
        turns,
      ),
    );
    assert.equal(maxInFlight, Math.max(setup.length, concurrent.length));

    // Alone: the setup, then that one call, on a fresh database.
    const alone = await Promise.all(
      concurrent.map(async (b, i) => {
        const answers = await memkvExec(dir.db(`alone-${i}`), 'conc', [...setup, (b as BetaToolUseBlock).input]);
        assert.ok(answers.slice(0, setup.length).every((a) => !a.is_error));
        return expectedBlock(b as BetaToolUseBlock, answers.at(-1)!);
      }),
    );
    assert.deepEqual(conversation.results[1], alone);
    assert.equal(alone.filter((b) => b.is_error).length, 2, 'p8 and p9 are model mistakes');

    // And the store holds every write of the turn, as a serial run leaves it.
    const reference = dir.db('concurrent-ref');
    await memkvExec(reference, 'conc', inputs(turns));
    const files = await storeFiles(db, 'conc');
    assert.deepEqual(files, await storeFiles(reference, 'conc'));
    assert.deepEqual(files, {
      '/memories/a.md': 'alpha\nbeta\n',
      '/memories/b.md': 'one\nTWO\nthree\n',
      '/memories/c.md': 'first\nmiddle\nlast\n',
      '/memories/e.md': 'new\n',
      '/memories/moved/d.md': 'dee\n',
    });
  });

  test('streamed turns with runToolsEagerly: each call starts as its block ends, same answers', async () => {
    const setup = [
      { command: 'create', path: '/memories/a.md', file_text: 'alpha\n' },
      { command: 'create', path: '/memories/b.md', file_text: 'bee\n' },
    ];
    const eager: Turn = [
      call('q1', { command: 'view', path: '/memories/a.md' }),
      call('q2', { command: 'str_replace', path: '/memories/b.md', old_str: 'bee', new_str: 'BEE' }),
      call('q3', { command: 'create', path: '/memories/c.md', file_text: 'sea\n' }),
      call('q4', { command: 'delete', path: '/memories/nothing' }),
    ];
    const turns: Turn[] = [setup.map((input, i) => call(`s${i}`, input)), eager];
    const db = dir.db('eager');
    const conversation = await withServer(db, (server) =>
      converse(memkvMemoryTool({ store: 'eager', baseURL: server.baseURL, apiKey: server.apiKey }), turns, {
        stream: true,
        runToolsEagerly: true,
      }),
    );
    const reference = dir.db('eager-ref');
    const expected = await memkvExec(reference, 'eager', inputs(turns));
    let k = 0;
    assert.deepEqual(
      conversation.results,
      turns.map((turn) => turn.map((b) => expectedBlock(b as BetaToolUseBlock, expected[k++]!))),
    );
    assert.equal(conversation.results[1]![3]!.content, 'Error: The path /memories/nothing does not exist');
    assert.equal(conversation.final.content[0]?.type === 'text' && conversation.final.content[0].text, FINAL_TEXT);
    assert.deepEqual(await storeFiles(db, 'eager'), await storeFiles(reference, 'eager'));
  });

  test('racing writes to one file of one turn lose nothing and never both win', async () => {
    const lines = ['l1', 'l2', 'l3', 'l4', 'l5', 'l6'];
    const turns: Turn[] = [
      [call('base', { command: 'create', path: '/memories/log.md', file_text: 'head\n' })],
      [
        ...lines.map((l, i) =>
          call(`ins${i}`, { command: 'insert', path: '/memories/log.md', insert_line: 1, insert_text: l }),
        ),
        call('twin1', { command: 'create', path: '/memories/twin.md', file_text: 'first twin\n' }),
        call('twin2', { command: 'create', path: '/memories/twin.md', file_text: 'second twin\n' }),
      ],
    ];
    const db = dir.db('race');
    const conversation = await withServer(db, (server) =>
      converse(memkvMemoryTool({ store: 'race', baseURL: server.baseURL, apiKey: server.apiKey }), turns),
    );
    const results = conversation.results[1]!;
    for (const [i, r] of results.slice(0, lines.length).entries()) {
      assert.deepEqual(r, {
        type: 'tool_result',
        tool_use_id: `ins${i}`,
        content: 'The file /memories/log.md has been edited.',
      });
    }
    const twins = results.slice(lines.length);
    const won = twins.filter((r) => !r.is_error);
    assert.equal(won.length, 1, JSON.stringify(twins));
    assert.deepEqual(
      twins.filter((r) => r.is_error).map((r) => r.content),
      ['Error: File /memories/twin.md already exists'],
    );

    const files = await storeFiles(db, 'race');
    const log = files['/memories/log.md']!.split('\n');
    assert.equal(log[0], 'head');
    assert.deepEqual(log.slice(1, -1).sort(), lines, 'every insert is in the file');
    assert.equal(files['/memories/twin.md'], won[0]!.tool_use_id === 'twin1' ? 'first twin\n' : 'second twin\n');
  });

  test('two stores never see each other', async () => {
    // Ids a URL parser would merge if they were not one encoded segment: `/`, `%2F`, `.`, `..`.
    const stores = ['alice@example.com', 'team/a b', 'team%2Fa b', 'team', '.', '..', 'team/..', '%2E'];
    const db = dir.db('isolation');
    const conversations = await withServer(db, (server) =>
      Promise.all(
        stores.map((store, i) =>
          converse(memkvMemoryTool({ store, baseURL: server.baseURL, apiKey: server.apiKey }), [
            [
              call('look', { command: 'view', path: '/memories' }),
              call('peek', { command: 'view', path: '/memories/secret.md' }),
            ],
            [call('write', { command: 'create', path: '/memories/secret.md', file_text: `secret of ${store}\n` })],
            [call('read', { command: 'view', path: '/memories/secret.md' })],
            [call('again', { command: 'create', path: `/memories/only-${i}.md`, file_text: `${i}\n` })],
          ]),
        ),
      ),
    );
    const fresh = await memkvExec(dir.db('isolation-ref'), 'nobody', [
      { command: 'view', path: '/memories' },
      { command: 'view', path: '/memories/secret.md' },
    ]);
    for (const [i, store] of stores.entries()) {
      const { results } = conversations[i]!;
      assert.deepEqual(results[0]!.map((r) => r.content), fresh.map((a) => a.content), store);
      assert.equal(results[1]![0]!.is_error, undefined, store);
      assert.match(String(results[2]![0]!.content), new RegExp(`secret of ${escape(store)}\n?$`));
      assert.deepEqual(await storeFiles(db, store), {
        '/memories/secret.md': `secret of ${store}\n`,
        [`/memories/only-${i}.md`]: `${i}\n`,
      });
    }
    assert.deepEqual((await storeUsers(db)).sort(), [...stores].sort());
  });

  test('a server restart between turns loses nothing', async () => {
    const turns: Turn[] = [
      [call('w1', { command: 'create', path: '/memories/plan.md', file_text: 'step 1\n' })],
      [
        call('r1', { command: 'view', path: '/memories/plan.md' }),
        call('w2', { command: 'str_replace', path: '/memories/plan.md', old_str: 'step 1', new_str: 'step 1 done' }),
      ],
      [call('r2', { command: 'view', path: '/memories' })],
    ];
    const db = dir.db('restart');
    let server = await serveLocal(db);
    const api = await ScriptedMessagesAPI.start(turns);
    const port = new URL(server.baseURL).port;
    let restarts = 0;
    try {
      const client = new Anthropic({ apiKey: 'sk-ant-scripted', baseURL: api.baseURL, maxRetries: 0 });
      const runner = client.beta.messages.toolRunner({
        model: 'claude-scripted',
        max_tokens: 1024,
        messages: [{ role: 'user', content: 'Plan.' }],
        tools: [memkvMemoryTool({ store: 'ops', baseURL: server.baseURL, apiKey: server.apiKey })],
        max_iterations: turns.length + 2,
      });
      for await (const message of runner) {
        // The loop body runs before the turn's calls: restart the server under the runner's feet,
        // on the same port, keeping the tool (and its pooled connections) as they are.
        if (message.stop_reason !== 'tool_use' || message.id === 'msg_scripted_001') continue;
        assert.equal(await server.close(), 0);
        server = await serveLocal(db, { listen: `127.0.0.1:${port}` });
        restarts++;
      }
    } finally {
      await api.close();
      assert.equal(await server.close(), 0);
    }
    assert.equal(restarts, 2);
    const expected = await memkvExec(dir.db('restart-ref'), 'ops', inputs(turns));
    let k = 0;
    assert.deepEqual(
      api.toolResults(),
      turns.map((turn) => turn.map((b) => expectedBlock(b as BetaToolUseBlock, expected[k++]!))),
    );
    assert.deepEqual(await storeFiles(db, 'ops'), { '/memories/plan.md': 'step 1 done\n' });
  });

  test('the recorded session through the runner gives byte-identical results to memkv exec', async () => {
    const lines = (await readFile(SESSION, 'utf8')).split('\n').filter((l) => l.trim().length > 0);
    const blocks = lines.map((l) => JSON.parse(l) as BetaToolUseBlock);
    // One tool_use per turn, so the calls run in the recorded order.
    const turns: Turn[] = blocks.map((b) => [b]);
    const expected = await memkvExec(dir.db('session-ref'), 'dana', lines);
    assert.equal(expected.length, blocks.length);
    assert.ok(expected.some((a) => a.is_error), 'the session has model mistakes in it');

    for (const thread of [undefined, false] as const) {
      const db = dir.db(`session-${thread}`);
      const { results, requests } = await withServer(db, (server) =>
        converse(
          memkvMemoryTool({ store: 'dana', baseURL: server.baseURL, apiKey: server.apiKey }),
          turns,
          thread === false ? { thread } : {},
        ),
      );
      assert.equal(requests.length, blocks.length + 1);
      // A message thread sends only the new tool results each turn; `thread: false` the whole history.
      const second = requests[1]!.body;
      if (thread === false) {
        assert.equal(second.thread, undefined);
        assert.equal(second.messages.length, 3);
      } else {
        assert.deepEqual(second.thread, { type: 'continue', previous_message_id: 'msg_scripted_001' });
        assert.equal(second.messages.length, 1);
      }
      assert.deepEqual(
        results,
        blocks.map((b, i) => [
          {
            type: 'tool_result',
            tool_use_id: expected[i]!.tool_use_id,
            content: expected[i]!.content,
            ...(expected[i]!.is_error ? { is_error: true } : {}),
          },
        ]),
      );
      for (const [i, r] of results.entries()) {
        assert.ok(
          Buffer.from(String(r[0]!.content), 'utf8').equals(Buffer.from(expected[i]!.content, 'utf8')),
          `byte-identical: ${blocks[i]!.id}`,
        );
      }
      assert.deepEqual(await storeFiles(db, 'dana'), await storeFiles(dir.db('session-ref'), 'dana'));
    }
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
