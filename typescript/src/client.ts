import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { MemkvAPIError, MemkvConnectionError, MemkvError } from './errors.js';

/** What memkv answers for one memory-tool command: exactly what `memkv exec` prints for it. */
export interface ToolOutput {
  content: string;
  is_error: boolean;
}

/** A search of {@link MemkvClient.search} (the query parameters of memkv's search route). */
export interface SearchQuery {
  /** What to find. */
  q: string;
  /** `ranked` (the server's default), `literal` or `regex`. */
  mode?: 'ranked' | 'literal' | 'regex' | undefined;
  /** `literal` and `regex`: letters of either case. */
  caseInsensitive?: boolean | undefined;
  /** Only this memory (`/notes/tz.md`) or the memories below this directory (`/notes/`). */
  pathPrefix?: string | undefined;
  /** Lines of context around each line shown (0 to 10). */
  context?: number | undefined;
  /** The most memories (ranked) or matching lines to answer. */
  limit?: number | undefined;
}

/** What memkv's search route answers. */
export interface SearchResults {
  data: Array<{
    path: string;
    memory_id: string;
    /** Ranked search only. */
    score?: number;
    lines: Array<{ line_number: number; text: string; is_match: boolean }>;
  }>;
  /** Results beyond `limit`. */
  more: number;
  /** Memories not searched because the time budget ran out. */
  unsearched: number;
}

/** How to reach a memkv server. */
export interface MemkvClientOptions {
  /** The server, e.g. `http://127.0.0.1:7437`. Default: the `MEMKV_URL` environment variable. */
  baseURL?: string | undefined;
  /** A key from `memkv keys add`. Default: the `MEMKV_API_KEY` environment variable. */
  apiKey?: string | undefined;
  /**
   * The `fetch` to send requests with. Default: Node's global `fetch` (undici), which keeps
   * connections alive and reuses them across requests.
   */
  fetch?: typeof fetch | undefined;
  /** How long one request may take, connection included, in milliseconds. Default: 30,000. */
  timeoutMs?: number | undefined;
  /**
   * The largest answer body read, in bytes; a larger one is refused as it arrives, with a
   * {@link MemkvAPIError} of type `answer_too_large`. Default: {@link DEFAULT_MAX_ANSWER_BYTES}.
   */
  maxAnswerBytes?: number | undefined;
}

/** Default for {@link MemkvClientOptions.timeoutMs}. */
export const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * Default for {@link MemkvClientOptions.maxAnswerBytes}: 8 MiB. What memkv answers is bounded by
 * its limits: an error quoting the model's `old_str` back is at most the request, which memkv caps
 * at `12 * max_file_bytes + 64 KiB` (1.23 MiB with the default 100 KiB files); a `str_replace`
 * snippet, about ten bytes per byte of a file at the size limit (~1 MiB); a `view`,
 * `view_max_chars` (16,000) characters, six bytes each at worst once JSON-escaped. 8 MiB leaves
 * room for a server run with `--max-file-bytes` up to about 640 KiB.
 */
export const DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** What is known of a command whose request was sent but whose answer never came (complete). */
const UNKNOWN_OUTCOME =
  'the command may or may not have been applied (wholly or not at all: each memkv command is one transaction)';

/** Transport failures that happen before a connection exists: nothing was sent. */
const NOT_CONNECTED = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * A client for memkv serve's tool route, `POST /v1/memory_stores/{store}/tool`. One client can
 * serve any number of stores and concurrent requests.
 */
export class MemkvClient {
  readonly baseURL: string;
  readonly timeoutMs: number;
  readonly maxAnswerBytes: number;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;

