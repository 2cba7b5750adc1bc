import { describe, expect, it } from 'vitest';
import { addUsage, costOf, priceOf, stepUsage } from './usage.ts';

describe('usage and cost', () => {
  it('takes the provider figures, and estimates only what it left out (~4 characters per token)', () => {
    const reported = { inputTokens: 10, outputTokens: 5 } as Parameters<typeof stepUsage>[0];
    expect(stepUsage(reported, { input: 4_000, output: 400 })).toEqual({ inputTokens: 10, outputTokens: 5, totalTokens: 15, estimated: false });
    expect(stepUsage(undefined, { input: 4_001, output: 400 })).toEqual({ inputTokens: 1_001, outputTokens: 100, totalTokens: 1_101, estimated: true });
    const partial = { inputTokens: 10, outputTokens: undefined } as Parameters<typeof stepUsage>[0];
    expect(stepUsage(partial, { input: 0, output: 8 })).toEqual({ inputTokens: 10, outputTokens: 2, totalTokens: 12, estimated: true });
    expect(addUsage(stepUsage(reported, { input: 0, output: 0 }), stepUsage(undefined, { input: 4, output: 4 }))).toMatchObject({
      totalTokens: 17,
      estimated: true,
    });
  });

  it('prices by provider:model, then by model id, then the defaults; unknown is undefined', () => {
    expect(priceOf('openai:gpt-4.1-mini')).toEqual({ inputPerMillion: 0.4, outputPerMillion: 1.6 });
    expect(priceOf('compatible:llama3', { llama3: { inputPerMillion: 0, outputPerMillion: 0 } })).toEqual({ inputPerMillion: 0, outputPerMillion: 0 });
    expect(priceOf('openai:gpt-4.1-mini', { 'openai:gpt-4.1-mini': { inputPerMillion: 1, outputPerMillion: 1 } })?.inputPerMillion).toBe(1);
    expect(priceOf('compatible:llama3')).toBeUndefined();
    expect(costOf({ inputTokens: 1_000_000, outputTokens: 500_000, totalTokens: 0, estimated: false }, { inputPerMillion: 2, outputPerMillion: 8 })).toBe(6);
    expect(costOf({ inputTokens: 1, outputTokens: 1, totalTokens: 2, estimated: false }, undefined)).toBeUndefined();
  });
});
