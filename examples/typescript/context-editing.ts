/**
 * Memory with context editing: Claude keeps what matters in memkv (the memory tool and
 * memory_search), and the API clears old tool results from the context as a long task fills it,
 * never those of the two memory tools (docs/context-editing.md).
 *
 *   cd typescript && npm ci && npm run build && npx tsc -p tsconfig.examples.json
 *   export ANTHROPIC_API_KEY=... MEMKV_URL=http://127.0.0.1:7437 MEMKV_API_KEY=...
 *   node build/examples/context-editing.js dana "Review the open tickets; note what matters."
 */
import Anthropic from '@anthropic-ai/sdk';
import { memkvMemoryTool, memkvSearchTool } from 'memkv';

const SYSTEM = `You have a persistent memory directory, /memories. View it at the start of a task.
Old tool results are cleared from the conversation as it grows: note in /memories what you will
need later, before it is gone.`;

const [store = 'demo-user', ...words] = process.argv.slice(2);
const client = new Anthropic(); // ANTHROPIC_API_KEY
const runner = client.beta.messages.toolRunner({
  model: process.env['ANTHROPIC_MODEL'] ?? 'claude-sonnet-5-5',
  max_tokens: 4096,
  system: SYSTEM,
  messages: [{ role: 'user', content: words.join(' ') || 'Review the open tickets.' }],
  // MEMKV_URL, MEMKV_API_KEY
  tools: [memkvMemoryTool({ store }), memkvSearchTool({ store })],
  betas: ['context-management-2025-06-27'],
  context_management: {
    edits: [
      {
        type: 'clear_tool_uses_20250919',
        // Once a request's input passes 30,000 tokens, clear the oldest tool results, keeping the
        // last 3 and clearing at least 5,000 tokens' worth (or nothing).
        trigger: { type: 'input_tokens', value: 30_000 },
        keep: { type: 'tool_uses', value: 3 },
        clear_at_least: { type: 'input_tokens', value: 5_000 },
        // Never the memory tools': what Claude read from memory stays in view.
        exclude_tools: ['memory', 'memory_search'],
      },
    ],
  },
  max_iterations: 40,
});
for await (const message of runner) {
  for (const edit of message.context_management?.applied_edits ?? []) {
    const { type, ...cleared } = edit;
    console.error(`[context] ${type}: ${JSON.stringify(cleared)}`);
  }
  for (const block of message.content) {
    if (block.type === 'text') console.log(block.text);
    else if (block.type === 'tool_use') console.error(`[${block.name}] ${JSON.stringify(block.input)}`);
  }
}