  constructor(options: MemkvClientOptions = {}) {
    const baseURL = options.baseURL ?? process.env['MEMKV_URL'];
    if (!baseURL) {
      throw new MemkvError('memkv: no server URL: pass baseURL or set MEMKV_URL');
    }
    const apiKey = options.apiKey ?? process.env['MEMKV_API_KEY'];
    if (!apiKey) {
      throw new MemkvError('memkv: no API key: pass apiKey or set MEMKV_API_KEY');
    }
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new MemkvError(`memkv: timeoutMs must be a positive number, got ${timeoutMs}`);
    }
    const maxAnswerBytes = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
    if (!Number.isSafeInteger(maxAnswerBytes) || maxAnswerBytes <= 0) {
      throw new MemkvError(`memkv: maxAnswerBytes must be a positive integer, got ${maxAnswerBytes}`);
    }
    this.baseURL = baseURL.replace(/\/+$/, '');
    this.timeoutMs = timeoutMs;
    this.maxAnswerBytes = maxAnswerBytes;
    this.#apiKey = apiKey;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /**
   * The URL of `store`'s tool route; the store id is one percent-encoded path segment. The ids `.`
   * and `..` are spelled `%2E` and `%2E%2E`, which a URL parser would still take for `.` and `..`
   * and remove: {@link tool} sends those two as they are, with `node:http` instead of `fetch`.
   */
  toolURL(store: string): string {
    return `${this.baseURL}${toolPath(store)}`;
  }

  /**
   * Runs one memory-tool command (the `input` object of a `tool_use` block) on `store` and returns
   * memkv's answer. A model mistake is an answer with `is_error: true`, not an exception.
   *
   * @throws {MemkvConnectionError} the server could not be reached or took too long
   * @throws {MemkvAPIError} the server refused the request (bad key, unknown store, overload, ...)
   */
  async tool(store: string, input: unknown, signal?: AbortSignal | null): Promise<ToolOutput> {
    const body = await this.#post(store, input, signal);
    if (
      typeof body !== 'object' ||
      body === null ||
      typeof (body as ToolOutput).content !== 'string' ||
      typeof (body as ToolOutput).is_error !== 'boolean'
    ) {
      throw new MemkvAPIError(200, null, 'the answer is not a memkv tool result');
    }
    const { content, is_error } = body as ToolOutput;
    return { content, is_error };
  }

  /**
   * Answers one `memory_search` call (memkv's own search tool) with `input` on `store`: the text
   * the model reads, as `memkv search` prints it. A search memkv refuses is an answer with
   * `is_error: true`.
   *
   * @throws {MemkvConnectionError} the server could not be reached or took too long
   * @throws {MemkvAPIError} the server refused the request
   */
  async searchTool(store: string, input: unknown, signal?: AbortSignal | null): Promise<ToolOutput> {
    const block = { type: 'tool_use', id: 'memkv_search', name: 'memory_search', input };
    return this.tool(store, block, signal);
  }

  /**
   * Searches `store` (`GET /v1/memory_stores/{store}/search`): the server's JSON, paths as the
   * memory-stores API spells them (`/notes/tz.md`; `pathPrefix` too: `/notes/`).
   *
   * @throws {MemkvConnectionError} the server could not be reached or took too long
   * @throws {MemkvAPIError} the server refused the request (a bad query is a 400)
   */
  async search(store: string, query: SearchQuery, signal?: AbortSignal | null): Promise<SearchResults> {
    const params = new URLSearchParams({ q: query.q });
    if (query.mode !== undefined) params.set('mode', query.mode);
    if (query.caseInsensitive !== undefined) params.set('case_insensitive', String(query.caseInsensitive));
    if (query.pathPrefix !== undefined) params.set('path_prefix', query.pathPrefix);
    if (query.context !== undefined) params.set('context', String(query.context));
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    const path = `${toolPath(store).replace(/\/tool$/, '/search')}?${params}`;
    const body = await this.#send('GET', store, path, undefined, signal);
    if (typeof body !== 'object' || body === null || !Array.isArray((body as SearchResults).data)) {
      throw new MemkvAPIError(200, null, 'the answer is not memkv search results');
    }
    return body as SearchResults;
  }

