// Records as the task store tests make them: a task, an artifact, a webhook message, a checkpoint.
import type { AgentCheckpoint, TaskLogPage, TaskRecord } from '@klym/core';
import type { StoredArtifact } from '@klym/core/artifacts';
import type { WebhookMessage } from '@klym/core/engine';

/** A message of a run's conversation (the AI SDK's `ModelMessage`). */
export type ModelMessage = AgentCheckpoint['messages'][number];

/** A stored artifact of `text` as a test saves one; `fields` override. */
export const artifactOf = (id: string, text: string, fields: Partial<StoredArtifact> = {}): StoredArtifact => ({
  id,
  tool: 'fs__read_text_file',
  bytes: Buffer.byteLength(text),
  lines: text.split('\n').length,
  tokens: Math.ceil(text.length / 4),
  createdAt: '2026-01-01T00:00:01.000Z',
  text,
  ...fields,
});

/** A task as a test writes one; `fields` override. */
export const taskRecord = (id: string, fields: Partial<TaskRecord> = {}): TaskRecord => ({
  id,
  principal: 'alice',
  request: { prompt: `do ${id}` },
  status: 'pending',
  createdAt: '2026-01-01T00:00:00.000Z',
  currentStep: 'queued',
  usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: undefined },
  ...fields,
});

/** A finished task with every optional field set, as a store must keep it whole. */
export const finishedTaskRecord = (id: string): TaskRecord =>
  taskRecord(id, {
    status: 'completed',
    request: { prompt: 'p', model: 'scripted', budget: { maxSteps: 3 }, tools: { allow: ['grynya__*'] }, recordResult: true },
    startedAt: '2026-01-01T00:00:01.000Z',
    finishedAt: '2026-01-01T00:00:09.000Z',
    currentStep: 'done',
    usage: { steps: 3, inputTokens: 120, outputTokens: 40, totalTokens: 160, costUsd: 0.0012 },
    result: { text: 'one\n\ntwo', finalText: 'two', finishReason: 'stop', model: 'scripted', toolCalls: 2 },
    writeBack: { status: 'written', nodeId: `klym_${id}`, dayId: 'd_2026_01_01' },
    elapsedMs: 8_000,
    resumes: [2],
  });

/** A webhook message of task t1 as a test stores one; `fields` override. */
export const webhookMessage = (id: string, fields: Partial<WebhookMessage> = {}): WebhookMessage => ({
  id,
  taskId: 't1',
  endpoint: 'ops',
  type: 'task.completed',
  payload: `{"type":"task.completed","data":{"task_id":"t1","n":"${id}"}}`,
  createdAt: 1_000,
  attempts: 0,
  nextAttemptAt: 1_000,
  ...fields,
});

/** A checkpoint after `steps` steps with these messages. */
export const checkpointOf = (messages: readonly ModelMessage[], steps = messages.length): AgentCheckpoint => ({
  steps,
  messages,
  texts: [`after ${steps} steps`],
  usage: { inputTokens: 10 * steps, outputTokens: steps, totalTokens: 11 * steps, estimated: false },
  elapsedMs: 100 * steps,
  toolCalls: steps,
});

export const userMessage = (text: string): ModelMessage => ({ role: 'user', content: text });

/** A page without entry times, which differ between two logs fed at different moments. */
export const timeless = (page: TaskLogPage) => ({ ...page, entries: page.entries.map(({ time: _time, ...entry }) => entry) });
