import { describe, expect, it } from 'vitest';
import { BoundedLog } from './task-log.ts';
import type { TaskRecord } from './task-types.ts';
import { viewTask } from './task-view.ts';

const task: TaskRecord = {
  id: 'abc',
  principal: 'grynya',
  request: { prompt: 'x' },
  status: 'completed',
  createdAt: '2026-01-01T00:00:00.000Z',
  finishedAt: '2026-01-01T00:01:00.000Z',
  currentStep: 'done',
  usage: { steps: 3, inputTokens: 10, outputTokens: 20, totalTokens: 30, costUsd: 0.0012345678 },
  result: { text: 'r'.repeat(5_000), finishReason: 'stop', model: 'scripted', toolCalls: 2 },
};

describe('viewTask', () => {
  it('cuts a long result and says so, unless the full result is asked for', () => {
    const glance = viewTask(task, undefined);
    expect(glance).toMatchObject({ task_id: 'abc', status: 'completed', result_truncated: true, result_chars: 5_000, usage: { steps: 3, tokens: 30, cost_usd: 0.001235 } });
    expect(String(glance.result)).toHaveLength(401);
    const full = viewTask(task, undefined, { fullResult: true });
    expect(full.result).toBe(task.result?.text);
    expect(full.result_truncated).toBeUndefined();
  });

  it('summarizes log entries in one short line each for a glance, and gives them whole when paging', () => {
    const log = new BoundedLog();
    log.append('tool-call', { step: 1, toolName: 'grynya__query_graph', args: { query: `MATCH (n) RETURN n ${'x'.repeat(500)}` } });
    const glance = viewTask(task, log.tail(3)) as { log: { entries: { seq: number; type: string; text: string }[] } };
    expect(glance.log.entries[0]?.text).toMatch(/^grynya__query_graph \{"query":"MATCH \(n\) RETURN n x+…$/);
    expect(glance.log.entries[0]?.text.length).toBeLessThanOrEqual(101);
    const paged = viewTask(task, log.read(0, 10), { fullEntries: true }) as { log: { entries: Record<string, unknown>[] } };
    expect(paged.log.entries[0]).toMatchObject({ seq: 1, type: 'tool-call', toolName: 'grynya__query_graph', step: 1 });
  });
});
