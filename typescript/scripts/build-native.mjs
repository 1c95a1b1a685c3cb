// Builds the native addon (crates/memkv-node, napi-rs) with cargo and puts it at
// native/memkv.node, stripped of debug symbols: memkv in the Node process, and the `memkv`
// command (bin/memkv.js). MEMKV_NODE_PROFILE picks cargo's profile: `release` (the default: what
// a package to publish carries) or `dev` (the tests': it reuses what `cargo test` compiled).
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, renameSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = dirname(dirname(fileURLToPath(import.meta.url)));
const profile = process.env.MEMKV_NODE_PROFILE ?? 'release';
const cargo = process.env.CARGO ?? 'cargo';
execFileSync(cargo, ['build', '--locked', '-p', 'memkv-node', '--profile', profile], { cwd: dir, stdio: 'inherit' });
const meta = JSON.parse(execFileSync(cargo, ['metadata', '--format-version', '1', '--no-deps'], { cwd: dir }).toString());
const built = join(meta.target_directory, profile === 'dev' ? 'debug' : profile, 'libmemkv_node.so');
mkdirSync(join(dir, 'native'), { recursive: true });
const out = join(dir, 'native', 'memkv.node');
const tmp = `${out}.tmp`;
try {
  execFileSync('strip', ['--strip-debug', '-o', tmp, built], { stdio: 'inherit' });
} catch {
  copyFileSync(built, tmp);
}
renameSync(tmp, out);
console.log(out);
