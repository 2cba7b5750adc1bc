import type { PushEventType } from './push-types.ts';

/** The task events a webhook endpoint can receive (Standard Webhooks' `type`). */
export const WEBHOOK_EVENTS = ['task.started', 'task.input_required', 'task.completed', 'task.failed', 'task.cancelled'] as const;

/** One of {@link WEBHOOK_EVENTS}: `task.failed` is a task that ended as `error`. */
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

/** What an outbox message tells of: a webhook endpoint's event, or a push target's (`push-types.ts`). */
export type OutboxEventType = WebhookEventType | PushEventType;

/**
 * A configured receiver of task events. Its URL is the operator's: a caller can only name an endpoint
 * (a start's `webhook`), never give a URL, so no caller can make Klym send a request anywhere else.
 */
export interface WebhookEndpoint {
  /** Where events are POSTed: an http(s) URL. Redirects are not followed. */
  readonly url: string;
  /** The Standard Webhooks signing secret, `whsec_<base64 of 24 to 64 bytes>`. Never logged or shown. */
  readonly secret: string;
  /** The events this endpoint receives. @default ['task.input_required', 'task.completed', 'task.failed', 'task.cancelled'] */
  readonly events?: readonly WebhookEventType[];
  /**
   * Receive the events of every task, not only of those whose start named this endpoint (`webhook`).
   * @default false
   */
  readonly all?: boolean;
  /** How long a message is retried after its event, in milliseconds; then it is given up (`gave_up`). @default 86_400_000 (24 h) */
  readonly retryForMs?: number;
  /** The delay before the first retry, in milliseconds; it doubles with each attempt, with jitter. @default 5_000 */
  readonly retryDelayMs?: number;
  /** The longest delay between two attempts, in milliseconds. @default 3_600_000 (1 h) */
  readonly maxRetryDelayMs?: number;
  /** How long the receiver may take to answer one attempt, in milliseconds; a slower answer is a failed attempt. @default 10_000 */
  readonly timeoutMs?: number;
}

/**
 * A webhook message in the task store's outbox: one event for one endpoint. Its body is fixed when it is
 * stored, so every attempt sends the same bytes under the same `webhook-id`, by which a receiver
 * deduplicates: delivery is at least once.
 */
export interface WebhookMessage {
  /** The `webhook-id`: `msg_…`, the same for a task, endpoint and event whichever process stores it. */
  readonly id: string;
  readonly taskId: string;
  /** The endpoint's configured name, or `push:<id>` for a push target of the task. */
  readonly endpoint: string;
  readonly type: OutboxEventType;
  /** The JSON body: `{ type, timestamp, data }` for an endpoint, the push format's body for a push target. */
  readonly payload: string;
  /** When it was stored (ms since the epoch): its retry window starts then. */
  readonly createdAt: number;
  /** Attempts made so far whose outcome is known. */
  readonly attempts: number;
  /** When it is due (ms since the epoch). */
  readonly nextAttemptAt: number;
}

/** A message claimed from the outbox: no other claim, in any process sharing the store, gets it until `leaseUntil` or until it is settled. */
export interface ClaimedWebhookMessage extends WebhookMessage {
  /** The claim's own token: settling needs it, so a claim whose lease ran out cannot settle another's attempt. */
  readonly lease: string;
  readonly leaseUntil: number;
}

/** What becomes of a claimed message: gone (delivered, or given up), or due again. */
export type WebhookSettlement = 'done' | { readonly attempts: number; readonly nextAttemptAt: number };

/**
 * A task store's outbox of webhook messages: stored beside the tasks, so it is as durable as they are and
 * shared by every process that shares them.
 */
export interface WebhookOutbox {
  /**
   * Stores messages, each once: one whose id is already stored is left as it is. Durable once it resolves.
   */
  addWebhookMessages(messages: readonly WebhookMessage[]): Promise<void>;
  /**
   * Claims at most `limit` messages due at `now`, the earliest first, each leased until `now + leaseMs`
   * (when an attempt's outcome is not settled by then — its process died — the message is due again).
   */
  claimWebhookMessages(now: number, leaseMs: number, limit: number): Promise<readonly ClaimedWebhookMessage[]>;
  /** Settles a claim; resolves false, changing nothing, when its lease is no longer the one stored (it ran out and another claim took the message, or it is gone). */
  settleWebhookMessage(claim: ClaimedWebhookMessage, settlement: WebhookSettlement): Promise<boolean>;
  /**
   * When each of the messages `ids` still stored is due (ms since the epoch; while a claim holds one, when its
   * lease ends). An id that is not stored — delivered, given up, or never stored — is absent. What keeps a
   * push target's messages in order: one goes only once those before it are gone.
   */
  dueOfWebhookMessages(ids: readonly string[]): Promise<ReadonlyMap<string, number>>;
}
