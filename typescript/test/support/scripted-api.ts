/**
 * A scripted Messages API: a real HTTP server on 127.0.0.1 that answers each `POST /v1/messages`
 * with the next assistant turn of a script, and records every request the SDK sends, so a test
 * can read the `tool_result` blocks the tool runner posted back.
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import type {
  BetaContentBlock,
  BetaMessage,
  BetaMessageParam,
  BetaToolResultBlockParam,
  BetaToolUseBlock,
} from '@anthropic-ai/sdk/resources/beta';

/** The request body fields the tests read. */
export interface RecordedRequest {
  url: string;
  headers: IncomingHttpHeaders;
  body: {
    model: string;
    messages: BetaMessageParam[];
    tools?: Array<{ type?: string; name?: string }>;
    thread?: { type: string; previous_message_id?: string };
    stream?: boolean;
    context_management?: { edits: Array<Record<string, unknown>> };
  };
}

/** One assistant turn: the blocks it holds. A turn with a `tool_use` block stops with `tool_use`. */
export type Turn = BetaContentBlock[];

export const FINAL_TEXT = 'All done.';

export class ScriptedMessagesAPI {
  readonly requests: RecordedRequest[] = [];
  /** More fields of the final message (the one after the scripted turns), e.g. `context_management`. */
  finalFields: Record<string, unknown> = {};
  readonly #turns: Turn[];
  readonly #server: Server;
  #baseURL = '';

  private constructor(turns: Turn[]) {
    this.#turns = turns;
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((error: unknown) => {
        send(res, 500, { type: 'error', error: { type: 'api_error', message: String(error) } });
      });
    });
  }

  /** Starts the API on a free loopback port. */
  static async start(turns: Turn[]): Promise<ScriptedMessagesAPI> {
    const api = new ScriptedMessagesAPI(turns);
    await new Promise<void>((resolve, reject) => {
      api.#server.once('error', reject);
      api.#server.listen(0, '127.0.0.1', resolve);
    });
    const { port } = api.#server.address() as AddressInfo;
    api.#baseURL = `http://127.0.0.1:${port}`;
    return api;
  }

  get baseURL(): string {
    return this.#baseURL;
  }

  /**
   * The `tool_result` blocks the runner sent back for each scripted turn, in order: those of the
   * request after the turn, taken from its last user message.
   */
  toolResults(): BetaToolResultBlockParam[][] {
    return this.requests.slice(1).map(({ body }) => {
      const last = body.messages.at(-1);
      if (!last || last.role !== 'user' || !Array.isArray(last.content)) return [];
      return last.content.filter((b): b is BetaToolResultBlockParam => b.type === 'tool_result');
    });
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const path = new URL(req.url ?? '/', this.#baseURL).pathname;
    if (req.method !== 'POST' || path !== '/v1/messages') {
      send(res, 404, { type: 'error', error: { type: 'not_found_error', message: `no route ${req.method} ${path}` } });
      return;
    }
    const body = JSON.parse(raw) as RecordedRequest['body'];
    this.requests.push({ url: req.url ?? '', headers: req.headers, body });
    const index = this.requests.length - 1;
    // Bounded: one request per scripted turn, one for the final answer, and nothing after it.
    if (index > this.#turns.length) {
      send(res, 400, {
        type: 'error',
        error: { type: 'invalid_request_error', message: `unexpected request ${index + 1}` },
      });
      return;
    }
    const content = this.#turns[index] ?? [{ type: 'text', text: FINAL_TEXT, citations: null }];
    const message = {
      id: `msg_scripted_${String(index + 1).padStart(3, '0')}`,
      type: 'message',
      role: 'assistant',
      model: body.model,
      content,
      stop_reason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 10 },
      ...(index === this.#turns.length ? this.finalFields : {}),
    } as unknown as BetaMessage;
    if (body.stream) {
      stream(res, message);
      return;
    }
    send(res, 200, message, { 'request-id': `req_scripted_${index + 1}` });
  }
}

/** A `memory_search` `tool_use` block (memkv's search tool). */
export function searchCall(id: string, input: Record<string, unknown>): BetaToolUseBlock {
  return { type: 'tool_use', id, name: 'memory_search', input } as BetaToolUseBlock;
}

/** A memory `tool_use` block. */
export function memoryCall(id: string, input: Record<string, unknown>): BetaToolUseBlock {
  return { type: 'tool_use', id, name: 'memory', input } as BetaToolUseBlock;
}

/** `message` as the Messages API streams it: server-sent events, one content block after another. */
function stream(res: ServerResponse, message: BetaMessage): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const event = (type: string, data: Record<string, unknown>) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  event('message_start', { message: { ...message, content: [], stop_reason: null } });
  message.content.forEach((block, index) => {
    if (block.type === 'tool_use') {
      event('content_block_start', { index, content_block: { ...block, input: {} } });
      event('content_block_delta', {
        index,
        delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) },
      });
    } else if (block.type === 'text') {
      event('content_block_start', { index, content_block: { ...block, text: '' } });
      event('content_block_delta', { index, delta: { type: 'text_delta', text: block.text } });
    }
    event('content_block_stop', { index });
  });
  event('message_delta', {
    delta: { stop_reason: message.stop_reason, stop_sequence: null },
    usage: { output_tokens: 10 },
  });
  event('message_stop', {});
  res.end();
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}
