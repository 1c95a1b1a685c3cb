/** Runs the real SDK tool runner against a scripted Messages API. */
import Anthropic from '@anthropic-ai/sdk';
import type { BetaMessage, BetaToolResultBlockParam, BetaToolUseBlock } from '@anthropic-ai/sdk/resources/beta';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { ScriptedMessagesAPI, type RecordedRequest, type Turn } from './scripted-api.js';
import type { ExecAnswer } from './memkv.js';

export interface Conversation {
  final: BetaMessage;
  /** The tool_result blocks sent back for each scripted turn. */
  results: BetaToolResultBlockParam[][];
  requests: RecordedRequest[];
}

/** One conversation: `client.beta.messages.toolRunner` with `memory`, the model's turns scripted. */
export async function converse(
  memory: BetaRunnableTool<any> | BetaRunnableTool<any>[],
  turns: Turn[],
  options: { thread?: false; stream?: true; runToolsEagerly?: true } = {},
): Promise<Conversation> {
  const api = await ScriptedMessagesAPI.start(turns);
  try {
    const client = new Anthropic({
      apiKey: 'sk-ant-scripted',
      baseURL: api.baseURL,
      maxRetries: 0,
      timeout: 30_000,
    });
    const runner = client.beta.messages.toolRunner({
      model: 'claude-scripted',
      max_tokens: 1024,
      messages: [{ role: 'user', content: 'Keep notes in your memory.' }],
      tools: Array.isArray(memory) ? memory : [memory],
      max_iterations: turns.length + 2,
      ...options,
    });
    const final = await runner.runUntilDone();
    if (options.stream && api.requests.some((r) => r.body.stream !== true)) {
      throw new Error('the runner did not stream every turn');
    }
    return { final, results: api.toolResults(), requests: api.requests };
  } finally {
    await api.close();
  }
}

/** The tool_result block the runner sends for memkv's answer to `call`. */
export function expectedBlock(call: BetaToolUseBlock, answer: ExecAnswer): BetaToolResultBlockParam {
  return {
    type: 'tool_result',
    tool_use_id: call.id,
    content: answer.content,
    ...(answer.is_error ? { is_error: true } : {}),
  };
}
