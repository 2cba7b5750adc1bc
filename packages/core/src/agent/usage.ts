import type { LanguageModelUsage, ModelMessage } from 'ai';
import type { AgentUsage, ModelPrice } from './types.ts';

/**
 * List prices (USD per million tokens, standard tier, short context) of a few common models, as published
 * in 2025. Prices change: pass `prices` to `runAgent` to correct or extend them. `scripted` is free.
 */
export const DEFAULT_MODEL_PRICES: Readonly<Record<string, ModelPrice>> = {
  'openai:gpt-4.1': { inputPerMillion: 2, outputPerMillion: 8 },
  'openai:gpt-4.1-mini': { inputPerMillion: 0.4, outputPerMillion: 1.6 },
  'openai:gpt-4.1-nano': { inputPerMillion: 0.1, outputPerMillion: 0.4 },
  'openai:gpt-4o': { inputPerMillion: 2.5, outputPerMillion: 10 },
  'openai:gpt-4o-mini': { inputPerMillion: 0.15, outputPerMillion: 0.6 },
  'google:gemini-2.5-pro': { inputPerMillion: 1.25, outputPerMillion: 10 },
  'google:gemini-2.5-flash': { inputPerMillion: 0.3, outputPerMillion: 2.5 },
  'google:gemini-2.5-flash-lite': { inputPerMillion: 0.1, outputPerMillion: 0.4 },
  scripted: { inputPerMillion: 0, outputPerMillion: 0 },
};

/** Characters per token assumed when a provider reports no usage. */
export const CHARS_PER_TOKEN = 4;

/** No tokens yet. */
export const ZERO_USAGE: AgentUsage = { inputTokens: 0, outputTokens: 0, totalTokens: 0, estimated: false };

/** The price of `model` (`provider:model`): from `prices`, then the defaults; by full name, then by model id alone. */
export function priceOf(model: string, prices: Readonly<Record<string, ModelPrice>> = {}): ModelPrice | undefined {
  const id = model.includes(':') ? model.slice(model.indexOf(':') + 1) : model;
  return prices[model] ?? prices[id] ?? DEFAULT_MODEL_PRICES[model];
}

/** What `usage` costs at `price`, in USD; `undefined` without a price. */
export function costOf(usage: AgentUsage, price: ModelPrice | undefined): number | undefined {
  if (price === undefined) return undefined;
  return (usage.inputTokens * price.inputPerMillion + usage.outputTokens * price.outputPerMillion) / 1_000_000;
}

const estimate = (chars: number): number => Math.ceil(chars / CHARS_PER_TOKEN);

/**
 * One step's usage: what the provider reported, with whatever it left out estimated from the characters
 * sent and received (~4 per token) and marked `estimated`.
 */
export function stepUsage(reported: LanguageModelUsage | undefined, characters: { readonly input: number; readonly output: number }): AgentUsage {
  const input = reported?.inputTokens;
  const output = reported?.outputTokens;
  const inputTokens = input ?? estimate(characters.input);
  const outputTokens = output ?? estimate(characters.output);
  return { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens, estimated: input === undefined || output === undefined };
}

/**
 * `JSON.stringify(messages).length`, for estimating input tokens, with each message serialised once:
 * a run's conversation grows by appending, so without this every step would serialise all of it again.
 * Messages are never changed once in a conversation (cleaning one makes a copy), so a size stays true.
 */
export function createMessageSizer(): (messages: readonly ModelMessage[]) => number {
  const sizes = new WeakMap<ModelMessage, number>();
  return (messages) => {
    // `[`, `]` and the commas between the messages.
    let chars = messages.length === 0 ? 2 : messages.length + 1;
    for (const message of messages) {
      let size = sizes.get(message);
      if (size === undefined) sizes.set(message, (size = JSON.stringify(message).length));
      chars += size;
    }
    return chars;
  };
}

/** The sum of two usages; estimated if either was. */
export function addUsage(a: AgentUsage, b: AgentUsage): AgentUsage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    totalTokens: a.totalTokens + b.totalTokens,
    estimated: a.estimated || b.estimated,
  };
}
