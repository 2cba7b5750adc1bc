import { createRedactor } from '../redact.ts';
import type { TaskLogData } from '../tasks/store/log-entry.ts';
import type { TaskEvent } from '../tasks/store/task-types.ts';
import type { TaskRecord, TaskStore } from '../tasks/store/task-types.ts';
import { earlierPushMessages, isPushMessage, pushAttemptTarget, pushEventsOf, pushMessages, type ResolvedPushOptions } from './push-delivery.ts';
import type { PushTarget } from './push-types.ts';
import { retryDelay, type RetryDelays } from './retry-delay.ts';
import { sendWebhook, type AttemptOutcome, type AttemptTarget } from './send-webhook.ts';
import { endpointsFor, resolveWebhookEndpoints } from './webhook-endpoints.ts';
import { newWebhookMessage, webhookEventOf, webhookPayload } from './webhook-payload.ts';
import type { ClaimedWebhookMessage, WebhookEndpoint, WebhookMessage } from './webhook-types.ts';
import { WEBHOOK_DEFAULTS } from '../defaults.ts';

/** Options of {@link createWebhookDispatcher}. */
export interface WebhookDispatcherOptions {
  /** Where the outbox is, beside the tasks (the same store as theirs). Not closed by the dispatcher. */
  readonly store: TaskStore;
  /** The endpoints, by name. */
  readonly endpoints: Readonly<Record<string, WebhookEndpoint>>;
  /** Strings never to show in a payload or a log entry (API keys, tokens); the endpoints' secrets are added. @default [] */
  readonly secrets?: readonly string[];
  /** How often the outbox is looked at for messages due (another process's, or those a stopped one left). @default 1_000 */
  readonly pollMs?: number;
  /** Attempts under way at once at most, over all endpoints. @default 16 */
  readonly maxInFlight?: number;
  /** On close, how long attempts under way may finish before they are cut short (and sent again later). @default 2_000 */
  readonly closeGraceMs?: number;
  /** The jitter's source, in [0, 1). @default Math.random */
  readonly random?: () => number;
  /**
   * Push notifications to the targets callers keep on their tasks (`TaskRecord.push`), resolved once by whoever
   * also serves the targets (`resolvePushOptions`). @default none: push targets are not told
   */
  readonly push?: ResolvedPushOptions;
}

/** Delivers task events to webhook endpoints, at least once, from the task store's outbox. */
export interface WebhookDispatcher extends AsyncDisposable {
  /**
   * Stores the messages a task event makes — one per endpoint that takes it (the one the task's start
   * named, and those with `all`) — and delivers them. Resolves once they are stored; never rejects (a store
   * that cannot take them is noted in the task's log).
   */
  enqueue(event: TaskEvent): Promise<void>;
  /**
   * Stores the message telling a push target just added to `task` (the record as stored with it) of the task
   * as it stands, and delivers it: the target's first message, which its later ones follow. Resolves once it
   * is stored; never rejects.
   */
  enqueueSnapshot(task: TaskRecord, target: PushTarget): Promise<void>;
  /** Stops: stores what `enqueue` was given, claims nothing more, lets attempts under way end within `closeGraceMs`, then cuts the rest short. Idempotent. */
  close(): Promise<void>;
}

/** How a message's attempts are spaced, and for how long they go on. */
type RetryPolicy = RetryDelays & { readonly retryForMs: number };

/**
 * The claimed messages with each push target's in its order (by kind), each in the place of the target's
 * first: a batch may hold two of one target that were due at once.
 */
function inTargetOrder(claimed: readonly ClaimedWebhookMessage[]): ClaimedWebhookMessage[] {
  const groups = new Map<string, ClaimedWebhookMessage[]>();
  for (const message of claimed) {
    const key = isPushMessage(message) ? `${message.taskId}\u0000${message.endpoint}` : message.id;
    groups.set(key, [...(groups.get(key) ?? []), message]);
  }
  return [...groups.values()].flatMap((group) =>
    group.length === 1 ? group : group.toSorted((a, b) => earlierPushMessages(a).length - earlierPushMessages(b).length),
  );
}

