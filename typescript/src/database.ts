import type { SearchQuery, SearchResults, ToolOutput } from './client.js';
import { MemkvAPIError, MemkvError, MemkvLockedError } from './errors.js';
import { native, type NativeDatabase, type Reply } from './native.js';

/** The location of a database held in memory: each open of it is a new, empty database. */
export const IN_MEMORY = ':memory:';

/** How to open a {@link MemkvDatabase}. */
export interface MemkvDatabaseOptions {
  /** Open an existing database without writing to it (beside a writer opened with `shared`). */
  readOnly?: boolean | undefined;
  /** Let read-only opens of other processes in beside this writer (costs a second flush per commit). */
  shared?: boolean | undefined;
}

const LOCKED_REMEDY =
  'one process at a time may write a memkv database: to share it between processes, serve it ' +
  '(`memkv serve --db FILE`) and pass baseURL instead of db; or open it read-only ' +
  '(MemkvDatabase.open(FILE, { readOnly: true })) beside a writer that opened it with shared: true';

const WHO = 'memkv (in process)';

/** The error of an open the addon refused (`code`, and the message). */
function openError(code: string, message: string): MemkvError {
  if (code === 'locked') return new MemkvLockedError(`memkv: ${message}; ${LOCKED_REMEDY}`);
  return new MemkvError(`memkv: ${message}`);
}

/** The JSON of a 200 reply; otherwise the error the HTTP client would throw for that answer. */
function json(reply: Reply): unknown {
  const body: unknown = JSON.parse(reply.body);
  if (reply.status === 200) return body;
  const envelope = (body as { error?: { type?: string; message?: string } }).error;
  throw new MemkvAPIError(reply.status, envelope?.type ?? null, envelope?.message ?? reply.body, null, WHO);
}

/**
 * A memkv database open in this process: a redb file (created if missing), `":memory:"`, or a
 * `postgres://` URL. Every call runs on libuv's thread pool; the event loop goes on meanwhile.
 *
 * ```ts
 * const db = await MemkvDatabase.open('memory.redb');
 * const memory = memkvMemoryTool({ store: 'dana', db });
 * const search = memkvSearchTool({ store: 'dana', db });
 * ```
 *
 * Objects of one process that name the same file share one open database. Another process that
 * has the file open for writing makes the open fail at once with a {@link MemkvLockedError},
 * which says what to do instead. The file is closed once no object of the process uses it
 * (after {@link MemkvDatabase.close} on every object that opened it).
 */
export class MemkvDatabase {
  readonly location: string;
  #db: NativeDatabase | null;

  private constructor(location: string, db: NativeDatabase) {
    this.location = location;
    this.#db = db;
  }

  /** Opens `location` off the event loop. */
  static async open(location: string, options: MemkvDatabaseOptions = {}): Promise<MemkvDatabase> {
    const addon = native();
    let db: NativeDatabase;
    try {
      db = await addon.open(location, options.readOnly ?? false, options.shared ?? false);
    } catch (e) {
      const [code = 'error', message = String(e)] = (e as Error).message.split('\u0000');
      throw openError(code, message);
    }
    return new MemkvDatabase(location, db);
  }

  /** Opens `location` now, on this thread (a factory that must answer at once uses it). */
  static openSync(location: string, options: MemkvDatabaseOptions = {}): MemkvDatabase {
    const addon = native();
    let db: NativeDatabase;
    try {
      db = addon.Database.openSync(location, options.readOnly ?? false, options.shared ?? false);
    } catch (e) {
      throw openError((e as { code?: string }).code ?? 'error', (e as Error).message);
    }
    return new MemkvDatabase(location, db);
  }

  /** Whether it was opened read-only (writes then answer the memory tool's read-only message). */
  get readOnly(): boolean {
    return this.#native().readOnly;
  }

  #native(): NativeDatabase {
    if (this.#db === null) throw new MemkvError(`memkv: ${this.location}: the database was closed`);
    return this.#db;
  }

  /** As {@link MemkvClient.tool}: one memory-tool command's answer, `memkv exec`'s bytes. */
  async tool(store: string, input: unknown): Promise<ToolOutput> {
    checkStore(store);
    // The text comes back as it is, without the JSON around it.
    const called = await this.#native().call(store, JSON.stringify(input));
    if (called.status !== 200) json({ status: called.status, body: called.text });
    return { content: called.text, is_error: called.isError };
  }

  /** As {@link MemkvClient.searchTool}. */
  async searchTool(store: string, input: unknown): Promise<ToolOutput> {
    return this.tool(store, { type: 'tool_use', id: 'memkv_search', name: 'memory_search', input });
  }

  /** As {@link MemkvClient.search}. */
  async search(store: string, query: SearchQuery): Promise<SearchResults> {
    checkStore(store);
    const { q, ...params } = query;
    // The addon takes integers; the route refuses anything else with these words.
    const ranges = { limit: '1 to 1000', context: '0 to 10' } as const;
    for (const name of ['limit', 'context'] as const) {
      const value = params[name];
      if (value !== undefined && !Number.isSafeInteger(value)) {
        const detail = `${name} must be an integer from ${ranges[name]}, not ${JSON.stringify(String(value))}`;
        throw new MemkvAPIError(400, 'invalid_request_error', detail, null, WHO);
      }
    }
    return json(await this.#native().search(store, q, params)) as SearchResults;
  }

  /** Deletes a store with every memory and version; `false` when it was never written. */
  async deleteStore(store: string): Promise<boolean> {
    checkStore(store);
    const reply = await this.#native().deleteStore(store);
    if (reply.status === 404) return false;
    json(reply);
    return true;
  }

  /** Every store with memories: `[{ id, files, bytes, last_write, expired_files }]`. */
  async stores(): Promise<Array<Record<string, unknown>>> {
    return (json(await this.#native().stores()) as { data: Array<Record<string, unknown>> }).data;
  }

  /** Writes an export of `stores` (every store by default) to `file`, whole or not at all. */
  async export(file: string, stores: string[] = []): Promise<Record<string, number>> {
    return json(await this.#native().export(stores, file)) as Record<string, number>;
  }

  /** Imports an export file in one transaction (`conflict`: `refuse`, the default, `skip` or `replace`). */
  async importFile(file: string, conflict?: 'refuse' | 'skip' | 'replace'): Promise<Record<string, number>> {
    return json(await this.#native().importFile(file, conflict)) as Record<string, number>;
  }

  /** Deletes the memories whose time-to-live has passed (only lists them with `dryRun`). */
  async expire(dryRun = false): Promise<Array<Record<string, unknown>>> {
    return (json(await this.#native().expire(dryRun)) as { data: Array<Record<string, unknown>> }).data;
  }

  /** The versions of the memory at `path` (`/memories/...`), or of the whole store, oldest first. */
  async history(store: string, path?: string): Promise<Array<Record<string, unknown>>> {
    checkStore(store);
    return (json(await this.#native().history(store, path)) as { data: Array<Record<string, unknown>> }).data;
  }

  /**
   * Lets go of the database, also while calls are under way (each finishes): the file is closed
   * once no other object of the process uses it, off the event loop.
   */
  async close(): Promise<void> {
    const db = this.#db;
    this.#db = null;
    await db?.close();
  }
}

function checkStore(store: string): void {
  if (typeof store !== 'string' || store.length === 0) {
    throw new TypeError('memkv: `store` must be a non-empty string');
  }
}
