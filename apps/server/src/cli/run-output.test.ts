import type { AgentUsage } from '@klym/core';
import { describe, expect, it } from 'vitest';
import { progressWriter } from './run-output.ts';

const usage = (totalTokens: number): AgentUsage => ({ inputTokens: totalTokens - 1, outputTokens: 1, totalTokens, estimated: false });

describe('klym run --progress', () => {
  it('counts the tokens of every step so far, not only the last step’s', () => {
    const lines: string[] = [];
    const write = progressWriter({ write: (text: string) => lines.push(text.trimEnd()) }, (text) => text);
    write({ type: 'step-start', step: 1 });
    write({ type: 'step-end', step: 1, usage: usage(100), costUsd: undefined, elapsedMs: 5 });
    write({ type: 'step-start', step: 2 });
    write({ type: 'step-end', step: 2, usage: usage(40), costUsd: undefined, elapsedMs: 9 });
    expect(lines).toEqual([
      'klym · step 1 · thinking · 0 tokens so far',
      'klym · step 1 · done · 100 tokens so far',
      'klym · step 2 · thinking · 100 tokens so far',
      'klym · step 2 · done · 140 tokens so far',
    ]);
  });

  it('says when a request too long for the model was sent again without older tool results', () => {
    const lines: string[] = [];
    const write = progressWriter({ write: (text: string) => lines.push(text.trimEnd()) }, (text) => text);
    write({
      type: 'context-shrunk',
      step: 3,
      droppedResults: 2,
      tokensBefore: 6_388,
      tokens: 3_424,
      window: 6_000,
      reason: 'the provider refused the request as longer than its context window',
    });
    expect(lines).toEqual(["klym · step 3 · too long for the model's window of 6000 tokens: 2 older tool results dropped, sent again"]);
  });
});
