import type { TaskRecord } from '../tasks/store/task-types.ts';

/**
 * A receiver a caller gave for one of its own tasks (A2A's push notification config): kept on the task
 * record, beside the `webhook` its request may name, so every process sharing the store delivers to it.
 * Unlike a webhook endpoint its URL is the caller's, which is why it must pass the operator's allow-list
 * ({@link PushOptions.allow}) when it is given and again before each attempt. It holds the caller's
 * credentials: no view, log or error shows it.
 */
export interface PushTarget {
  /** Unique among the task's targets. */
  readonly id: string;
  /** Where notifications are POSTed: an http(s) URL the allow-list admitted. Redirects are not followed. */
  readonly url: string;
  /** The caller's token for this task, sent as `X-A2A-Notification-Token`. Secret. */
  readonly token?: string;
  /** Sent as `Authorization: <scheme> <credentials>` on each request. Secret. */
  readonly authentication?: { readonly scheme: string; readonly credentials: string };
}

/**
 * What a push target is told, in this order: the task as it stands when the target is stored (`task.snapshot`: at
 * the task's creation for a target given with it), its start, each question it asks its caller
 * (`task.input_required`) and its going on after each answer (`task.resumed`), its result (a completed task with an
 * answer), and its end. Each kind once per target, but the two of a question once per question.
 */
export const PUSH_EVENTS = [
  'task.snapshot',
  'task.started',
  'task.input_required',
  'task.resumed',
  'task.result',
  'task.completed',
  'task.failed',
  'task.cancelled',
] as const;

/** One of {@link PUSH_EVENTS}. */
export type PushEventType = (typeof PUSH_EVENTS)[number];

/** The push events a task may have more than once (one per question), their messages told apart by the question's `askedAt`. */
export const REPEATED_PUSH_EVENTS: readonly PushEventType[] = ['task.input_required', 'task.resumed'];

/** The order of a push event among a target's messages: a message goes only after those of lower rank (the ends share one). */
export const pushRank = (type: PushEventType): number => Math.min(PUSH_EVENTS.indexOf(type), 5);

/** How a protocol writes the bodies of its push notifications (A2A: a `StreamResponse`, `a2aPushFormat`). */
export interface PushFormat {
  /** The `content-type` of every body. */
  readonly contentType: string;
  /** The body (a JSON value) telling a target of `type` for `task`; `undefined` when there is nothing to tell. */
  body(type: PushEventType, task: TaskRecord): unknown;
}

/**
 * Push notifications: receivers callers give for their own tasks ({@link PushTarget}), told of each
 * transition through the same outbox, retries, delivery log and (with `secret`) signatures as webhook
 * endpoints.
 */
export interface PushOptions {
  /** The operator's allow-list of push URLs (`*`, origins, URL prefixes: see `createPushAllowList`). Empty admits nothing. */
  readonly allow: readonly string[];
  /** What the bodies are. */
  readonly format: PushFormat;
  /** A Standard Webhooks secret (`whsec_…`) to sign each request with, for receivers who hold it. @default unsigned */
  readonly secret?: string;
  /** How long a message is retried after its event, in milliseconds. @default 86_400_000 (24 h) */
  readonly retryForMs?: number;
  /** The delay before the first retry, in milliseconds; it doubles with each attempt, with jitter. @default 5_000 */
  readonly retryDelayMs?: number;
  /** The longest delay between two attempts, in milliseconds. @default 3_600_000 (1 h) */
  readonly maxRetryDelayMs?: number;
  /** How long a receiver may take to answer one attempt, in milliseconds. @default 10_000 */
  readonly timeoutMs?: number;
  /** Push targets one task may have at most. @default 10 */
  readonly maxPerTask?: number;
}

/** The outbox endpoint of a task's push target: `push:<id>` (a webhook endpoint's name never has a `:`). */
export const PUSH_ENDPOINT_PREFIX = 'push:';
