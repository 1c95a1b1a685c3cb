/**
 * The package installed into a separate project, outside the repository, as its README says: from
 * the directory (`npm install --install-links DIR`) and from the tarball of `npm pack`, next to
 * the SDK at this package's lowest supported version (1.14.0) and at the newest 1.x on the
 * registry. In each project a script runs the real SDK tool runner (the Messages API scripted
 * through the client's `fetch`) with `memkvMemoryTool` against a real `memkv serve`, and again
 * in-process (`db`, the package's native addon), with no cargo on PATH; the model must read
 * exactly what `memkv exec` prints, also for an error. The package's `memkv` command answers.
 * A plain `npm install DIR` (a link, which would load a second copy of the SDK) is refused with
 * what to do instead.
 *
 * npm uses its cache (`MEMKV_NPM_CACHE`, else npm's default) and the registry for what the cache
 * lacks.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { lstat, mkdir, readFile, readdir, realpath, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { serveLocal, type LocalServer } from '../src/index.js';
import { memkvExec, tempDir } from './support/memkv.js';

const PACKAGE_DIR = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');
const REPO = join(PACKAGE_DIR, '..');
const NPM_TIMEOUT_MS = 240_000;

/** The model's two turns: the same create twice, so the second is memkv's error. */
const CALLS = [1, 2].map((n) => ({
  type: 'tool_use',
  id: `t${n}`,
  name: 'memory',
  input: { command: 'create', path: '/memories/prefs.md', file_text: 'x' },
}));

/** The consumer's script: the SDK's tool runner with memkv's tool; prints the SDK version and the tool_result blocks sent back. */
const APP = `
import { readFileSync } from 'node:fs';
import Anthropic from '@anthropic-ai/sdk';
import { memkvMemoryTool } from 'memkv';

const turns = JSON.parse(process.env.TURNS);
const requests = [];
async function scripted(url, init) {
  const body = JSON.parse(await new Response(init.body).text());
  requests.push(body);
  const i = requests.length - 1;
  const content = turns[i] ? [turns[i]] : [{ type: 'text', text: 'done', citations: null }];
  const message = {
    id: 'msg_' + i, type: 'message', role: 'assistant', model: body.model, content,
    stop_reason: turns[i] ? 'tool_use' : 'end_turn', stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 },
  };
  return new Response(JSON.stringify(message), { status: 200, headers: { 'content-type': 'application/json', 'request-id': 'req_' + i } });
}
const client = new Anthropic({ apiKey: 'sk-ant-scripted', fetch: scripted, maxRetries: 0 });
const runner = client.beta.messages.toolRunner({
  model: 'claude-scripted', max_tokens: 64, messages: [{ role: 'user', content: 'Remember my preferences.' }],
  tools: [memkvMemoryTool(process.env.DB ? { store: process.env.STORE, db: process.env.DB } : { store: process.env.STORE })],
  max_iterations: turns.length + 1,
});
await runner.runUntilDone();
const results = requests.slice(1).flatMap((b) => b.messages.at(-1).content.filter((c) => c.type === 'tool_result'));
const { version } = JSON.parse(readFileSync('node_modules/@anthropic-ai/sdk/package.json', 'utf8'));
console.log(JSON.stringify({ version, results }));
`;

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env, timeout: NPM_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

const NPM_FLAGS = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];
const npmEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (process.env['MEMKV_NPM_CACHE']) env['npm_config_cache'] = process.env['MEMKV_NPM_CACHE'];
  // The suite's own npm run (if any) must not leak its package's settings into the projects.
  for (const key of Object.keys(env)) if (key.startsWith('npm_') && key !== 'npm_config_cache') delete env[key];
  delete env['INIT_CWD'];
  return env;
};

async function npm(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return run('npm', [...args, ...NPM_FLAGS], cwd, npmEnv());
}

/** A fresh project `name` in `root`: an ESM package.json and the consumer's script. */
async function project(root: string, name: string): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir);
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: `consumer-${name}`, version: '1.0.0', private: true, type: 'module' }));
  await writeFile(join(dir, 'app.mjs'), APP);
  return dir;
}

/** Every copy of the SDK in the project's node_modules, at any depth. */
async function sdkCopies(dir: string): Promise<string[]> {
  const entries = await readdir(join(dir, 'node_modules'), { recursive: true });
  return entries.filter((e) => e.split(sep).slice(-3).join('/') === '@anthropic-ai/sdk/package.json');
}

let tmp: Awaited<ReturnType<typeof tempDir>>;
let server: LocalServer;
let tarball: string;
/** The newest 1.x of the SDK on the registry. */
let newest: string;
before(async () => {
  const viewed = await npm(['view', '@anthropic-ai/sdk@^1', 'version', '--json'], tmpdir());
  assert.equal(viewed.code, 0, viewed.stderr);
  const versions: string | string[] = JSON.parse(viewed.stdout);
  newest = Array.isArray(versions) ? versions.at(-1)! : versions;
  tmp = await tempDir();
  const relativeToRepo = relative(await realpath(REPO), await realpath(tmp.path));
  assert.ok(relativeToRepo.startsWith('..'), `${tmp.path} must be outside the repository`);
  server = await serveLocal(tmp.db());
  const packed = await npm(['pack', '--pack-destination', tmp.path], PACKAGE_DIR);
  assert.equal(packed.code, 0, packed.stderr);
  tarball = join(tmp.path, packed.stdout.trim().split('\n').at(-1)!);
}, { timeout: 600_000 });
after(async () => {
  await server?.close();
  await tmp?.cleanup();
});