  async #post(store: string, payload: unknown, signal?: AbortSignal | null): Promise<unknown> {
    return this.#send('POST', store, toolPath(store), payload, signal);
  }

  async #send(
    method: 'GET' | 'POST',
    store: string,
    path: string,
    payload: unknown,
    signal?: AbortSignal | null,
  ): Promise<unknown> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    // Aborted by the client itself, to drop an answer it refuses (too large) mid-body.
    const own = new AbortController();
    const signals = signal ? [timeout, own.signal, signal] : [timeout, own.signal];
    const headers: Record<string, string> = {
      accept: 'application/json',
      // memkv never compresses; a compressed body could unpack to any size.
      'accept-encoding': 'identity',
      'x-api-key': this.#apiKey,
    };
    if (method === 'POST') headers['content-type'] = 'application/json';
    const init = {
      method,
      headers,
      body: method === 'POST' ? JSON.stringify(payload) : undefined,
      signal: anySignal(signals),
    };
    const where = `${this.baseURL}${path}`;
    let response: { ok: boolean; status: number; retryAfter: string | null };
    let text: string;
    try {
      if (DOT_SEGMENT.test(encodeURIComponent(store))) {
        ({ response, text } = await this.#rawPost(path, { ...init, body: init.body ?? '' }, where, own));
      } else {
        const r = await this.#fetch(where, init);
        response = { ok: r.ok, status: r.status, retryAfter: r.headers.get('retry-after') };
        text = await readCapped(r, this.maxAnswerBytes, where, own);
      }
    } catch (cause) {
      if (cause instanceof MemkvError) throw cause;
      if (timeout.aborted) {
        throw new MemkvConnectionError(
          `memkv: no complete answer from ${this.baseURL} within ${this.timeoutMs} ms; ${UNKNOWN_OUTCOME}`,
          { cause, timedOut: true },
        );
      }
      if (signal?.aborted) {
        throw new MemkvConnectionError(`memkv: request to ${this.baseURL} aborted; ${UNKNOWN_OUTCOME}`, { cause });
      }
      const reason = describe(cause);
      if (NOT_CONNECTED.has(reason)) {
        throw new MemkvConnectionError(`memkv: cannot reach ${this.baseURL}: ${reason}; nothing was sent`, { cause });
      }
      throw new MemkvConnectionError(
        `memkv: the connection to ${this.baseURL} broke before an answer came (${reason}); ${UNKNOWN_OUTCOME}`,
        { cause },
      );
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (response.ok && body !== undefined) {
      return body;
    }
    const envelope = (body as { error?: { type?: unknown; message?: unknown } } | undefined)?.error;
    const errorType = typeof envelope?.type === 'string' ? envelope.type : null;
    const detail =
      typeof envelope?.message === 'string' ? envelope.message
      : body === undefined ? `not JSON: ${JSON.stringify(text.slice(0, 200))}`
      : 'no error message';
    throw new MemkvAPIError(response.status, errorType, detail, seconds(response.retryAfter));
  }

  #agent: HttpAgent | undefined;

  /** POST with `node:http(s)`, which sends `path` exactly as given (no dot-segment removal). */
  #rawPost(
    path: string,
    init: { method: string; headers: Record<string, string>; body: string; signal: AbortSignal },
    where: string,
    own: AbortController,
  ): Promise<{ response: { ok: boolean; status: number; retryAfter: string | null }; text: string }> {
    const base = new URL(this.baseURL);
    const https = base.protocol === 'https:';
    const cap = this.maxAnswerBytes;
    this.#agent ??= https ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
    return new Promise((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(
        {
          protocol: base.protocol,
          hostname: base.hostname.replace(/^\[|\]$/g, ''),
          port: base.port || undefined,
          path: base.pathname.replace(/\/+$/, '') + path,
          method: init.method,
          headers: { ...init.headers, 'content-length': String(Buffer.byteLength(init.body)) },
          agent: this.#agent,
          signal: init.signal,
        },
        (res) => {
          const status = res.statusCode ?? 0;
          const refuse = (error: MemkvError) => {
            reject(error);
            own.abort(error); // destroys the request and its socket: nothing more is read
          };
          const head = answerHeadError(res.headers['content-length'], res.headers['content-encoding'], status, cap, where);
          if (head) {
            refuse(head);
            return;
          }
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > cap) refuse(tooLarge(where, cap, null, status));
            else chunks.push(c);
          });
          res.on('error', reject);
          res.on('end', () => {
            const retry = res.headers['retry-after'];
            resolve({
              response: { ok: status >= 200 && status < 300, status, retryAfter: typeof retry === 'string' ? retry : null },
              text: new TextDecoder().decode(Buffer.concat(chunks)),
            });
          });
        },
      );
      req.on('error', reject);
      req.end(init.body);
    });
  }
}

