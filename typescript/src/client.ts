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

  /** The URL of `store`'s tool route; the store id is one percent-encoded path segment. */
  toolURL(store: string): string {
    return `${this.baseURL}/v1/memory_stores/${encodeURIComponent(store)}/tool`;
  }

  /**
   * Runs one memory-tool command (the `input` object of a `tool_use` block) on `store` and returns
   * memkv's answer. A model mistake is an answer with `is_error: true`, not an exception.
   *
   * @throws {MemkvConnectionError} the server could not be reached or took too long
   * @throws {MemkvAPIError} the server refused the request (bad key, unknown store, overload, ...)
   */
  async tool(store: string, input: unknown, signal?: AbortSignal | null): Promise<ToolOutput> {
    const body = await this.#post(this.toolURL(store), input, signal);
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

  async #post(url: string, payload: unknown, signal?: AbortSignal | null): Promise<unknown> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signals = signal ? [timeout, signal] : [timeout];
    let response: Response;
    let text: string;
    try {
      response = await this.#fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          'x-api-key': this.#apiKey,
        },
        body: JSON.stringify(payload),
        signal: anySignal(signals),
      });
      text = await response.text();
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
    throw new MemkvAPIError(response.status, errorType, detail, retryAfter(response));
  }
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

function retryAfter(response: Response): number | null {
  const value = response.headers.get('retry-after');
  if (value === null) return null;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : null;
}
