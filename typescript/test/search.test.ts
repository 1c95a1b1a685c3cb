/**
 * memkvSearchTool (memkv's `memory_search`) beside memkvMemoryTool in the real SDK tool runner,
 * and MemkvClient.search, against a scripted Messages API and a real `memkv serve`. Expected
 * answers come from `memkv exec` answering the same blocks.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import type { BetaToolUseBlock } from '@anthropic-ai/sdk/resources/beta';
import { MemkvAPIError, MemkvClient, SEARCH_TOOL_DEFINITION, memkvMemoryTool, memkvSearchTool } from '../src/index.js';
import { MEMKV_BIN, memkvExec, tempDir, withServer } from './support/memkv.js';
import { converse, expectedBlock } from './support/runner.js';
import { memoryCall, searchCall, type Turn } from './support/scripted-api.js';

let dir: Awaited<ReturnType<typeof tempDir>>;
before(async () => {
  dir = await tempDir();
});
after(async () => {
  await dir.cleanup();
});

const TURNS: Turn[] = [
  [
    memoryCall('c1', { command: 'create', path: '/memories/notes/tz.md', file_text: '# Time\nlives in Paris\nTZ: Europe/Paris\n' }),
    memoryCall('c2', { command: 'create', path: '/memories/trips.md', file_text: 'Rome in May\nParis in June\n' }),
  ],
  [
    searchCall('s1', { query: 'paris europe' }),
    searchCall('s2', { query: 'Paris', mode: 'literal', context: 1 }),
    searchCall('s3', { query: '^tz', mode: 'regex', case_insensitive: true }),
    searchCall('s4', { query: '(', mode: 'regex' }),
    searchCall('s5', { query: 'london', path_prefix: '/memories/notes' }),
  ],
];

describe('memkvSearchTool', () => {
  test('its definition is memkv’s own', async () => {
    const printed = await new Promise<string>((resolve, reject) =>
      execFile(MEMKV_BIN, ['search', '--tool-definition'], { timeout: 30_000 }, (e, out) => (e ? reject(e) : resolve(out))),
    );
    assert.deepEqual(JSON.parse(printed), SEARCH_TOOL_DEFINITION);
    const tool = memkvSearchTool({ store: 'dana', baseURL: 'http://127.0.0.1:9', apiKey: 'k' });
    assert.equal(tool.name, 'memory_search');
    assert.deepEqual(tool.input_schema, SEARCH_TOOL_DEFINITION.input_schema);
  });

  test('the runner sends back what memkv exec answers the same blocks', async () => {
    const db = dir.db('search');
    const conversation = await withServer(db, (server) => {
      const options = { store: 'dana', baseURL: server.baseURL, apiKey: server.apiKey };
      return converse([memkvMemoryTool(options), memkvSearchTool(options)], TURNS);
    });
    const blocks = TURNS.flat() as BetaToolUseBlock[];
    const expected = await memkvExec(dir.db('search-ref'), 'dana', blocks);
    let k = 0;
    TURNS.forEach((turn, i) => {
      assert.deepEqual(
        conversation.results[i],
        turn.map((b) => expectedBlock(b as BetaToolUseBlock, expected[k++]!)),
        `turn ${i + 1}`,
      );
    });
    const tools = conversation.requests[0]!.body.tools as Array<Record<string, unknown>>;
    assert.deepEqual(tools[1], { type: 'custom', ...SEARCH_TOOL_DEFINITION });
    const [ranked, literal, , refused, none] = conversation.results[1]!;
    assert.match(String(ranked!.content), /^\/memories\/notes\/tz\.md \(score 0\.92\)\n/);
    assert.equal(
      literal!.content,
      '/memories/notes/tz.md-1- # Time\n/memories/notes/tz.md:2: lives in Paris\n/memories/notes/tz.md:3: TZ: Europe/Paris\n--\n/memories/trips.md-1- Rome in May\n/memories/trips.md:2: Paris in June',
    );
    assert.equal(refused!.is_error, true);
    assert.equal(none!.content, 'No memory matches "london".');
  });

  test('MemkvClient.search answers the route’s JSON', async () => {
    await withServer(dir.db('client'), async (server) => {
      const client = new MemkvClient({ baseURL: server.baseURL, apiKey: server.apiKey });
      await client.tool('dana', { command: 'create', path: '/memories/notes/tz.md', file_text: 'lives in Paris\nTZ: Europe/Paris\n' });
      await client.tool('dana', { command: 'create', path: '/memories/trips.md', file_text: 'Paris in June\n' });
      const found = await client.search('dana', { q: 'paris', mode: 'literal', caseInsensitive: true, pathPrefix: '/notes/' });
      assert.deepEqual(
        found.data.map((h) => [h.path, h.lines.map((l) => l.text)]),
        [['/notes/tz.md', ['lives in Paris', 'TZ: Europe/Paris']]],
      );
      const ranked = await client.search('dana', { q: 'paris europe', limit: 1 });
      assert.equal(ranked.data[0]!.path, '/notes/tz.md');
      assert.equal(ranked.more, 1);
      assert.ok(ranked.data[0]!.score! > 0);
      await assert.rejects(client.search('dana', { q: 'x', mode: 'fuzzy' as 'regex' }), (e: unknown) => {
        assert.ok(e instanceof MemkvAPIError);
        assert.equal(e.status, 400);
        return true;
      });
    });
  });
});
