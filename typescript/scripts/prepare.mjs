// npm's `prepare` for this package: builds dist/ with tsc where TypeScript is installed (`npm ci`
// or `npm install` in this directory, `npm pack`, `npm publish`, a git dependency, and
// `npm install --install-links DIR` after `npm ci` in DIR). Two cases are refused, each with what
// to do instead:
//
// - A plain `npm install DIR` from another project, which links DIR instead of copying it: Node
//   then resolves this package's `@anthropic-ai/sdk` from DIR (its real path), never from the
//   project, so the project's tool runner and this package would use two copies of the SDK, and
//   the runner would no longer recognize memkv's ToolError (the model would read
//   `Error: <memkv's content>` instead of memkv's exact bytes).
// - No TypeScript here and no dist/ built before: there is nothing to install.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = dirname(dirname(fileURLToPath(import.meta.url)));
const name = 'memkv';

function fail(message) {
  console.error(`\nmemkv (${dir}): ${message}\n`);
  process.exit(1);
}

// A link from another project: npm has already made INIT_CWD/node_modules/memkv point here. When
// npm instead packs this directory (--install-links), it names it in npm_package_resolved.
const here = (path) => Boolean(path) && existsSync(path) && realpathSync(path) === realpathSync(dir);
const project = process.env.INIT_CWD;
if (project && !here(project) && !here(process.env.npm_package_resolved)) {
  const entry = join(project, 'node_modules', name);
  let linked = false;
  try {
    linked = lstatSync(entry).isSymbolicLink() && here(entry);
  } catch {
    linked = false;
  }
  if (linked) {
    fail(
      `installed as a link (\`npm install ${dir}\`), which would load a second copy of ` +
        '@anthropic-ai/sdk beside the project\'s and change what the model reads for errors. ' +
        `Install a copy instead: \`npm install --install-links ${dir}\` (after \`npm ci\` in ${dir}), ` +
        'or the tarball `npm pack` makes there.',
    );
  }
}

let tsc;
try {
  tsc = createRequire(join(dir, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  tsc = undefined;
}
/** Whether dist/ holds a build newer than every source file and tsconfig.json. */
function upToDate() {
  const built = (file) => (existsSync(file) ? statSync(file).mtimeMs : -Infinity);
  const sources = readdirSync(join(dir, 'src')).filter((f) => f.endsWith('.ts'));
  const config = statSync(join(dir, 'tsconfig.json')).mtimeMs;
  return sources.every((f) => {
    const out = built(join(dir, 'dist', f.replace(/\.ts$/, '.js')));
    return out >= statSync(join(dir, 'src', f)).mtimeMs && out >= config;
  });
}

if (tsc) {
  // Rebuilt only when a source changed, so that a build in use is not rewritten for nothing.
  if (!upToDate()) execFileSync(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { stdio: 'inherit' });
} else if (!existsSync(join(dir, 'dist', 'index.js'))) {
  fail(`dist/ is not built and TypeScript is not installed here: run \`npm ci\` in ${dir} first (it builds dist/), or install the tarball of \`npm pack\`.`);
}