/** Room the lease leaves beyond an attempt's own time limit, for its outcome to be stored. */
const LEASE_MARGIN_MS = 5_000;

/**
 * Creates the dispatcher of a task store's webhook outbox. Every process sharing the store may run one:
 * each message is claimed by one of them at a time, under a lease the store keeps, and a message whose
 * attempt never settled (its process died) is due again when the lease ends. Each attempt's outcome is a
 * `webhook-delivery` entry in the task's log (`endpoint`, `event`, `attempt`, `outcome`: `delivered` |
 * `retrying` | `gave_up`, the receiver's `status` or the `error`, `nextAttemptAt`, `webhookId`). A failed
 * attempt is retried after an exponential delay with jitter until the endpoint's `retryForMs` from the
 * event has passed; nothing about it ever reaches the task's status.
 *
 * With `push`, a task's push targets are told of its transitions through the same outbox (endpoint
 * `push:<id>`): each message is attempted only once those before it to the same target are gone from the
 * outbox (delivered or given up), so a target hears of them in order, also across retries and processes;
 * before each attempt the target is read from the task record (a deleted one is told nothing more) and its
 * URL checked against the allow-list again.
 *
 * @throws {KlymError} `CONFIG_INVALID` naming an endpoint option that is not usable.
 */
export function createWebhookDispatcher(options: WebhookDispatcherOptions): WebhookDispatcher {
  const { store } = options;
  const endpoints = resolveWebhookEndpoints(options.endpoints);
  const secrets = [...endpoints.values()].flatMap((endpoint) => [endpoint.secret, endpoint.secret.slice('whsec_'.length)]);
  const redactor = createRedactor([...(options.secrets ?? []), ...secrets]);
  // An error may quote the URL, whose query can carry a token: the endpoint is named instead.
  const redact = (text: string, pushUrl?: { readonly url: string; readonly endpoint: string }): string => {
    let scrubbed = text;
    for (const endpoint of endpoints.values()) scrubbed = scrubbed.split(endpoint.url).join(`<${endpoint.name}>`);
    if (pushUrl !== undefined) scrubbed = scrubbed.split(pushUrl.url).join(`<${pushUrl.endpoint}>`);
    return redactor.text(scrubbed);
  };
  const { push } = options;
  const pollMs = options.pollMs ?? WEBHOOK_DEFAULTS.pollMs;
  const maxInFlight = options.maxInFlight ?? WEBHOOK_DEFAULTS.maxInFlight;
  const closeGraceMs = options.closeGraceMs ?? WEBHOOK_DEFAULTS.closeGraceMs;
  const random = options.random ?? Math.random;
  // A push message may first wait, in this process, for the attempt of the one before it to the same target.
  const leaseMs = Math.max(0, ...[...endpoints.values()].map((endpoint) => endpoint.timeoutMs), 2 * (push?.timeoutMs ?? 0)) + LEASE_MARGIN_MS;
  const stopping = new AbortController();
  const enqueuing = new Set<Promise<void>>();
  const inFlight = new Set<Promise<void>>();
  // Push attempts under way here, by task and target: a target's next message waits for the one before.
  const pushChains = new Map<string, Promise<void>>();
  let closing: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let wakeAt = Number.POSITIVE_INFINITY;
  let polling: Promise<void> | undefined;
  let pollAgain = false;

  // The id last: a status glance shows an entry's first ~100 characters, and the outcome matters more there.
  const log = (message: WebhookMessage, attempt: number, data: Omit<TaskLogData<'webhook-delivery'>, 'endpoint' | 'event' | 'attempt' | 'webhookId'>): void =>
    store.appendLog(message.taskId, 'webhook-delivery', { endpoint: message.endpoint, event: message.type, attempt, ...data, webhookId: message.id });

  /** Looks at the outbox at `at` at the latest (now, when no time is given). */
  const wake = (at = Date.now()): void => {
    if (closing !== undefined || at >= wakeAt) return;
    clearTimeout(timer);
    wakeAt = at;
    timer = setTimeout(() => void poll(), Math.max(0, at - Date.now()));
    timer.unref();
  };

  const poll = (): Promise<void> => {
    wakeAt = Number.POSITIVE_INFINITY;
    if (polling !== undefined) {
      pollAgain = true;
      return polling;
    }
    polling = (async () => {
      do {
        pollAgain = false;
        const room = maxInFlight - inFlight.size;
        if (closing !== undefined || room <= 0) break;
        // A store that cannot be reached now is asked again at the next poll.
        const claimed = await store.claimWebhookMessages(Date.now(), leaseMs, room).catch((): readonly ClaimedWebhookMessage[] => []);
        for (const message of inTargetOrder(claimed)) {
          const attempt = (isPushMessage(message) ? chained(message) : deliver(message)).catch(() => {});
          inFlight.add(attempt);
          void attempt.finally(() => {
            inFlight.delete(attempt);
            // Room again: messages beyond `maxInFlight` may be waiting.
            if (claimed.length === room) wake();
          });
        }
      } while (pollAgain);
    })().finally(() => {
      polling = undefined;
      // A wake that came as the loop ended is not lost.
      wake(pollAgain ? Date.now() : Date.now() + pollMs);
    });
    return polling;
  };

  /** Attempts a webhook endpoint's message. */
  const deliver = async (message: ClaimedWebhookMessage): Promise<void> => {
    const endpoint = endpoints.get(message.endpoint);
    if (endpoint === undefined) return giveUp(message, `no webhook endpoint "${message.endpoint}" is configured any more`);
    await attemptTo(message, endpoint, endpoint);
  };

  /** Attempts a push target's message after the one before it to the same target, when this process attempts that one too. */
  const chained = (message: ClaimedWebhookMessage): Promise<void> => {
    const key = `${message.taskId}\u0000${message.endpoint}`;
    // After the one before, whatever came of it: its failure is its own.
    const next = (pushChains.get(key) ?? Promise.resolve()).catch(() => {}).then(() => deliverPush(message));
    pushChains.set(key, next);
    void next.finally(() => pushChains.get(key) === next && pushChains.delete(key)).catch(() => {});
    return next;
  };

  /** Attempts a push target's message once those before it are gone, to the target as the task record holds it now. */
  const deliverPush = async (message: ClaimedWebhookMessage): Promise<void> => {
    if (push === undefined) return giveUp(message, 'push notifications are not configured here any more');
    const now = Date.now();
    const earlier = await store.dueOfWebhookMessages(earlierPushMessages(message));
    // An earlier message still waits (for its retry, or in another process's attempt), or waiting took the lease's room: due again at most `pollMs` from now.
    if (earlier.size > 0 || now + push.timeoutMs > message.leaseUntil) {
      const due = Math.max(now, Math.min(now + pollMs, ...earlier.values()));
      await store.settleWebhookMessage(message, { attempts: message.attempts, nextAttemptAt: due });
      wake(due);
      return;
    }
    const target = await pushAttemptTarget(store, message, push);
    if ('refused' in target) return giveUp(message, target.refused);
    await attemptTo(message, target, push);
  };

  const giveUp = async (message: ClaimedWebhookMessage, why: string): Promise<void> => {
    await store.settleWebhookMessage(message, 'done');
    log(message, message.attempts + 1, { outcome: 'gave_up', error: why });
  };

  /** One attempt of `message` to `target`, settled and logged: done when delivered, else due again after a delay, or given up past the window. */
  const attemptTo = async (message: ClaimedWebhookMessage, target: AttemptTarget, policy: RetryPolicy): Promise<void> => {
    const attempt = message.attempts + 1;
    const outcome = await sendWebhook(target, message, stopping.signal);
    const reported =
      'error' in outcome
        ? { error: redact(outcome.error, isPushMessage(message) ? { url: target.url, endpoint: message.endpoint } : undefined) }
        : { status: outcome.status };
    if (outcome.ok) {
      await store.settleWebhookMessage(message, 'done');
      log(message, attempt, { outcome: 'delivered', ...reported });
      return;
    }
    const next = nextAttempt(policy, message, attempt, outcome);
    if (next === undefined) {
      await store.settleWebhookMessage(message, 'done');
      log(message, attempt, { outcome: 'gave_up', ...reported, retriedForMs: policy.retryForMs });
      return;
    }
    await store.settleWebhookMessage(message, { attempts: attempt, nextAttemptAt: next });
    log(message, attempt, { outcome: 'retrying', ...reported, nextAttemptAt: new Date(next).toISOString() });
    wake(next);
  };

  /** When to try again, or `undefined` when that would be past the retry window. An attempt cut short by a stop is due at once. */
  const nextAttempt = (policy: RetryPolicy, message: WebhookMessage, attempt: number, outcome: AttemptOutcome): number | undefined => {
    if (stopping.signal.aborted && 'error' in outcome) return Date.now();
    const next = Date.now() + retryDelay(attempt, policy, random);
    return next > message.createdAt + policy.retryForMs ? undefined : next;
  };

  const storeMessages = async (messages: readonly WebhookMessage[]): Promise<void> => {
    if (messages.length === 0) return;
    try {
      await store.addWebhookMessages(messages);
      wake();
    } catch (error) {
      const reason = redact(error instanceof Error ? error.message : String(error));
      for (const message of messages) log(message, 0, { outcome: 'gave_up', error: `the outbox could not store the message: ${reason}` });
    }
  };

  const enqueue = async (event: TaskEvent): Promise<void> => {
    const { task } = event;
    const type = webhookEventOf(event);
    // An event heard from another process sharing the queue was announced there, by the process where it happened.
    const receivers = type === undefined || ('elsewhere' in event && event.elsewhere === true) ? [] : endpointsFor(endpoints, type, task.request.webhook);
    const messages: WebhookMessage[] = [];
    if (type !== undefined && receivers.length > 0) {
      const payload = JSON.stringify(webhookPayload(type, task, redactor));
      const now = Date.now();
      for (const endpoint of receivers) {
        messages.push(newWebhookMessage(task.id, endpoint.name, type, payload, now, type === 'task.input_required' ? task.input?.askedAt : undefined));
      }
    }
    if (push !== undefined && task.push !== undefined && task.push.length > 0)
      messages.push(...pushMessages(task, task.push, pushEventsOf(event), push.format, redactor));
    await storeMessages(messages);
  };

  /** Runs a store of messages unless closing, and keeps it for `close()` to wait for. */
  const track = (work: () => Promise<void>): Promise<void> => {
    if (closing !== undefined) return Promise.resolve();
    const stored = work().catch(() => {});
    enqueuing.add(stored);
    void stored.finally(() => enqueuing.delete(stored));
    return stored;
  };

  wake();
  const dispatcher: WebhookDispatcher = {
    enqueue(event) {
      return track(() => enqueue(event));
    },
    enqueueSnapshot(task, target) {
      return track(() => storeMessages(push === undefined ? [] : pushMessages(task, [target], ['task.snapshot'], push.format, redactor)));
    },
    close() {
      closing ??= (async () => {
        clearTimeout(timer);
        await Promise.all(enqueuing);
        await polling;
        const grace = new Promise<void>((resolve) => setTimeout(resolve, closeGraceMs).unref());
        await Promise.race([Promise.all(inFlight), grace]);
        // Cut short, each is due again at once: the next process to look sends it again under the same id.
        stopping.abort();
        await Promise.all(inFlight);
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => dispatcher.close(),
  };
  return dispatcher;
}
