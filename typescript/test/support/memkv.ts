/** The real `memkv` binary, run the way an operator would: a fresh database per test. */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveLocal, type LocalServer } from '../../src/index.js';

export const MEMKV_BIN = process.env['MEMKV_BIN'] ?? 'memkv';

/** A fresh directory for databases, removed by `cleanup()`. */
export async function tempDir(): Promise<{ path: string; db: (name?: string) => string; cleanup: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), 'memkv-ts-'));
  return {
    path,
    db: (name = 'memkv') => join(path, `${name}.redb`),
    cleanup: () => rm(path, { recursive: true, force: true }),
  };
}

/** Runs `fn` with a `memkv serve` on a fresh database; the server is stopped (and must exit 0) afterwards. */
export async function withServer<T>(db: string, fn: (server: LocalServer) => Promise<T>): Promise<T> {
  const server = await serveLocal(db);
  let result: T;
  try {
    result = await fn(server);
  } catch (error) {
    await server.close();
    throw error;
  }
  const code = await server.close();
  if (code !== 0) throw new Error(`memkv serve exited with ${code} after SIGTERM`);
  return result;
}

/** A line of `memkv exec` output: a tool_result block for a tool_use line, else content and is_error. */
export interface ExecAnswer {
  type?: 'tool_result';
  tool_use_id?: string;
  content: string;
  is_error: boolean;
}

/** `memkv --db DB exec --user USER`, one JSON line per input: the serial reference answers. */
export function memkvExec(db: string, user: string, lines: unknown[]): Promise<ExecAnswer[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(MEMKV_BIN, ['--db', db, 'exec', '--user', user], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) {
        reject(new Error(`memkv exec exited ${code}: ${err}`));
        return;
      }
      resolve(out.split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as ExecAnswer));
    });
    child.stdin.end(lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l)) + '\n').join(''));
  });
}

function run(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(MEMKV_BIN, args, { timeout: 30_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`memkv ${args.join(' ')}: ${error.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** Every file of `user`, path to content, read with `memkv tree` and `memkv cat` (the server must be stopped). */
export async function storeFiles(db: string, user: string): Promise<Record<string, string>> {
  let tree: string;
  try {
    tree = await run(['--db', db, 'tree', '--user', user]);
  } catch (e) {
    // `tree` refuses a user with nothing stored ("no user …"): no files.
    if (e instanceof Error && e.message.includes(`no user ${JSON.stringify(user)}`)) return {};
    throw e;
  }
  const files: Record<string, string> = {};
  for (const line of tree.split('\n')) {
    const at = line.indexOf('  /memories');
    if (at < 0) continue;
    const path = line.slice(at + 2);
    files[path] = await run(['--db', db, 'cat', '--user', user, path]);
  }
  return files;
}

/** `memkv --db DB keys add --store STORE`: a key for that store alone (the key is the last line). */
export async function addStoreKey(db: string, store: string): Promise<string> {
  const out = await run(['--db', db, 'keys', 'add', '--store', store]);
  return out.trimEnd().split('\n').at(-1)!.trim();
}

/** The users `memkv users` lists. */
export async function storeUsers(db: string): Promise<string[]> {
  const out = await run(['--db', db, 'users']);
  return out
    .split('\n')
    .slice(1)
    .filter((l) => l.trim().length > 0)
    .map((l) => l.replace(/^\s*\d+\s+\d+\s{2}/, ''));
}
