import { describe, expect, it } from 'vitest';
import type { TaskPatch, TaskRecord, TaskStore } from '../store/task-types.ts';
import { createProgress } from './task-progress.ts';

const task = {
  id: 'task-1',
  status: 'running',
  currentStep: 'step 1',
  usage: { steps: 0, inputTokens: 100, outputTokens: 10, totalTokens: 110 },
} as unknown as TaskRecord;

describe("a task's progress", () => {
  it("counts a program's sub-calls in the task's tokens as each host call ends, and says which call it is on", () => {
    const patches: TaskPatch[] = [];
    const store = { transition: async (_id: string, _from: unknown, patch: TaskPatch) => void patches.push(patch) } as unknown as TaskStore;
    const progress = createProgress(store, task);
    const base = { step: 1, toolCallId: 'p', durationMs: 5, bytes: 20 } as const;
    progress.apply({ type: 'code-call', ...base, call: 1, name: 'callTool', target: 'grynya__query_graph' });
    progress.apply({ type: 'code-call', ...base, call: 2, name: 'llm', usage: { inputTokens: 300, outputTokens: 40, totalTokens: 340, estimated: false } });
    progress.apply({ type: 'code-call', ...base, call: 3, name: 'llmMap', usage: { inputTokens: 600, outputTokens: 60, totalTokens: 660, estimated: true } });
    progress.save();
    expect(patches).toEqual([
      { currentStep: 'step 1: program call 3: llmMap', usage: { steps: 0, inputTokens: 1_000, outputTokens: 110, totalTokens: 1_110 } },
    ]);
  });
});
