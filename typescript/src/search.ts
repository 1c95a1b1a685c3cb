import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import { ToolError } from '@anthropic-ai/sdk/lib/tools/ToolError';
import type { BetaTool } from '@anthropic-ai/sdk/resources/beta';
import { backend, type MemkvMemoryOptions } from './memory.js';

/**
 * memkv's definition of `memory_search`, its own search tool (not part of `memory_20250818`),
 * byte for byte as `memkv search --tool-definition` prints it and MCP lists it (the tests check).
 */
export const SEARCH_TOOL_DEFINITION = {
  name: 'memory_search',
  description:
    "Search your memory directory (/memories) without opening every file. Use it before you view files when you look for something you may have noted (a person, a preference, a decision) and do not know which file holds it, or to find every place that mentions something before you change it. mode ranked (the default) answers the files most about the query's words, best first, each with its best lines; mode literal or regex answers every line that contains the text or matches the pattern. Lines are shown as /memories/path:line_number: line. Use the memory tool to read or change what you find.",
  input_schema: {
    type: 'object',
    properties: {
      query: {
        type: 'string',
        description:
          'What to find: words (ranked), the exact text (literal), or a regular expression in Rust/ripgrep syntax (regex).',
      },
      mode: {
        type: 'string',
        enum: ['ranked', 'literal', 'regex'],
        description:
          "ranked (the default): the files most about the query's words; literal: lines containing the text; regex: lines matching the pattern.",
      },
      case_insensitive: {
        type: 'boolean',
        description: 'literal and regex: match letters of either case (default false; ranked always does).',
      },
      path_prefix: {
        type: 'string',
        description: 'Only search this file or the files below this directory, e.g. /memories/projects.',
      },
      context: {
        type: 'integer',
        minimum: 0,
        maximum: 10,
        description: 'Lines to show before and after each line shown (default 0).',
      },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        description:
          'The most files (ranked, default 10) or matching lines (literal and regex, default 50) to show.',
      },
    },
    required: ['query'],
    additionalProperties: false,
  },
} as const;

/**
 * `memory_search` for `client.beta.messages.toolRunner`, next to {@link memkvMemoryTool} over the
 * same store: each call's input goes to memkv as a `memory_search` block, and the model reads
 * memkv's answer byte for byte (a refused search as a `ToolError`, sent with `is_error: true`).
 *
 * @param extraProps more fields of the tool definition, e.g. `cache_control`
 */
export function memkvSearchTool(
  options: MemkvMemoryOptions,
  extraProps?: Omit<BetaTool, 'type' | 'name' | 'description' | 'input_schema'>,
): BetaRunnableTool<Record<string, unknown>> {
  const { store } = options;
  if (typeof store !== 'string' || store.length === 0) {
    throw new TypeError('memkv: `store` must be a non-empty string');
  }
  const client = backend(options);
  return {
    ...extraProps,
    type: 'custom',
    name: SEARCH_TOOL_DEFINITION.name,
    description: SEARCH_TOOL_DEFINITION.description,
    input_schema: structuredClone(SEARCH_TOOL_DEFINITION.input_schema) as unknown as BetaTool.InputSchema,
    parse: (content: unknown) => content as Record<string, unknown>,
    run: async (input: Record<string, unknown>, context) => {
      const output = await client.searchTool(store, input, context?.signal);
      if (output.is_error) {
        throw new ToolError(output.content);
      }
      return output.content;
    },
  };
}
