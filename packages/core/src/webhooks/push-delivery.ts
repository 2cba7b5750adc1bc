import { MAX_TIMER_MS, WEBHOOK_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import type { Redactor } from '../redact.ts';
import type { TaskEvent } from '../tasks/store/task-types.ts';
import { isReplied, type TaskRecord, type TaskStore } from '../tasks/store/task-types.ts';
import { createPushAllowList, type PushAllowList } from './push-allow.ts';
import {
  PUSH_ENDPOINT_PREFIX,
  PUSH_EVENTS,
  REPEATED_PUSH_EVENTS,
  pushRank,
  type PushEventType,
  type PushFormat,
  type PushOptions,
  type PushTarget,
} from './push-types.ts';
import type { AttemptTarget } from './send-webhook.ts';
import { isWebhookSecret } from './webhook-endpoints.ts';
import { newWebhookMessage, webhookMessageId } from './webhook-payload.ts';
import type { WebhookMessage } from './webhook-types.ts';
import { positiveInteger } from '../internal/positive.ts';

/** {@link PushOptions} checked, with every default applied. */
export interface ResolvedPushOptions {
  readonly allow: PushAllowList;
  readonly format: PushFormat;
  readonly secret: string | undefined;
  readonly retryForMs: number;
  readonly retryDelayMs: number;
  readonly maxRetryDelayMs: number;
  readonly timeoutMs: number;
  readonly maxPerTask: number;
}

/** Push targets one task may have when `maxPerTask` is not given: each is told of every transition. */
const DEFAULT_MAX_PER_TASK = 10;

const invalid = (option: string, expected: string, got?: unknown): KlymError =>
  new KlymError('CONFIG_INVALID', `Expected \`push.${option}\` to be ${expected}${got === undefined ? '' : `, got ${JSON.stringify(got)}`}`);

/**
 * Checks push options and applies their defaults (the webhook endpoints' for the delays).
 * @throws {KlymError} `CONFIG_INVALID` naming the option that is not usable (never a secret's value).
 */
export function resolvePushOptions(options: PushOptions): ResolvedPushOptions {
  if (options.secret !== undefined && !isWebhookSecret(options.secret)) {
    throw invalid('secret', 'a Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 random bytes');
  }
  const milliseconds = (option: 'retryForMs' | 'retryDelayMs' | 'maxRetryDelayMs' | 'timeoutMs'): number => {
    const value = options[option] ?? WEBHOOK_DEFAULTS[option];
    if (!Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) throw invalid(option, `a positive number of milliseconds up to ${MAX_TIMER_MS}`, value);
    return value;
  };
  const maxPerTask = positiveInteger('push.maxPerTask', options.maxPerTask ?? DEFAULT_MAX_PER_TASK);
  return {
    allow: createPushAllowList(options.allow),
    format: options.format,
    secret: options.secret,
    retryForMs: milliseconds('retryForMs'),
    retryDelayMs: milliseconds('retryDelayMs'),
    maxRetryDelayMs: milliseconds('maxRetryDelayMs'),
    timeoutMs: milliseconds('timeoutMs'),
    maxPerTask,
  };
}

/** The outbox endpoint of a push target. */
export const pushEndpoint = (target: Pick<PushTarget, 'id'>): string => `${PUSH_ENDPOINT_PREFIX}${target.id}`;

/** Whether an outbox message is for a push target rather than a configured endpoint. */
export const isPushMessage = (message: Pick<WebhookMessage, 'endpoint'>): boolean => message.endpoint.startsWith(PUSH_ENDPOINT_PREFIX);

/**
 * What a task event tells push targets: its creation (the task as it stands), its start, a question to its caller,
 * its going on after the answer, and its end (a completed one's answer first). A resume after a restart, of a task
 * that asked nothing, is not told (it was working and still is); an event heard from another process sharing the
 * queue was told there.
 */
export function pushEventsOf(event: TaskEvent): readonly PushEventType[] {
  if ('elsewhere' in event && event.elsewhere === true) return [];
  switch (event.type) {
    case 'task-create':
      return ['task.snapshot'];
    case 'task-start':
      return ['task.started'];
    case 'task-input-required':
      return ['task.input_required'];
    case 'task-resume':
      // Told once per answered question: a later resume after a restart stores the same message id again, which stores nothing.
      return isReplied(event.task.input) ? ['task.resumed'] : [];
    case 'task-end':
      if (event.task.status === 'completed') return ['task.result', 'task.completed'];
      if (event.task.status === 'error') return ['task.failed'];
      return event.task.status === 'cancelled' ? ['task.cancelled'] : [];
    default:
      return [];
  }
}

/**
 * The outbox messages telling `targets` of `types` for `task`, in order: one per target and type the format
 * has a body for, each body passed through `redact`, its id a hash of task, target and type (storing it twice
 * stores one).
 */
export function pushMessages(
  task: TaskRecord,
  targets: readonly PushTarget[],
  types: readonly PushEventType[],
  format: PushFormat,
  redact: Redactor,
): WebhookMessage[] {
  const now = Date.now();
  const messages: WebhookMessage[] = [];
  for (const type of types) {
    const body = format.body(type, task);
    if (body === undefined) continue;
    const payload = JSON.stringify(redact.value(body));
    for (const target of targets) {
      const endpoint = pushEndpoint(target);
      messages.push(newWebhookMessage(task.id, endpoint, type, payload, now, REPEATED_PUSH_EVENTS.includes(type) ? task.input?.askedAt : undefined));
    }
  }
  return messages;
}

/**
 * The ids of the messages that go to `message`'s push target before it (whether or not they were ever stored). A
 * question's messages (`task.input_required`, `task.resumed`) are not among them: their ids name the question, which
 * a later message does not know. They are ordered with the others when claimed together, and by when they happen:
 * a question comes after the start, its resume after the caller's answer, the end after the last resume.
 */
export function earlierPushMessages(message: Pick<WebhookMessage, 'taskId' | 'endpoint' | 'type'>): string[] {
  const rank = pushRank(message.type as PushEventType);
  return PUSH_EVENTS.filter((type) => pushRank(type) < rank && !REPEATED_PUSH_EVENTS.includes(type)).map((type) =>
    webhookMessageId(message.taskId, message.endpoint, type),
  );
}

/**
 * Where an attempt of a push message goes now: its target as the task record holds it, admitted by the
 * allow-list again (the operator may have narrowed it since). A reason instead when the target was deleted,
 * the task is no longer kept, or the URL is refused.
 */
export async function pushAttemptTarget(
  store: TaskStore,
  message: WebhookMessage,
  options: ResolvedPushOptions,
): Promise<AttemptTarget | { readonly refused: string }> {
  const task = await store.get(message.taskId);
  const target = task?.push?.find((candidate) => pushEndpoint(candidate) === message.endpoint);
  if (target === undefined)
    return { refused: `the push config ${message.endpoint.slice(PUSH_ENDPOINT_PREFIX.length)} was deleted, or its task is no longer kept` };
  const verdict = await options.allow.check(target.url);
  if (!verdict.allowed) return { refused: verdict.reason };
  return {
    url: verdict.url,
    timeoutMs: options.timeoutMs,
    contentType: options.format.contentType,
    ...(options.secret === undefined ? {} : { secret: options.secret }),
    headers: pushHeaders(target),
    ...(verdict.publicOnly && options.allow.dispatcher !== undefined ? { dispatcher: options.allow.dispatcher } : {}),
  };
}

/** A push target's credentials as headers: `Authorization: <scheme> <credentials>`, and its token as A2A's `X-A2A-Notification-Token`. */
export function pushHeaders(target: PushTarget): Record<string, string> {
  return {
    ...(target.token === undefined || target.token === '' ? {} : { 'x-a2a-notification-token': target.token }),
    ...(target.authentication === undefined ? {} : { authorization: `${target.authentication.scheme} ${target.authentication.credentials}`.trim() }),
  };
}
