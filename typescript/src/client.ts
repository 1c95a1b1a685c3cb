import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { MemkvAPIError, MemkvConnectionError, MemkvError } from './errors.js';

/** What memkv answers for one memory-tool command: exactly what `memkv exec` prints for it. */
export interface ToolOutput {
  content: string;
  is_error: boolean;
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
}

/** Default for {@link MemkvClientOptions.timeoutMs}. */
export const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * A client for memkv serve's tool route, `POST /v1/memory_stores/{store}/tool`. One client can
 * serve any number of stores and concurrent requests.
 */
export class MemkvClient {
  readonly baseURL: string;
  readonly timeoutMs: number;
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
    this.baseURL = baseURL.replace(/\/+$/, '');
    this.timeoutMs = timeoutMs;
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

  async #post(store: string, payload: unknown, signal?: AbortSignal | null): Promise<unknown> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signals = signal ? [timeout, signal] : [timeout];
    const init = {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        'x-api-key': this.#apiKey,
      },
      body: JSON.stringify(payload),
      signal: anySignal(signals),
    };
    let response: { ok: boolean; status: number; retryAfter: string | null };
    let text: string;
    try {
      if (DOT_SEGMENT.test(encodeURIComponent(store))) {
        ({ response, text } = await this.#rawPost(toolPath(store), init));
      } else {
        const r = await this.#fetch(this.toolURL(store), init);
        text = await r.text();
        response = { ok: r.ok, status: r.status, retryAfter: r.headers.get('retry-after') };
      }
    } catch (cause) {
      if (timeout.aborted) {
        throw new MemkvConnectionError(
          `memkv: no answer from ${this.baseURL} within ${this.timeoutMs} ms`,
          { cause, timedOut: true },
        );
      }
      if (signal?.aborted) {
        throw new MemkvConnectionError(`memkv: request to ${this.baseURL} aborted`, { cause });
      }
      throw new MemkvConnectionError(
        `memkv: cannot reach ${this.baseURL}: ${describe(cause)}`,
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
  ): Promise<{ response: { ok: boolean; status: number; retryAfter: string | null }; text: string }> {
    const base = new URL(this.baseURL);
    const https = base.protocol === 'https:';
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
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            const retry = res.headers['retry-after'];
            resolve({
              response: { ok: status >= 200 && status < 300, status, retryAfter: typeof retry === 'string' ? retry : null },
              text: Buffer.concat(chunks).toString('utf8'),
            });
          });
        },
      );
      req.on('error', reject);
      req.end(init.body);
    });
  }
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

/** A transport failure's reason: undici puts the system error (ECONNREFUSED, ...) in `cause`. */
function describe(error: unknown): string {
  const inner = (error as { cause?: unknown })?.cause;
  const code = (inner as { code?: unknown })?.code;
  if (typeof code === 'string') return code;
  if (inner instanceof Error) return inner.message;
  return error instanceof Error ? error.message : String(error);
}

function seconds(value: string | null): number | null {
  if (value === null) return null;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : null;
}
