/**
 * The native addon (crates/memkv-node, napi-rs): memkv in this Node process. Built into
 * `native/memkv.node` beside `dist/` (`npm run build:native`, or tools/test-typescript.sh), and
 * loaded the first time a database is opened, so that a program that only talks to a server
 * never loads it.
 */
import { createRequire } from 'node:module';
import { MemkvError } from './errors.js';

/** What every call of the addon answers: the HTTP route's status and JSON body. */
export interface Reply {
  status: number;
  body: string;
}

/** What a call answers: 200 with the text the model reads, or the route's refusal (`text` its JSON body). */
export interface Called {
  status: number;
  text: string;
  isError: boolean;
}

/** The addon's search parameters. */
export interface NativeSearchParams {
  mode?: string | undefined;
  caseInsensitive?: boolean | undefined;
  pathPrefix?: string | undefined;
  context?: number | undefined;
  limit?: number | undefined;
}

/** An open database, as the addon hands it out. */
export interface NativeDatabase {
  readonly readOnly: boolean;
  tool(store: string, body: string): Promise<Reply>;
  call(store: string, body: string): Promise<Called>;
  search(store: string, query: string, params: NativeSearchParams): Promise<Reply>;
  deleteStore(store: string): Promise<Reply>;
  stores(): Promise<Reply>;
  export(stores: string[], file: string): Promise<Reply>;
  importFile(file: string, conflict: string | undefined | null): Promise<Reply>;
  expire(dryRun: boolean): Promise<Reply>;
  history(store: string, path: string | undefined | null): Promise<Reply>;
  close(): Promise<Reply>;
}

/** The addon's exports. */
export interface Native {
  open(location: string, readOnly: boolean, shared: boolean): Promise<NativeDatabase>;
  Database: { openSync(location: string, readOnly: boolean, shared: boolean): NativeDatabase };
  cli(argv: string[]): number;
}

let loaded: Native | undefined;

/**
 * The addon, loaded once: `MEMKV_NATIVE_ADDON` if set, else `native/memkv.node` of the package
 * (one level up from `dist/`, two from the tests' `build/src/`).
 */
export function native(): Native {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  const given = process.env['MEMKV_NATIVE_ADDON'];
  const candidates = given ? [given] : ['../native/memkv.node', '../../native/memkv.node'];
  let first: unknown;
  for (const candidate of candidates) {
    try {
      loaded = require(candidate) as Native;
      return loaded;
    } catch (e) {
      first ??= e;
    }
  }
  throw new MemkvError(
    `memkv: the native addon is not built (${candidates.join(', ')}): run \`npm run build:native\` in the package (cargo needed), or install a package that carries it`,
    { cause: first },
  );
}
