import { describe, expect, it } from 'vitest';
import { createRedactor } from '../redact.ts';
import type { TaskRecord } from '../tasks/store/task-types.ts';
import { webhookPayload } from './webhook-payload.ts';

const waiting: TaskRecord = {
  id: 'task-1',
  principal: 'grynya',
  request: { prompt: 'Record the finding' },
  status: 'input_required',
  createdAt: '2026-11-28T09:00:00.000Z',
  currentStep: 'waiting for approval',
  usage: { steps: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15, costUsd: undefined },
  input: {
    kind: 'approval',
    question: 'Approve the call of grynya__add_node with {"node_type":"Analysis","token":"sk-live-123456789"}?',
    call: { toolName: 'grynya__add_node', input: { node_type: 'Analysis' } },
    toolCallId: 'call-1',
    askedAt: '2026-11-28T09:00:01.000Z',
  },
};

describe('webhookPayload of task.input_required', () => {
  it('names the tool a waiting approval is for, with the question redacted, stamped when it was asked', () => {
    const payload = webhookPayload('task.input_required', waiting, createRedactor(['sk-live-123456789']));
    expect(payload.timestamp).toBe('2026-11-28T09:00:01.000Z');
    expect(payload.data).toMatchObject({ status: 'input_required', approval_tool: 'grynya__add_node' });
    expect(payload.data.question).toContain('grynya__add_node');
    expect(JSON.stringify(payload)).not.toContain('sk-live-123456789');
  });

  it('has no approval_tool for a question', () => {
    const { kind: _kind, call: _call, ...question } = waiting.input as NonNullable<TaskRecord['input']>;
    const payload = webhookPayload('task.input_required', { ...waiting, input: { ...question, question: 'Which day?' } }, createRedactor());
    expect(payload.data).toEqual({ task_id: 'task-1', status: 'input_required', principal: 'grynya', question: 'Which day?' });
  });
});
