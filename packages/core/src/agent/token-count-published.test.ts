// Klym's count of a request against counts nobody at Klym wrote: the prompt tokens the OpenAI API reported
// for the examples of OpenAI's cookbook (test/support/openai-cookbook-token-counts.ts says where from, to the
// commit). The fake provider of the other tests counts with Klym's own tokenizer and framing, so only these
// can find a framing of Klym's that is wrong.
import { jsonSchema, tool, type JSONSchema7, type ModelMessage, type ToolSet } from 'ai';
import { describe, expect, it } from 'vitest';
import {
  CHAT_EXAMPLE,
  CHAT_EXAMPLE_PROMPT_TOKENS,
  TOOLS_EXAMPLE,
  TOOLS_EXAMPLE_PROMPT_TOKENS,
  TOOLS_EXAMPLE_TOOL,
  type CookbookMessage,
} from '../../../../test/support/openai-cookbook-token-counts.ts';
import { createContextWindow } from './context-window.ts';
import { createTokenCounter, tokenizerOf } from './token-count.ts';

/**
 * What a run counts, before sending it, for a request to `model` of `messages` (the first is the system
 * prompt) and `tools`. A `ModelMessage` has no `name`, and the AI SDK sends none: names are left out.
 */
async function klymCount(model: string, messages: readonly CookbookMessage[], tools: ToolSet = {}): Promise<number> {
  const [system, ...rest] = messages;
  const counter = await createTokenCounter(`openai:${model}`);
  const window = createContextWindow({ model: `openai:${model}`, counter, system: system?.content ?? '', tools });
  return window.requestTokens(rest.map(({ role, content }): ModelMessage => ({ role, content })));
}

/** The cookbook's tool as a run's tools. */
function weatherTool(): ToolSet {
  const { name, description, parameters } = TOOLS_EXAMPLE_TOOL.function;
  // A mutable copy: the fixture's schema is deeply readonly, a `JSONSchema7`'s arrays are not.
  return { [name]: tool({ description, inputSchema: jsonSchema(structuredClone(parameters) as unknown as JSONSchema7) }) };
}

/** The published count of `model` in `counts`, which must be there. */
function published(counts: Readonly<Record<string, number>>, model: string): number {
  const count = counts[model];
  if (count === undefined) throw new Error(`the cookbook gives no count for ${model}`);
  return count;
}

describe("Klym's token counts against the OpenAI API's, for the cookbook's examples", () => {
  // The models of the cookbook whose tokenizer Klym has: their counts must be the API's.
  for (const model of ['gpt-4o', 'gpt-4o-mini']) {
    it(`counts the cookbook's conversation for ${model} as the API did, but for the names Klym never sends`, async () => {
      expect(tokenizerOf(`openai:${model}`)).toBe('o200k_base');
      const counter = await createTokenCounter(`openai:${model}`);
      // Four of its messages have a `name`, which the API counts as its tokens and one more (the cookbook's
      // `tokens_per_name`). Klym cannot send one, so it never counts one: the one difference, stated exactly.
      const names = CHAT_EXAMPLE.reduce((sum, message) => sum + (message.name === undefined ? 0 : 1 + counter.count(message.name)), 0);
      expect(names).toBe(14);
      expect((await klymCount(model, CHAT_EXAMPLE)) + names).toBe(published(CHAT_EXAMPLE_PROMPT_TOKENS, model));
    });

    it(`counts the cookbook's tool definition for ${model} at more than the API did, by a stated margin`, async () => {
      const withoutTool = await klymCount(model, TOOLS_EXAMPLE);
      // The messages count as the API counts them (as above: these have no names), so the rest of its count is the tool's.
      const apiTool = published(TOOLS_EXAMPLE_PROMPT_TOKENS, model) - withoutTool;
      const klymTool = (await klymCount(model, TOOLS_EXAMPLE, weatherTool())) - withoutTool;
      // The API renders a tool more tersely than its JSON, which Klym counts (with `"strict":false`), so as never to count under it.
      expect({ apiTool, klymTool }).toEqual({ apiTool: 68, klymTool: 94 });
    });
  }

  // The cookbook's models of cl100k_base, which Klym does not have: it estimates, and must never count under.
  const estimated = [
    ...['gpt-3.5-turbo', 'gpt-4-0613', 'gpt-4'].map((model) => ({
      model,
      example: 'conversation',
      messages: CHAT_EXAMPLE,
      tools: {},
      counts: CHAT_EXAMPLE_PROMPT_TOKENS,
    })),
    ...['gpt-3.5-turbo', 'gpt-4'].map((model) => ({
      model,
      example: 'tool',
      messages: TOOLS_EXAMPLE,
      tools: weatherTool(),
      counts: TOOLS_EXAMPLE_PROMPT_TOKENS,
    })),
  ];
  for (const { model, example, messages, tools, counts } of estimated) {
    it(`estimates the cookbook's ${example} for ${model} at no less than the API counted`, async () => {
      expect(tokenizerOf(`openai:${model}`)).toBe('estimate');
      // The conversation's count is no less even without the names that the API counted.
      expect(await klymCount(model, messages, tools)).toBeGreaterThanOrEqual(published(counts, model));
    });
  }
});
