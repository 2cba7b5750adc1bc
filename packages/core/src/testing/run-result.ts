import type { AgentRunResult } from '../agent/types.ts';

/**
 * A finished run's result, as a stand-in for `runAgent` (a task manager's `run`) returns it: `text` is the
 * final answer and the whole text, one step, no usage; `overrides` replaces any field.
 * @example
 * ```ts
 * const run: AgentRunner = async () => runResult('done')
 * ```
 */
export function runResult(text: string, overrides: Partial<AgentRunResult> = {}): AgentRunResult {
  return {
    text,
    finalText: text,
    finishReason: 'stop',
    steps: 1,
    usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0, estimated: true },
    costUsd: undefined,
    toolCalls: [],
    model: 'scripted',
    elapsedMs: 1,
    budget: { maxSteps: 25 },
    messages: [],
    ...overrides,
  };
}
