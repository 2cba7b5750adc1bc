import type { TaskLogEntry } from '@klym/core';
import { BoundedLog } from '@klym/core/internal';
import { describe, expect, it } from 'vitest';
import { buildTimeline } from '../timeline.ts';
import { timelineView } from './timeline-view.ts';

const usage = { inputTokens: 10, outputTokens: 2, totalTokens: 12, estimated: false };

/** Every kind of note a task's log holds, as the in-memory store keeps them. */
function notes(): readonly TaskLogEntry[] {
  const log = new BoundedLog();
  log.append('task-create', { model: 'scripted', recordResult: true });
  log.append('task-start', { model: 'scripted' });
  log.append('task-resume', { fromStep: 2, interruptedCalls: ['grynya__query_graph'] });
  log.append('run-start', {
    model: 'scripted',
    tools: ['grynya__query_graph', 'grynya__add_node'],
    denied: [],
    unavailable: [{ upstream: 'memory', error: 'connection refused' }],
    budget: { maxSteps: 25 },
  });
  log.append('orphan-removed', { step: 3, toolCallIds: ['c1'] });
  log.append('budget', { name: 'tokens', limit: 1_000, used: 1_200 });
  log.append('upstream-log', { upstream: 'grynya', source: 'notification', level: 'info', message: 'query\nran' });
  log.append('run-end', { finishReason: 'stop', steps: 2, usage, costUsd: 0.0012, elapsedMs: 1_600 });
  log.append('run-end', { finishReason: 'error', steps: 1, usage, costUsd: undefined, elapsedMs: 340, error: { code: 'MODEL_ERROR', message: 'boom' } });
  log.append('task-end', { status: 'error', error: { code: 'TASK_TIMEOUT', message: 'ran too long' } });
  log.append('task-end', { status: 'cancelled', reason: 'by hand' });
  log.append('write-back', { status: 'failed', nodeId: 'klym_t1', dayId: 'd_2026_01_01', error: 'no graph' });
  log.append('code-start', { step: 1, toolCallId: 'p1', code: 'return await callTool("grynya__query_graph", {})', replay: true });
  log.append('code-call', { step: 1, toolCallId: 'p1', call: 1, name: 'callTool', target: 'grynya__add_node', durationMs: 0, bytes: 40, replayed: true });
  log.append('code-call', { step: 1, toolCallId: 'p1', call: 2, name: 'llm', durationMs: 1_200, bytes: 20, usage });
  log.append('code-call', {
    step: 1,
    toolCallId: 'p1',
    call: 3,
    name: 'callTool',
    target: 'grynya__x',
    durationMs: 3,
    bytes: 0,
    error: 'No tool grynya__x here',
  });
  log.append('code-log', { step: 1, toolCallId: 'p1', text: 'checked 3' });
  log.append('code-end', { step: 1, toolCallId: 'p1', calls: 3, elapsedMs: 1_400, bytes: 12 });
  log.append('code-end', { step: 1, toolCallId: 'p1', calls: 0, elapsedMs: 300, error: 'The program ran past its time limit: code.timeoutMs is 300 ms' });
  log.append('webhook-delivery', { endpoint: 'ops', event: 'task.completed', attempt: 1, outcome: 'delivered', status: 200, webhookId: 'msg_1' });
  return log.read(0, 100).entries;
}

/** The text of each note the timeline shows, in order. */
async function noteTexts(entries: readonly TaskLogEntry[]): Promise<string[]> {
  const rendered = String(await timelineView(buildTimeline(entries), 0, 'task-1'));
  return [...rendered.matchAll(/<li class="note note-[\w-]+"><time [^>]*>[^<]*<\/time> (.*?)<\/li>/g)].map((match) => match[1] ?? '');
}

describe('timelineView', () => {
  it('tells each note in words, the same for the entries of every store', async () => {
    const expected = [
      'Queued for scripted, its result to be written back',
      'Started on scripted',
      'Resumed after step 2 (interrupted: grynya__query_graph)',
      'Run on scripted with 2 tools; memory unavailable: connection refused',
      '{&quot;step&quot;:3,&quot;toolCallIds&quot;:[&quot;c1&quot;]}',
      'Budget tokens used up: 1200 of 1000',
      '[grynya info] query ran',
      'Run ended: stop after 2 steps, 12 tokens, $0.0012, 1.6 s',
      'Run ended: error after 1 steps, 12 tokens, 340 ms — MODEL_ERROR: boom',
      'Ended error — TASK_TIMEOUT: ran too long',
      'Ended cancelled (by hand)',
      'Write-back failed (klym_t1): no graph',
      'Program run again from its start after a restart: return await callTool(&quot;grynya__query_graph&quot;, {})',
      'Program call 1: callTool grynya__add_node, 0 ms, 40 bytes (from the task&#39;s record)',
      'Program call 2: llm, 1.2 s, 20 bytes, 12 tokens',
      'Program call 3: callTool grynya__x failed: No tool grynya__x here',
      'Program log: checked 3',
      'Program ended after 3 host calls, 1.4 s: 12 bytes answered',
      'Program ended after 0 host calls, 300 ms — The program ran past its time limit: code.timeoutMs is 300 ms',
      '{&quot;endpoint&quot;:&quot;ops&quot;,&quot;event&quot;:&quot;task.completed&quot;,&quot;attempt&quot;:1,&quot;outcome&quot;:&quot;delivered&quot;,&quot;status&quot;:200,&quot;webhookId&quot;:&quot;msg_1&quot;}',
    ];
    expect(await noteTexts(notes())).toEqual(expected);
    // SQLite and Redis give entries back from their JSON (an undefined field is gone).
    expect(await noteTexts(JSON.parse(JSON.stringify(notes())) as TaskLogEntry[])).toEqual(expected);
  });
});
