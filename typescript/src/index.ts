/**
 * memkv for the Anthropic TypeScript SDK: handlers for `betaMemoryTool` that keep each store's
 * `/memories` in memkv (in this process, or a memkv server) instead of a local directory.
 *
 * ```ts
 * import { memkvMemoryTool } from 'memkv';
 *
 * const memory = memkvMemoryTool({ store: 'alice@example.com', db: 'memory.redb' }); // in this process
 * const search = memkvSearchTool({ store: 'alice@example.com', db: 'memory.redb' }); // memkv's memory_search
 * // or a memkv server: memkvMemoryTool({ store, baseURL }) (MEMKV_URL, MEMKV_API_KEY)
 * const runner = client.beta.messages.toolRunner({ model, max_tokens, messages, tools: [memory, search] });
 * ```
 */
export {
  MemkvClient,
  DEFAULT_MAX_ANSWER_BYTES,
  DEFAULT_TIMEOUT_MS,
  type MemkvClientOptions,
  type SearchQuery,
  type SearchResults,
  type ToolOutput,
} from './client.js';
export { MemkvError, MemkvAPIError, MemkvConnectionError, MemkvLockedError } from './errors.js';
export { MemkvDatabase, IN_MEMORY, type MemkvDatabaseOptions } from './database.js';
export { memkvMemoryHandlers, memkvMemoryTool, type MemkvBackend, type MemkvMemoryOptions } from './memory.js';
export { memkvSearchTool, SEARCH_TOOL_DEFINITION } from './search.js';
export { serveLocal, type LocalServer, type ServeLocalOptions } from './serve-local.js';
