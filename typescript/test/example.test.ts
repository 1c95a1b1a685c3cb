/**
 * examples/typescript/agent.ts, run as a user runs it (compiled, in its own process), with the
 * Claude API replaced by the scripted one through ANTHROPIC_BASE_URL. Without MEMKV_URL it starts
 * its own `memkv serve` on a database in the working directory.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { storeFiles, tempDir } from './support/memkv.js';
import { FINAL_TEXT, ScriptedMessagesAPI, memoryCall } from './support/scripted-api.js';

const AGENT = fileURLToPath(new URL('../examples/agent.js', import.meta.url));

test('the example agent keeps its memory in memkv', async () => {
  const dir = await tempDir();
  const api = await ScriptedMessagesAPI.start([
    [memoryCall('m1', { command: 'view', path: '/memories' })],
    [memoryCall('m2', { command: 'create', path: '/memories/user.md', file_text: '- Name: Dana\n' })],
  ]);
  try {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ANTHROPIC_API_KEY: 'sk-ant-scripted',
      ANTHROPIC_BASE_URL: api.baseURL,
    };
    delete env['MEMKV_URL'];
    delete env['MEMKV_API_KEY'];
    const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
      execFile(process.execPath, [AGENT, 'dana', "I'm Dana."], { cwd: dir.path, env, timeout: 60_000 }, (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message}\n${stderr}`));
        else resolve({ stdout, stderr });
      });
    });
    assert.equal(stdout, `${FINAL_TEXT}\n`);
    assert.match(stderr, /\[memory\] \{"command":"create","path":"\/memories\/user.md"/);
    assert.equal(api.requests[0]!.body.messages[0]!.content, "I'm Dana.");
    assert.deepEqual(
      api.toolResults().map((r) => r.map((b) => b.content)),
      [
        ["Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories"],
        ['File created successfully at: /memories/user.md'],
      ],
    );
    assert.deepEqual(await storeFiles(`${dir.path}/memkv-example.redb`, 'dana'), { '/memories/user.md': '- Name: Dana\n' });
  } finally {
    await api.close();
    await dir.cleanup();
  }
});