async function expected(store: string): Promise<Array<{ content: string; is_error: boolean }>> {
  const answers = await memkvExec(tmp.db(`exec-${store}`), store, CALLS);
  return answers.map(({ content, is_error }) => ({ content, is_error }));
}

/** The environment without cargo: PATH keeps only the system's directories and Node's. */
function withoutCargo(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const path = (process.env['PATH'] ?? '').split(':').filter((p) => !/cargo|rustup/.test(p));
  return { ...process.env, PATH: path.join(':'), ...extra };
}

async function runApp(
  dir: string,
  store: string,
  db?: string,
): Promise<{ version: string; results: Array<{ tool_use_id: string; content: string; is_error?: boolean }> }> {
  const where = db ? { DB: db } : { MEMKV_URL: server.baseURL, MEMKV_API_KEY: server.apiKey };
  const env = withoutCargo({ TURNS: JSON.stringify(CALLS), STORE: store, ...where });
  const done = await run(process.execPath, ['app.mjs'], dir, env);
  assert.equal(done.code, 0, done.stderr);
  return JSON.parse(done.stdout.trim().split('\n').at(-1)!);
}

describe('installed into another project', { timeout: 900_000 }, () => {
  const cases: Array<[string, (dir: string) => string[], string]> = [
    ['from the directory (--install-links), SDK 1.14.0', () => ['install', '--install-links', PACKAGE_DIR, '@anthropic-ai/sdk@1.14.0'], 'dir'],
    ['from the npm pack tarball, SDK 1.14.0', () => ['install', tarball, '@anthropic-ai/sdk@1.14.0'], 'tgz'],
    ['from the npm pack tarball, the newest SDK 1.x', () => ['install', tarball, `@anthropic-ai/sdk@${newest}`], 'latest'],
  ];
  for (const [name, args, store] of cases) {
    test(name, { timeout: 600_000 }, async () => {
      const dir = await project(tmp.path, store);
      const installed = await npm(args(dir), dir);
      assert.equal(installed.code, 0, installed.stderr);
      assert.equal((await lstat(join(dir, 'node_modules', 'memkv'))).isSymbolicLink(), false, 'a copy, not a link');
      assert.deepEqual(await sdkCopies(dir), [join('@anthropic-ai', 'sdk', 'package.json')], 'one copy of the SDK');
      const { version, results } = await runApp(dir, store);
      assert.match(version, /^1\.\d+\.\d+$/);
      assert.equal(version, store === 'latest' ? newest : '1.14.0');
      if (store === 'latest') console.log(`# the newest @anthropic-ai/sdk 1.x: ${version}`);
      const want = await expected(store);
      assert.deepEqual(
        results.map((r) => ({ content: r.content, is_error: r.is_error === true })),
        want,
      );
      // What the model reads for the error, byte for byte: memkv's, not `Error: Error: ...`.
      assert.equal(results[1]!.content, 'Error: File /memories/prefs.md already exists');
      // In this process: the same answers, from the addon the package carries.
      const inProcess = await runApp(dir, store, join(dir, 'memory.redb'));
      assert.deepEqual(
        inProcess.results.map((r) => ({ content: r.content, is_error: r.is_error === true })),
        want,
      );
      // The package's `memkv` command (the addon's CLI), on that database.
      const bin = join(dir, 'node_modules', '.bin', 'memkv');
      const version_ = await run(bin, ['--version'], dir, withoutCargo({}));
      assert.equal(version_.code, 0, version_.stderr);
      assert.match(version_.stdout, /^memkv \d/);
      const cat = await run(bin, ['--db', join(dir, 'memory.redb'), 'cat', '--user', store, '/memories/prefs.md'], dir, withoutCargo({}));
      assert.equal(cat.code, 0, cat.stderr);
      assert.equal(cat.stdout, 'x');
      const lock = JSON.parse(await readFile(join(dir, 'package-lock.json'), 'utf8'));
      assert.equal(lock.packages['node_modules/memkv'].peerDependencies['@anthropic-ai/sdk'], '^1.14.0');
    });
  }

  test('a plain npm install DIR (a link) is refused with what to do instead', { timeout: 600_000 }, async () => {
    const dir = await project(tmp.path, 'link');
    const installed = await npm(['install', PACKAGE_DIR, '@anthropic-ai/sdk@1.14.0'], dir);
    assert.notEqual(installed.code, 0);
    assert.match(installed.stderr, /installed as a link/);
    assert.match(installed.stderr, /npm install --install-links /);
  });
});
