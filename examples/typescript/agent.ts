/**
 * An agent with long-term memory in memkv: Claude's memory tool, run by the SDK's tool runner,
 * with each user's /memories kept in a memkv server instead of a local directory.
 *
 *   memkv --db memkv.redb keys add --admin          # prints a key on its last line
 *   memkv --db memkv.redb serve                     # listening on http://127.0.0.1:7437
 *
 *   cd typescript && npm ci && npm run build
 *   export ANTHROPIC_API_KEY=... MEMKV_URL=http://127.0.0.1:7437 MEMKV_API_KEY=...
 *   npm run example -- dana "I'm Dana, I work on the payments team. Remember that."
 *   npm run example -- dana "What do you know about me?"
 *
 * Without MEMKV_URL it starts a server of its own on a database in the current directory
 * (`memkv` from MEMKV_BIN or PATH) and stops it at the end.
 */
import Anthropic from '@anthropic-ai/sdk';
import { memkvMemoryTool, serveLocal, type LocalServer } from 'memkv';

const SYSTEM = `You have a memory directory, /memories, that persists between conversations.
Always view it before you answer, and record what you learn about the user and their work there,
in small, well-named files. Never store secrets.`;

async function main(): Promise<void> {
  const [store = 'demo-user', ...words] = process.argv.slice(2);
  const question = words.join(' ') || 'What do you remember about me?';
  if (!process.env['ANTHROPIC_API_KEY']) {
    console.error('Set ANTHROPIC_API_KEY to run this example against the Claude API.');
    process.exitCode = 2;
    return;
  }

  let local: LocalServer | undefined;
  if (!process.env['MEMKV_URL']) {
    local = await serveLocal('memkv-example.redb');
    console.error(`memkv serve started at ${local.baseURL} (database memkv-example.redb)`);
  }
  try {
    const memory = memkvMemoryTool({ store, baseURL: local?.baseURL, apiKey: local?.apiKey });
    const client = new Anthropic();
    const runner = client.beta.messages.toolRunner({
      model: process.env['ANTHROPIC_MODEL'] ?? 'claude-sonnet-5-5',
      max_tokens: 4096,
      system: SYSTEM,
      messages: [{ role: 'user', content: question }],
      tools: [memory],
      max_iterations: 20,
    });
    for await (const message of runner) {
      for (const block of message.content) {
        if (block.type === 'text') console.log(block.text);
        else if (block.type === 'tool_use') console.error(`[memory] ${JSON.stringify(block.input)}`);
      }
    }
  } finally {
    await local?.close();
  }
}

await main();
