import { betaMemoryTool, type MemoryToolHandlers } from '@anthropic-ai/sdk/helpers/beta/memory';
import { ToolError } from '@anthropic-ai/sdk/lib/tools/ToolError';
import type { BetaMemoryTool20250818 } from '@anthropic-ai/sdk/resources/beta';
import { MemkvClient, type MemkvClientOptions, type ToolOutput } from './client.js';
import { MemkvDatabase } from './database.js';

/** Options of {@link memkvMemoryHandlers} and {@link memkvMemoryTool}. */
export interface MemkvMemoryOptions extends MemkvClientOptions {
  /** The memkv store (user id) whose `/memories` the model works on, e.g. `"alice@example.com"`. */
  store: string;
  /**
   * A client to share between stores (one connection pool). When given, `baseURL`, `apiKey`,
   * `fetch` and `timeoutMs` are ignored.
   */
  client?: MemkvClient | undefined;
  /**
   * memkv in this process instead of a server: a database file (created if missing),
   * `":memory:"`, a `postgres://` URL, or a {@link MemkvDatabase} (to share one `":memory:"`
   * database between the memory tool and the search tool). When given, the server options are
   * not used. A file another process writes is refused at once with a `MemkvLockedError`.
   */
  db?: string | MemkvDatabase | undefined;
}

/** What answers the tools' calls: a memkv server's client, or memkv in this process. */
export interface MemkvBackend {
  tool(store: string, input: unknown, signal?: AbortSignal | null): Promise<ToolOutput>;
  searchTool(store: string, input: unknown, signal?: AbortSignal | null): Promise<ToolOutput>;
}

/** The backend of `options`: its `db` (opened now, so that a refused open throws here), its `client`, or a new client. */
export function backend(options: MemkvMemoryOptions): MemkvBackend {
  const { db } = options;
  if (db !== undefined) {
    if (options.baseURL !== undefined || options.client !== undefined) {
      throw new TypeError('memkv: pass `db` (memkv in this process) or a server (`baseURL`, `client`), not both');
    }
    return typeof db === 'string' ? MemkvDatabase.openSync(db) : db;
  }
  return options.client ?? new MemkvClient(options);
}

const COMMANDS = ['view', 'create', 'str_replace', 'insert', 'delete', 'rename'] as const;

/**
 * Handlers for the SDK's `betaMemoryTool` that run each command on memkv: in this process with
 * `db`, or on a memkv server.
 *
 * Each command's input goes unchanged to `POST {baseURL}/v1/memory_stores/{store}/tool`. memkv's
 * answer comes back as the tool result: its content on success; on a model mistake a `ToolError`
 * with memkv's exact content, which the tool runner sends as `is_error: true` with those bytes.
 * A transport failure or an HTTP error throws a `MemkvError`, which the runner reports to the model
 * as an error result (`Error: ...`); memkv applies a command completely or not at all.
 */
export function memkvMemoryHandlers(options: MemkvMemoryOptions): MemoryToolHandlers {
  const run = runner(options);
  return Object.fromEntries(COMMANDS.map((command) => [command, run])) as MemoryToolHandlers;
}

/**
 * The memory tool for `client.beta.messages.toolRunner`, backed by memkv: the drop-in replacement
 * for `betaMemoryTool(await BetaLocalFilesystemMemoryTool.init(...))`.
 *
 * Unlike `betaMemoryTool` over handlers, it sends every input to memkv, an unknown or missing
 * `command` included, so the model reads memkv's own answer (`Error: Unknown command: ...`) for
 * those too, byte for byte as `memkv exec` gives it.
 *
 * @param extraProps more fields of the tool definition, e.g. `cache_control`
 */
export function memkvMemoryTool(
  options: MemkvMemoryOptions,
  extraProps?: Omit<BetaMemoryTool20250818, 'type' | 'name'>,
): ReturnType<typeof betaMemoryTool> {
  const run = runner(options);
  const tool = betaMemoryTool(
    Object.fromEntries(COMMANDS.map((command) => [command, run])) as MemoryToolHandlers,
    extraProps,
  );
  tool.run = (input) => run(input);
  return tool;
}

/** Runs one input on the store: memkv's content, or a `ToolError` with it for a model mistake. */
function runner(options: MemkvMemoryOptions): (input: unknown) => Promise<string> {
  const { store } = options;
  if (typeof store !== 'string' || store.length === 0) {
    throw new TypeError('memkv: `store` must be a non-empty string');
  }
  const client = backend(options);
  return async (input: unknown): Promise<string> => {
    const output = await client.tool(store, input);
    if (output.is_error) {
      throw new ToolError(output.content);
    }
    return output.content;
  };
}
