import type { TaskLogEntry, TaskLogType } from '@klym/core';
import type { TaskLogData } from '@klym/core/engine';
import { describe, expect, it } from 'vitest';
import { buildTimeline } from './timeline.ts';

let seq = 0;
const entry = <Type extends TaskLogType>(type: Type, data: TaskLogData<Type>, time = '2026-01-01T00:00:00.000Z'): TaskLogEntry =>
  ({ seq: ++seq, time, type, data }) as TaskLogEntry;
const usage = { inputTokens: 10, outputTokens: 2, totalTokens: 12, estimated: false };

describe('buildTimeline', () => {
  it("puts each step's LLM call and tool calls together, the task's notes and upstream logs in between", () => {
    const items = buildTimeline([
      entry('task-start', { model: 'scripted' }),
      entry('step-start', { step: 1 }),
      entry('llm-request', { step: 1, messages: 2, tools: 5 }, '2026-01-01T00:00:01.000Z'),
      entry('llm-response', { step: 1, finishReason: 'tool-calls', usage, text: 'Looking.' }, '2026-01-01T00:00:02.500Z'),
      entry('tool-call', { step: 1, toolCallId: 'a', toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } }),
      entry('tool-call', { step: 1, toolCallId: 'b', toolName: 'grynya__add_node', args: {} }),
      entry('upstream-log', { upstream: 'grynya', source: 'notification', level: 'info', message: 'query ran' }),
      entry('tool-result', { step: 1, toolCallId: 'a', toolName: 'grynya__query_graph', durationMs: 12, isError: false, preview: '{"status":"success"}' }),
      entry('tool-denied', { step: 1, toolCallId: 'b', toolName: 'grynya__add_node', policy: 'read-only', reason: 'it writes' }),
      entry('step-end', { step: 1, usage, costUsd: undefined, elapsedMs: 1_600 }),
      entry('task-end', { status: 'completed' }),
    ]);
    expect(items.map((item) => (item.kind === 'note' ? item.type : `step ${item.step}`))).toEqual(['task-start', 'step 1', 'upstream-log', 'task-end']);
    expect(items[1]).toEqual({
      kind: 'step',
      step: 1,
      llm: { messages: 2, tools: 5, durationMs: 1_500, usage, finishReason: 'tool-calls', text: 'Looking.' },
      tools: [
        { toolCallId: 'a', toolName: 'grynya__query_graph', args: { query: 'RETURN 1' }, outcome: 'ok', durationMs: 12, preview: '{"status":"success"}' },
        { toolCallId: 'b', toolName: 'grynya__add_node', args: {}, outcome: 'denied', error: 'read-only: it writes' },
      ],
      end: { usage, elapsedMs: 1_600 },
    });
  });

  it('builds a step from what a bounded log kept: a call whose start was dropped, one still under way', () => {
    const [step] = buildTimeline([
      entry('tool-error', {
        step: 4,
        toolCallId: 'x',
        toolName: 'grynya__query_graph',
        durationMs: 30_000,
        code: 'UPSTREAM_TIMEOUT',
        message: 'no answer in 30 s',
      }),
      entry('tool-call', { step: 4, toolCallId: 'y', toolName: 'grynya__query_graph', args: { query: 'RETURN 2' } }),
    ]);
    expect(step).toMatchObject({
      kind: 'step',
      step: 4,
      tools: [
        { toolCallId: 'x', outcome: 'error', durationMs: 30_000, error: 'UPSTREAM_TIMEOUT: no answer in 30 s' },
        { toolCallId: 'y', outcome: 'running', args: { query: 'RETURN 2' } },
      ],
    });
    expect(step).not.toHaveProperty('end');
  });
});
