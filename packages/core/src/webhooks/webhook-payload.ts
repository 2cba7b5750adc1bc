import { createHash } from 'node:crypto';
import { TASK_DEFAULTS } from '../defaults.ts';
import { clipText } from '../internal/clip-text.ts';
import type { Redactor } from '../redact.ts';
import type { TaskEvent } from '../tasks/store/task-types.ts';
import type { TaskRecord } from '../tasks/store/task-types.ts';
import type { OutboxEventType, WebhookEventType, WebhookMessage } from './webhook-types.ts';

/** The body of a webhook message (Standard Webhooks' shape): concise, plain data, never a secret. */
export interface WebhookPayload {
  readonly type: WebhookEventType;
  /** When the event happened, ISO 8601. */
  readonly timestamp: string;
  readonly data: {
    readonly task_id: string;
    readonly status: TaskRecord['status'];
    /** Who started the task. */
    readonly principal: string;
    readonly finish_reason?: string;
    readonly error?: { readonly code: string; readonly message: string };
    readonly cancel_reason?: string;
    /** For `task.input_required`: what the task asks; answer it with `reply_to_agent_task` or `POST /api/tasks/:id/reply`. */
    readonly question?: string;
    /** For `task.input_required` when the task waits for approval of a call: the call's tool (reply with `approve`). */
    readonly approval_tool?: string;
    /** The final answer's first 400 characters; `check_task_status` with `full_result` gives it whole. */
    readonly result_preview?: string;
    readonly result_truncated?: true;
  };
}

/** The webhook event a task event is, if any: a start, a question to its caller, or an end by its status. A resume is not a start. */
export function webhookEventOf(event: TaskEvent): WebhookEventType | undefined {
  if (event.type === 'task-start') return 'task.started';
  if (event.type === 'task-input-required') return 'task.input_required';
  if (event.type !== 'task-end') return undefined;
  switch (event.task.status) {
    case 'completed':
      return 'task.completed';
    case 'error':
      return 'task.failed';
    case 'cancelled':
      return 'task.cancelled';
    default:
      return undefined;
  }
}

/**
 * The `webhook-id` of a task's event for an endpoint (or a push target, `push:<id>`): the same whichever
 * process stores it, so storing it twice stores one message, and a receiver that deduplicates by id sees the event once.
 * `occasion` tells apart events a task may have more than once (each question it asks, by when it asked).
 */
export function webhookMessageId(taskId: string, endpoint: string, type: OutboxEventType, occasion?: string): string {
  return `msg_${createHash('sha256')
    .update(JSON.stringify(occasion === undefined ? [taskId, endpoint, type] : [taskId, endpoint, type, occasion]))
    .digest('base64url')
    .slice(0, 32)}`;
}

/**
 * A message about `task` for `endpoint` (an endpoint's name, or `push:<id>`), due at once: what the dispatcher
 * stores for an endpoint and for a push target alike. `occasion`: as {@link webhookMessageId} takes it.
 */
export function newWebhookMessage(taskId: string, endpoint: string, type: OutboxEventType, payload: string, now: number, occasion?: string): WebhookMessage {
  return { id: webhookMessageId(taskId, endpoint, type, occasion), taskId, endpoint, type, payload, createdAt: now, attempts: 0, nextAttemptAt: now };
}

/** The payload of `type` for `task`, passed through `redact` (the task service's: configured secrets and secret-shaped text). */
export function webhookPayload(type: WebhookEventType, task: TaskRecord, redact: Redactor): WebhookPayload {
  const answer = task.result?.finalText;
  const preview = answer === undefined || answer === '' ? undefined : clipText(answer, TASK_DEFAULTS.resultPreviewChars);
  return redact.value({
    type,
    timestamp: (type === 'task.started' ? task.startedAt : type === 'task.input_required' ? task.input?.askedAt : task.finishedAt) ?? new Date().toISOString(),
    data: {
      task_id: task.id,
      status: task.status,
      principal: task.principal,
      ...(task.result === undefined ? {} : { finish_reason: task.result.finishReason }),
      ...(task.error === undefined ? {} : { error: { code: task.error.code, message: task.error.message } }),
      ...(task.cancelReason === undefined ? {} : { cancel_reason: task.cancelReason }),
      ...(type === 'task.input_required' && task.input !== undefined ? { question: task.input.question } : {}),
      ...(type === 'task.input_required' && task.input?.kind === 'approval' && task.input.call !== undefined
        ? { approval_tool: task.input.call.toolName }
        : {}),
      ...(preview === undefined ? {} : { result_preview: preview, ...(preview !== answer ? { result_truncated: true as const } : {}) }),
    },
  });
}
