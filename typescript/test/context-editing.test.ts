/**
 * examples/typescript/context-editing.ts run as a user runs it (compiled, in its own process;
 * docs/context-editing.md): the real SDK tool runner with memkv's memory and memory_search tools
 * against a real `memkv serve`, and the scripted Messages API reading what the SDK sends: the
 * context-management beta and the `clear_tool_uses_20250919` edit that spares both memory tools,
 * on every request.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { storeFiles, tempDir, withServer } from './support/memkv.js';
import { FINAL_TEXT, ScriptedMessagesAPI, memoryCall, searchCall } from './support/scripted-api.js';

const EXAMPLE = fileURLToPath(new URL('../examples/context-editing.js', import.meta.url));
const NOTE = '- LEDGER-7: rounding bug, blocks release\n';
const APPLIED = { type: 'clear_tool_uses_20250919', cleared_tool_uses: 2, cleared_input_tokens: 31_000 };

test('the runner sends the context-editing edit, and memory works through it', async () => {
  const dir = await tempDir();
  const api = await ScriptedMessagesAPI.start([
    [
      memoryCall('m1', { command: 'view', path: '/memories' }),
      memoryCall('m2', { command: 'create', path: '/memories/tickets.md', file_text: NOTE }),
    ],
    [searchCall('s1', { query: 'release blocker' })],
  ]);
  // The API reports the edits it applied on the reply (here: the last one).
  api.finalFields = { context_management: { applied_edits: [APPLIED] } };
  try {
    const { stdout, stderr } = await withServer(dir.db(), async (server) => {
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        ANTHROPIC_API_KEY: 'sk-ant-scripted',
        ANTHROPIC_BASE_URL: api.baseURL,
        MEMKV_URL: server.baseURL,
        MEMKV_API_KEY: server.apiKey,
      };
      return new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
        execFile(process.execPath, [EXAMPLE, 'dana', 'Review the open tickets.'], { env, timeout: 60_000 }, (error, stdout, stderr) => {
          if (error) reject(new Error(`${error.message}\n${stderr}`));
          else resolve({ stdout, stderr });
        });
      });
    });
    assert.equal(stdout, `${FINAL_TEXT}\n`);
    assert.ok(stderr.includes('[context] clear_tool_uses_20250919: {"cleared_tool_uses":2,"cleared_input_tokens":31000}'), stderr);

    // Every request, the first and those that continue it, carries the beta and the edit.
    assert.equal(api.requests.length, 3);
    for (const { headers, body } of api.requests) {
      assert.ok(String(headers['anthropic-beta']).split(',').includes('context-management-2025-06-27'), String(headers['anthropic-beta']));
      assert.deepEqual(body.context_management, {
        edits: [
          {
            type: 'clear_tool_uses_20250919',
            trigger: { type: 'input_tokens', value: 30_000 },
            keep: { type: 'tool_uses', value: 3 },
            clear_at_least: { type: 'input_tokens', value: 5_000 },
            exclude_tools: ['memory', 'memory_search'],
          },
        ],
      });
    }
    assert.deepEqual(api.requests[0]!.body.tools?.map((t) => t.name), ['memory', 'memory_search']);

    // The memory tools work through the runner: memkv's answers, and the note kept.
    const results = api.toolResults().flat();
    assert.deepEqual(results.map((r) => [r.tool_use_id, r.is_error ?? false]), [['m1', false], ['m2', false], ['s1', false]]);
    assert.equal(results[1]!.content, 'File created successfully at: /memories/tickets.md');
    assert.match(String(results[2]!.content), /\/memories\/tickets\.md:1: - LEDGER-7: rounding bug, blocks release/);
    assert.deepEqual(await storeFiles(dir.db(), 'dana'), { '/memories/tickets.md': NOTE });
  } finally {
    await api.close();
    await dir.cleanup();
  }
});
