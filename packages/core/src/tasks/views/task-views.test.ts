import { describe, expect, it } from 'vitest';
import { BoundedLog } from '../store/task-log.ts';
import type { TaskRecord } from '../store/task-types.ts';
import { viewTaskStatus } from './task-views.ts';

const task: TaskRecord = {
  id: 'abc',
  principal: 'grynya',
  request: { prompt: 'x', model: 'scripted', budget: { maxSteps: 10, maxCostUsd: 0.5 } },
  status: 'completed',
  createdAt: '2026-01-01T00:00:00.000Z',
  startedAt: '2026-01-01T00:00:10.000Z',
  finishedAt: '2026-01-01T00:01:00.000Z',
  currentStep: 'done',
  usage: { steps: 3, inputTokens: 10, outputTokens: 20, totalTokens: 30, costUsd: 0.0012345678 },
  result: { text: `Looking around.\n\n${'r'.repeat(5_000)}`, finalText: 'r'.repeat(5_000), finishReason: 'stop', model: 'scripted', toolCalls: 2 },
};

describe('viewTaskStatus', () => {
  it("cuts the final answer at 400 characters and says so; full_result gives it whole with every step's text", () => {
    const glance = viewTaskStatus(task, undefined, { taskTimeoutMs: 60_000 });
    expect(glance).toMatchObject({
      task_id: 'abc',
      status: 'completed',
      result_truncated: true,
      result_chars: 5_000,
      elapsed_ms: 50_000,
      budget: { steps: 3, max_steps: 10, tokens: 30, cost_usd: 0.001235, max_cost_usd: 0.5, timeout_ms: 60_000 },
    });
    expect(glance.result).toBe(`${'r'.repeat(399)}…`);
    expect(glance.transcript).toBeUndefined();
    const full = viewTaskStatus(task, undefined, { fullResult: true });
    expect(full.result).toBe(task.result?.finalText);
    expect(full.transcript).toBe(task.result?.text);
    expect(full.result_truncated).toBeUndefined();
  });

  it('measures a running task up to now, and a resumed one by the time its runs took', () => {
    const running: TaskRecord = { ...task, status: 'running', finishedAt: undefined, result: undefined, elapsedMs: 4_000 };
    expect(viewTaskStatus(running, undefined, { now: Date.parse('2026-01-01T00:00:15.000Z') }).elapsed_ms).toBe(5_000);
    expect(viewTaskStatus({ ...running, resumes: [2] }, undefined, { now: Date.parse('2026-01-02T00:00:00.000Z') })).toMatchObject({
      elapsed_ms: 4_000,
      resumed_from: [2],
    });
    expect(viewTaskStatus({ ...running, status: 'pending', startedAt: undefined }, undefined).elapsed_ms).toBeUndefined();
  });

  it('summarizes log entries in one short line each for a glance, and gives them whole when paging', () => {
    const log = new BoundedLog();
    log.append('tool-call', { step: 1, toolCallId: 'c1', toolName: 'grynya__query_graph', args: { query: `MATCH (n) RETURN n ${'x'.repeat(500)}` } });
    const glance = viewTaskStatus(task, log.tail(3));
    expect(glance.log?.entries[0]).toMatchObject({
      seq: 1,
      type: 'tool-call',
      text: expect.stringMatching(/^grynya__query_graph \{"query":"MATCH \(n\) RETURN n x+…$/),
    });
    const paged = viewTaskStatus(task, log.read(0, 10), { fullEntries: true });
    expect(paged.log?.entries[0]).toMatchObject({ seq: 1, type: 'tool-call', toolName: 'grynya__query_graph', step: 1 });
  });

  it('summarizes each kind of entry by its own fields, the same for the entries of every store', () => {
    const log = new BoundedLog();
    const usage = { inputTokens: 10, outputTokens: 2, totalTokens: 12, estimated: false };
    log.append('tool-result', { step: 1, toolCallId: 'c1', toolName: 'grynya__query_graph', durationMs: 12, isError: false, preview: '{"rows":\n[1]}' });
    log.append('upstream-log', { upstream: 'grynya', source: 'stderr', level: 'warning', message: 'slow query' });
    log.append('llm-response', { step: 1, finishReason: 'stop', usage, text: 'The graph holds 3 nodes.' });
    log.append('step-end', { step: 1, usage, costUsd: undefined, elapsedMs: 1_600 });
    const lines = [
      { seq: 1, type: 'tool-result', text: 'grynya__query_graph 12ms {"rows": [1]}' },
      { seq: 2, type: 'upstream-log', text: '[grynya warning] slow query' },
      { seq: 3, type: 'llm-response', text: 'stop: The graph holds 3 nodes.' },
      { seq: 4, type: 'step-end', text: '{"step":1,"usage":{"inputTokens":10,"outputTokens":2,"totalTokens":12,"estimated":false…' },
    ];
    const page = log.read(0, 10);
    expect(viewTaskStatus(task, page).log?.entries).toEqual(lines);
    // SQLite and Redis give entries back from their JSON.
    expect(viewTaskStatus(task, JSON.parse(JSON.stringify(page)) as typeof page).log?.entries).toEqual(lines);
  });
});
