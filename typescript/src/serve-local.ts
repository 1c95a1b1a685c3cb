import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { MemkvError } from './errors.js';

/** A `memkv serve` started by {@link serveLocal}. */
export interface LocalServer {
  /** e.g. `http://127.0.0.1:40123` */
  readonly baseURL: string;
  /** A fresh admin key, good for every store. */
  readonly apiKey: string;
  /** The server's process id. */
  readonly pid: number;
  /** Stops the server (SIGTERM, then SIGKILL after `stopTimeoutMs`); resolves to its exit code. */
  close(): Promise<number | null>;
}

/** Options of {@link serveLocal}. */
export interface ServeLocalOptions {
  /** The `memkv` binary. Default: `MEMKV_BIN`, else `memkv` on `PATH` (a missing one is a `MemkvError` that says where to put it). */
  bin?: string | undefined;
  /** The address to listen on. Default: `127.0.0.1:0`, a free loopback port. */
  listen?: string | undefined;
  /** More arguments before `serve`, e.g. store limits: `['--max-file-bytes', '4096']`. */
  args?: readonly string[] | undefined;
  /** How long the server may take to listen and be ready, in milliseconds. Default: 15,000. */
  startTimeoutMs?: number | undefined;
  /** How long `close()` waits after SIGTERM before it kills, in milliseconds. Default: 5,000. */
  stopTimeoutMs?: number | undefined;
}

const LISTENING = /^listening on (http:\/\/\S+)$/;

/**
 * Starts `memkv --db DB serve` on a free loopback port with a fresh admin key, for tests and
 * notebooks. Resolves once the server answers `/readyz`. The server always has that key, so it
 * checks keys like any other: it is never started keyless (`serve --no-auth`, which memkv refuses
 * anyway once a key exists).
 *
 * @example
 * const server = await serveLocal('/tmp/memkv.redb');
 * try {
 *   const memory = memkvMemoryTool({ store: 'alice', baseURL: server.baseURL, apiKey: server.apiKey });
 *   // ...
 * } finally {
 *   await server.close();
 * }
 */
export async function serveLocal(dbPath: string, options: ServeLocalOptions = {}): Promise<LocalServer> {
  const bin = options.bin ?? process.env['MEMKV_BIN'] ?? 'memkv';
  const extra = options.args ?? [];
  const startTimeoutMs = options.startTimeoutMs ?? 15_000;
  const stopTimeoutMs = options.stopTimeoutMs ?? 5_000;
  const deadline = Date.now() + startTimeoutMs;

  const apiKey = await addAdminKey(bin, dbPath, extra, startTimeoutMs);
  const listen = options.listen ?? '127.0.0.1:0';
  const child = spawn(bin, ['--db', dbPath, ...extra, 'serve', '--listen', listen], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr = tail(child);
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    // A binary that could not be started never exits: it only reports the error.
    child.once('error', () => {
      if (child.pid === undefined) resolve(null);
    });
  });
  const close = () => stop(child, exited, stopTimeoutMs);
  try {
    const baseURL = await listeningURL(child, exited, deadline, stderr);
    await waitReady(baseURL, exited, deadline, stderr);
    return { baseURL, apiKey, pid: child.pid!, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** `memkv --db DB keys add --admin`: the key is alone on the last line of stdout. */
function addAdminKey(bin: string, dbPath: string, extra: readonly string[], timeout: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      bin,
      ['--db', dbPath, ...extra, 'keys', 'add', '--admin'],
      { timeout, killSignal: 'SIGKILL' },
      (error, stdout, stderr) => {
        if (error && (error as NodeJS.ErrnoException).code === 'ENOENT') {
          reject(
            new MemkvError(
              `memkv: no \`${bin}\` binary to run: put memkv on PATH (\`cargo install --path crates/memkv-cli\` in memkv's repository), set MEMKV_BIN to its path, or pass { bin }`,
              { cause: error },
            ),
          );
          return;
        }
        if (error) {
          reject(new MemkvError(`memkv: \`${bin} keys add --admin\` failed: ${error.message}\n${stderr}`, { cause: error }));
          return;
        }
        const key = stdout.trimEnd().split('\n').at(-1)?.trim();
        if (!key) {
          reject(new MemkvError(`memkv: \`${bin} keys add --admin\` printed no key`));
          return;
        }
        resolve(key);
      },
    );
  });
}

/** The last lines of the server's stderr, for error messages; reading it also keeps the pipe from filling. */
function tail(child: ChildProcess): () => string {
  let text = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    text = (text + chunk).slice(-4000);
  });
  return () => text;
}

function listeningURL(
  child: ChildProcess,
  exited: Promise<number | null>,
  deadline: number,
  stderr: () => string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(
      () => fail(`did not print "listening on ..." in time\n${stderr()}`),
      Math.max(0, deadline - Date.now()),
    );
    const fail = (why: string) => {
      clearTimeout(timer);
      lines.close();
      reject(new MemkvError(`memkv serve ${why}`));
    };
    lines.on('line', (line) => {
      const match = LISTENING.exec(line.trim());
      if (match) {
        clearTimeout(timer);
        // Keep draining stdout so the server never blocks on a full pipe.
        lines.removeAllListeners('line');
        resolve(match[1]!);
      }
    });
    exited.then((code) => fail(`exited (code ${code}) before listening\n${stderr()}`));
    child.once('error', (error) => fail(`could not start: ${error.message}`));
  });
}

async function waitReady(
  baseURL: string,
  exited: Promise<number | null>,
  deadline: number,
  stderr: () => string,
): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  let last = '';
  while (Date.now() < deadline && !gone) {
    try {
      const response = await fetch(`${baseURL}/readyz`, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.ok) return;
      last = `status ${response.status}`;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    await sleep(25);
  }
  throw new MemkvError(`memkv serve at ${baseURL} did not become ready (${gone ? 'it exited' : last})\n${stderr()}`);
}

async function stop(child: ChildProcess, exited: Promise<number | null>, timeoutMs: number): Promise<number | null> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return exited;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}