/** A `fetch` answer's body as text, refused (and no longer read) past `cap` bytes. */
async function readCapped(r: Response, cap: number, where: string, own: AbortController): Promise<string> {
  const head = answerHeadError(r.headers.get('content-length'), r.headers.get('content-encoding'), r.status, cap, where);
  if (head) {
    own.abort(head);
    await r.body?.cancel().catch(() => undefined);
    throw head;
  }
  if (r.body === null) return '';
  const reader = r.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > cap) {
      const error = tooLarge(where, cap, null, r.status);
      own.abort(error);
      await reader.cancel().catch(() => undefined);
      throw error;
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

/** The error for an answer refused at its headers: announced larger than `cap`, or compressed. */
function answerHeadError(
  length: string | null | undefined,
  encoding: string | null | undefined,
  status: number,
  cap: number,
  where: string,
): MemkvError | null {
  const announced = /^\s*\d+\s*$/.test(length ?? '') ? Number(length) : null;
  if (announced !== null && announced > cap) return tooLarge(where, cap, announced, status);
  const coding = (encoding ?? '').trim().toLowerCase();
  if (coding !== '' && coding !== 'identity') {
    return new MemkvAPIError(status, 'protocol_error', `the answer from ${where} is compressed (${coding}), which memkv never does; ${UNKNOWN_OUTCOME}`);
  }
  return null;
}

function tooLarge(where: string, cap: number, announced: number | null, status: number): MemkvAPIError {
  const size = announced !== null ? `announces ${announced} bytes` : 'goes on past the limit';
  return new MemkvAPIError(
    status,
    'answer_too_large',
    `the answer from ${where} ${size}, more than maxAnswerBytes=${cap}: it is not a memkv tool result, so the rest was not read; ${UNKNOWN_OUTCOME}`,
  );
}

/** A path segment a URL parser removes or resolves: `.`, `..` and their `%2E` spellings. */
const DOT_SEGMENT = /^(\.|%2e){1,2}$/i;

/** The route's path for `store`: one segment, `.` spelled `%2E` where the whole segment is dots. */
function toolPath(store: string): string {
  const segment = encodeURIComponent(store);
  return `/v1/memory_stores/${DOT_SEGMENT.test(segment) ? segment.replaceAll('.', '%2E') : segment}/tool`;
}

/** One signal that aborts when any of `signals` does (`AbortSignal.any` is Node 20.3+). */
function anySignal(signals: AbortSignal[]): AbortSignal {
  if (signals.length === 1) return signals[0]!;
  if (typeof AbortSignal.any === 'function') return AbortSignal.any(signals);
  const controller = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      controller.abort(s.reason);
      break;
    }
    s.addEventListener('abort', () => controller.abort(s.reason), { once: true });
  }
  return controller.signal;
}

/** A transport failure's reason: undici puts the system error (ECONNREFUSED, ...) in `cause`; `node:http` throws it. */
function describe(error: unknown): string {
  const inner = (error as { cause?: unknown })?.cause;
  const code = (inner as { code?: unknown })?.code ?? (error as { code?: unknown })?.code;
  if (typeof code === 'string') return code;
  if (inner instanceof Error) return inner.message;
  return error instanceof Error ? error.message : String(error);
}

function seconds(value: string | null): number | null {
  if (value === null) return null;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : null;
}
