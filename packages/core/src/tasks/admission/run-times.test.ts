import { describe, expect, it } from 'vitest';
import { createRunTimes } from './run-times.ts';
import type { TaskRecord } from '../store/task-types.ts';

const ended = (ms: number, status: TaskRecord['status'] = 'completed', started = true): TaskRecord => ({
  id: `t${ms}`,
  principal: 'alice',
  request: { prompt: 'x' },
  status,
  createdAt: '2026-01-01T00:00:00.000Z',
  ...(started ? { startedAt: '2026-01-01T00:00:01.000Z' } : {}),
  finishedAt: new Date(Date.parse('2026-01-01T00:00:01.000Z') + ms).toISOString(),
  currentStep: status,
  usage: { steps: 1, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: undefined },
});

describe('createRunTimes', () => {
  it('gives the median of the last runs that ran and ended, leaving out cancels and tasks that never started', () => {
    const times = createRunTimes(3);
    expect(times.median()).toBeUndefined();
    for (const task of [ended(9_000), ended(1_000), ended(5_000, 'cancelled'), ended(7_000, 'error', false), ended(3_000, 'error')]) times.record(task);
    expect(times.median()).toBe(3_000);
    times.record(ended(2_000));
    // The oldest (9 s) is forgotten: 1 s, 3 s, 2 s.
    expect(times.median()).toBe(2_000);
  });
});
