import { Role, TaskState } from '@a2a-js/sdk';
import { describe, expect, it } from 'vitest';
import { KlymError } from '../errors.ts';
import type { TaskRecord } from '../tasks/store/task-types.ts';
import { toA2aError } from './a2a-request-handler.ts';
import { historyOf, klymStatusOf, toA2aTask } from './a2a-task.ts';

const base: TaskRecord = {
  id: 'task-1',
  principal: 'grynya',
  request: { prompt: 'Self-check', model: 'scripted' },
  status: 'running',
  createdAt: '2026-11-27T04:00:00.000Z',
  startedAt: '2026-11-27T04:00:01.000Z',
  currentStep: 'step 2: calling grynya__query_graph',
  usage: { steps: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15, costUsd: undefined },
};
const textOf = (task: ReturnType<typeof toA2aTask>): string | undefined => {
  const content = task.status?.message?.parts[0]?.content;
  return content?.$case === 'text' ? content.value : undefined;
};

describe('a Klym task as an A2A Task', () => {
  it('keeps the id, and says the step while it works', () => {
    const task = toA2aTask(base);
    expect(task).toMatchObject({
      id: 'task-1',
      contextId: 'task-1',
      status: { state: TaskState.TASK_STATE_WORKING, timestamp: base.startedAt },
      artifacts: [],
    });
    expect(textOf(task)).toBe('step 2: calling grynya__query_graph');
  });

  it('fails with the Klym code in the message, and is canceled with its reason', () => {
    const failed = toA2aTask({
      ...base,
      status: 'error',
      finishedAt: '2026-11-27T04:01:00.000Z',
      error: { code: 'BUDGET_EXCEEDED', message: 'The task ran out of steps' },
    });
    expect(failed.status).toMatchObject({ state: TaskState.TASK_STATE_FAILED, timestamp: '2026-11-27T04:01:00.000Z' });
    expect(textOf(failed)).toBe('BUDGET_EXCEEDED: The task ran out of steps');
    expect(textOf(toA2aTask({ ...base, status: 'cancelled', cancelReason: 'shutdown' }))).toBe('Cancelled: shutdown');
    expect(toA2aTask({ ...base, status: 'pending' }).status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
  });

  it('completes with the final answer as the text artifact `result`, and lists big artifacts without inlining them', () => {
    const result = { text: 'thinking\n\nThe answer', finalText: 'The answer', finishReason: 'stop', model: 'scripted', toolCalls: 1 };
    const artifact = { id: 'art_0123456789ab', tool: 'fs__read_text_file', bytes: 5_000_000, lines: 80_000, tokens: 1_200_000, createdAt: base.createdAt };
    const task = toA2aTask({ ...base, status: 'completed', result }, [artifact]);
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.artifacts[0]).toMatchObject({ artifactId: 'result', parts: [{ content: { $case: 'text', value: 'The answer' } }] });
    expect(task.artifacts[1]).toMatchObject({
      artifactId: artifact.id,
      parts: [{ content: { $case: 'data', value: { id: artifact.id, bytes: 5_000_000, lines: 80_000 } } }],
    });
    expect(JSON.stringify(task).length).toBeLessThan(2_000);
  });

  it('asks as TASK_STATE_INPUT_REQUIRED with the question, an approval with the call as data, and is working again once answered', () => {
    const askedAt = '2026-11-27T04:00:30.000Z';
    const asking = toA2aTask({ ...base, status: 'input_required', input: { question: 'Which service: billing or search?', toolCallId: 'c1', askedAt } });
    expect(asking.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(asking.status?.message).toMatchObject({ role: Role.ROLE_AGENT, taskId: 'task-1', messageId: `task-1:input:${askedAt}` });
    expect(textOf(asking)).toBe('Which service: billing or search?');
    expect(asking.status?.message?.parts).toHaveLength(1);
    const call = { toolName: 'grynya__write_node', input: { id: 'n1', text: 'hello' } };
    const approval = toA2aTask({
      ...base,
      status: 'input_required',
      input: { kind: 'approval', question: 'Run grynya__write_node {"id":"n1","text":"hello"}?', call, toolCallId: 'c2', askedAt },
    });
    expect(approval.status?.message?.parts[1]).toMatchObject({ content: { $case: 'data', value: call }, mediaType: 'application/json' });
    expect(approval.status?.message?.metadata).toMatchObject({ klym: { kind: 'approval' } });
    const answered = toA2aTask({
      ...base,
      status: 'pending',
      input: { question: 'Which?', toolCallId: 'c1', askedAt, answer: 'billing', answeredAt: askedAt },
    });
    expect(answered.status?.state).toBe(TaskState.TASK_STATE_WORKING);
  });

  it('maps list filters back, and a state Klym never has to none', () => {
    expect(klymStatusOf(TaskState.TASK_STATE_CANCELED)).toBe('cancelled');
    expect(klymStatusOf(TaskState.TASK_STATE_INPUT_REQUIRED)).toBe('input_required');
    expect(klymStatusOf(TaskState.TASK_STATE_AUTH_REQUIRED)).toBeUndefined();
  });

  it('maps Klym refusals to the A2A errors the spec names', () => {
    expect(toA2aError(new KlymError('TASK_NOT_FOUND', 'No task x'))).toMatchObject({ name: 'TaskNotFoundError', message: 'No task x' });
    expect(toA2aError(new KlymError('INVALID_ARGUMENT', '`model`: unknown'))).toMatchObject({ name: 'RequestMalformedError' });
    expect(toA2aError(new KlymError('TASK_NOT_WAITING', 'Task x was already answered'))).toMatchObject({ name: 'UnsupportedOperationError' });
    expect(toA2aError(new KlymError('TASK_QUEUE_FULL', 'The queue is full'))).toMatchObject({ message: 'TASK_QUEUE_FULL: The queue is full' });
  });
});

describe('a task’s history', () => {
  it('holds every question with its reply, an approval’s decision as data, and the prompt first', () => {
    const task: TaskRecord = {
      ...base,
      status: 'input_required',
      earlierInputs: [
        { question: 'Which day?', toolCallId: 'c1', askedAt: '2026-11-27T04:00:02.000Z', answer: 'Tuesday', answeredAt: '2026-11-27T04:00:03.000Z' },
      ],
      input: {
        kind: 'approval',
        question: 'Approve the call of grynya__add_node with {}?',
        call: { toolName: 'grynya__add_node', input: {} },
        toolCallId: 'c2',
        askedAt: '2026-11-27T04:00:04.000Z',
        approved: false,
        reason: 'not now',
      },
    };
    const parts = historyOf(task).map((message) => [message.role, message.parts.map((part) => part.content?.value)]);
    expect(parts).toEqual([
      [Role.ROLE_USER, ['Self-check']],
      [Role.ROLE_AGENT, ['Which day?']],
      [Role.ROLE_USER, ['Tuesday']],
      [Role.ROLE_AGENT, ['Approve the call of grynya__add_node with {}?', { toolName: 'grynya__add_node', input: {} }]],
      [Role.ROLE_USER, [{ approve: false, reason: 'not now' }]],
    ]);
    expect(new Set(historyOf(task).map((message) => message.messageId)).size).toBe(5);
    // A Task carries it only when asked: streams and pushes do not.
    expect(toA2aTask(task).history).toEqual([]);
    expect(toA2aTask(task, [], { length: 1 }).history).toHaveLength(1);
  });
});
