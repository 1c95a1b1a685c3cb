// Per-call latency of the memory tool from Node, one run, three tools side by side: the SDK's own
// `BetaLocalFilesystemMemoryTool` (files in a temporary directory), memkv over HTTP
// (`memkv serve` on loopback, started with the package's serveLocal) and memkv in this process
// (`db`, the native addon). Every tool is called through `tool.run(input)`, what the SDK's tool
// runner calls, in alternating blocks of calls so that all three see the same machine. Then
// durable creates from 8 concurrent promises against 1, per tool.
//
//   npm run build && MEMKV_NODE_PROFILE=release npm run build:native
//   MEMKV_BIN=target/release/memkv node typescript/bench/tool-bench.mjs [--reps 300] [--json]
//
// Bounded: reps per command (default 300, at most 5000), loopback only.
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { betaMemoryTool } from '@anthropic-ai/sdk/helpers/beta/memory';
import { BetaLocalFilesystemMemoryTool } from '@anthropic-ai/sdk/tools/memory/node';
import { memkvMemoryTool, serveLocal } from '../dist/index.js';

const args = process.argv.slice(2);
const reps = Math.max(1, Math.min(5000, Number(args[args.indexOf('--reps') + 1]) || 300));
const asJson = args.includes('--json');
const BLOCK = 10;

function text(n) {
  let out = '';
  for (let i = 0; out.length < n; i++) out += `- line ${String(i).padStart(5, '0')}: the quick brown fox jumps over the lazy dog\n`;
  return out.slice(0, n - 1) + '\n';
}

const setup = [
  { command: 'create', path: '/memories/notes.md', file_text: 'MARKER-A\n' + text(4096) },
  ...Array.from({ length: 50 }, (_, i) => ({ command: 'create', path: `/memories/dir/f${String(i).padStart(3, '0')}.md`, file_text: `file ${i}\n` })),
];
const kib = text(1024);
const timed = {
  'view directory (50 files)': Array.from({ length: reps }, () => ({ command: 'view', path: '/memories/dir' })),
  'view file (4 KiB)': Array.from({ length: reps }, () => ({ command: 'view', path: '/memories/notes.md' })),
  'create (1 KiB, durable)': Array.from({ length: reps }, (_, i) => ({ command: 'create', path: `/memories/new/f${i}.md`, file_text: kib })),
  'str_replace (4 KiB file)': Array.from({ length: reps }, (_, i) => ({
    command: 'str_replace', path: '/memories/notes.md',
    old_str: i % 2 ? 'MARKER-B' : 'MARKER-A', new_str: i % 2 ? 'MARKER-A' : 'MARKER-B',
  })),
};

function stats(samples) {
  samples.sort((a, b) => a - b);
  return { median_us: samples[Math.floor(samples.length / 2)], p99_us: samples[Math.min(samples.length - 1, Math.floor(samples.length * 0.99))] };
}

async function call(tool, input) {
  try {
    await tool.run(input);
  } catch {
    // A model mistake costs the same round trip.
  }
}

/** Creates per second from `n` concurrent callers, `per` creates each. */
async function rate(tool, n, per, tag) {
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: n }, async (_, w) => {
    for (let i = 0; i < per; i++) await call(tool, { command: 'create', path: `/memories/rate-${tag}/w${w}/f${i}.md`, file_text: kib });
  }));
  return (n * per) / (Number(process.hrtime.bigint() - started) / 1e9);
}

const tmp = await mkdtemp(join(tmpdir(), 'memkv-node-bench-'));
const server = await serveLocal(join(tmp, 'served.redb'));
try {
  const tools = {
    local_filesystem: betaMemoryTool(await BetaLocalFilesystemMemoryTool.init(join(tmp, 'fs'))),
    memkv_http: memkvMemoryTool({ store: 'bench', baseURL: server.baseURL, apiKey: server.apiKey }),
    memkv_in_process: memkvMemoryTool({ store: 'bench', db: join(tmp, 'in-process.redb') }),
  };
  for (const tool of Object.values(tools)) {
    for (const input of setup) await call(tool, input);
    for (let i = 0; i < 20; i++) await call(tool, { command: 'view', path: '/memories/notes.md' });
  }
  const out = Object.fromEntries(Object.keys(tools).map((k) => [k, {}]));
  for (const [command, inputs] of Object.entries(timed)) {
    const samples = Object.fromEntries(Object.keys(tools).map((k) => [k, []]));
    for (let at = 0; at < inputs.length; at += BLOCK) {
      for (const [name, tool] of Object.entries(tools)) {
        for (const input of inputs.slice(at, at + BLOCK)) {
          const t = process.hrtime.bigint();
          await call(tool, input);
          samples[name].push(Number(process.hrtime.bigint() - t) / 1000);
        }
      }
    }
    for (const name of Object.keys(tools)) out[name][command] = stats(samples[name]);
  }
  const concurrency = {};
  for (const [name, tool] of Object.entries(tools)) {
    const one = await rate(tool, 1, 100, `${name}-1`);
    const eight = await rate(tool, 8, 50, `${name}-8`);
    concurrency[name] = { one_per_s: one, eight_per_s: eight, ratio: eight / one };
  }
  const machine = `${cpus()[0]?.model ?? 'cpu'}, ${cpus().length} cores, Node ${process.version}, load average ${loadavg()[0].toFixed(1)}`;
  if (asJson) {
    console.log(JSON.stringify({ machine, reps, latency: out, concurrency }, null, 2));
  } else {
    console.log(`machine: ${machine}; ${reps} calls per command, one caller`);
    console.log('');
    console.log('| command | local filesystem, median (p99) | memkv HTTP, median (p99) | memkv in-process, median (p99) |');
    console.log('|---|---:|---:|---:|');
    const f = (s) => `${s.median_us.toFixed(0)} µs (${s.p99_us.toFixed(0)} µs)`;
    for (const command of Object.keys(timed)) {
      console.log(`| ${command} | ${f(out.local_filesystem[command])} | ${f(out.memkv_http[command])} | ${f(out.memkv_in_process[command])} |`);
    }
    console.log('');
    console.log('| durable creates, 1 caller vs 8 concurrent promises | 1 | 8 | ratio |');
    console.log('|---|---:|---:|---:|');
    for (const [name, c] of Object.entries(concurrency)) {
      console.log(`| ${name} | ${c.one_per_s.toFixed(0)}/s | ${c.eight_per_s.toFixed(0)}/s | ${c.ratio.toFixed(2)}× |`);
    }
  }
} finally {
  await server.close();
  await rm(tmp, { recursive: true, force: true });
}
