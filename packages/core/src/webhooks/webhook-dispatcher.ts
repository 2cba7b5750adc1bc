import { createRedactor } from '../redact.ts';
import type { TaskLogData } from '../tasks/log-entry.ts';
import type { TaskEvent } from '../tasks/task-manager.ts';
import type { TaskStore } from '../tasks/task-types.ts';
import { retryDelay } from './retry-delay.ts';
import { sendWebhook, type AttemptOutcome } from './send-webhook.ts';
import { endpointsFor, resolveWebhookEndpoints, type ResolvedWebhookEndpoint } from './webhook-endpoints.ts';
import { webhookEventOf, webhookMessageId, webhookPayload } from './webhook-payload.ts';
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
}

/** Delivers task events to webhook endpoints, at least once, from the task store's outbox. */
export interface WebhookDispatcher extends AsyncDisposable {
  /**
   * Stores the messages a task event makes — one per endpoint that takes it (the one the task's start
   * named, and those with `all`) — and delivers them. Resolves once they are stored; never rejects (a store
   * that cannot take them is noted in the task's log).
   */
  enqueue(event: TaskEvent): Promise<void>;
  /** Stops: stores what `enqueue` was given, claims nothing more, lets attempts under way end within `closeGraceMs`, then cuts the rest short. Idempotent. */
  close(): Promise<void>;
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
 * @throws {KlymError} `CONFIG_INVALID` naming an endpoint option that is not usable.
 */
export function createWebhookDispatcher(options: WebhookDispatcherOptions): WebhookDispatcher {
  const { store } = options;
  const endpoints = resolveWebhookEndpoints(options.endpoints);
  const secrets = [...endpoints.values()].flatMap((endpoint) => [endpoint.secret, endpoint.secret.slice('whsec_'.length)]);
  const redactor = createRedactor([...(options.secrets ?? []), ...secrets]);
  // An error may quote the URL, whose query can carry a token: the endpoint is named instead.
  const redact = (text: string): string => {
    let scrubbed = text;
    for (const endpoint of endpoints.values()) scrubbed = scrubbed.split(endpoint.url).join(`<${endpoint.name}>`);
    return redactor.text(scrubbed);
  };
  const pollMs = options.pollMs ?? WEBHOOK_DEFAULTS.pollMs;
  const maxInFlight = options.maxInFlight ?? WEBHOOK_DEFAULTS.maxInFlight;
  const closeGraceMs = options.closeGraceMs ?? WEBHOOK_DEFAULTS.closeGraceMs;
  const random = options.random ?? Math.random;
  const leaseMs = Math.max(0, ...[...endpoints.values()].map((endpoint) => endpoint.timeoutMs)) + LEASE_MARGIN_MS;
  const stopping = new AbortController();
  const enqueuing = new Set<Promise<void>>();
  const inFlight = new Set<Promise<void>>();
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
        for (const message of claimed) {
          const attempt = deliver(message).catch(() => {});
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

  const deliver = async (message: ClaimedWebhookMessage): Promise<void> => {
    const attempt = message.attempts + 1;
    const endpoint = endpoints.get(message.endpoint);
    if (endpoint === undefined) {
      await store.settleWebhookMessage(message, 'done');
      log(message, attempt, { outcome: 'gave_up', error: `no webhook endpoint "${message.endpoint}" is configured any more` });
      return;
    }
    const outcome = await sendWebhook(endpoint, message, stopping.signal);
    const reported = 'error' in outcome ? { error: redact(outcome.error) } : { status: outcome.status };
    if (outcome.ok) {
      await store.settleWebhookMessage(message, 'done');
      log(message, attempt, { outcome: 'delivered', ...reported });
      return;
    }
    const next = nextAttempt(endpoint, message, attempt, outcome);
    if (next === undefined) {
      await store.settleWebhookMessage(message, 'done');
      log(message, attempt, { outcome: 'gave_up', ...reported, retriedForMs: endpoint.retryForMs });
      return;
    }
    await store.settleWebhookMessage(message, { attempts: attempt, nextAttemptAt: next });
    log(message, attempt, { outcome: 'retrying', ...reported, nextAttemptAt: new Date(next).toISOString() });
    wake(next);
  };

  /** When to try again, or `undefined` when that would be past the endpoint's retry window. An attempt cut short by a stop is due at once. */
  const nextAttempt = (endpoint: ResolvedWebhookEndpoint, message: WebhookMessage, attempt: number, outcome: AttemptOutcome): number | undefined => {
    if (stopping.signal.aborted && 'error' in outcome) return Date.now();
    const next = Date.now() + retryDelay(attempt, endpoint, random);
    return next > message.createdAt + endpoint.retryForMs ? undefined : next;
  };

  const enqueue = async (event: TaskEvent): Promise<void> => {
    const type = webhookEventOf(event);
    // An event heard from another process sharing the queue was announced there, by the process where it happened.
    if (type === undefined || ('elsewhere' in event && event.elsewhere === true)) return;
    const { task } = event;
    const receivers = endpointsFor(endpoints, type, task.request.webhook);
    if (receivers.length === 0) return;
    const payload = JSON.stringify(webhookPayload(type, task, redactor));
    const now = Date.now();
    const messages = receivers.map(
      (endpoint): WebhookMessage => ({ id: webhookMessageId(task.id, endpoint.name, type), taskId: task.id, endpoint: endpoint.name, type, payload, createdAt: now, attempts: 0, nextAttemptAt: now }),
    );
    try {
      await store.addWebhookMessages(messages);
      wake();
    } catch (error) {
      const reason = redact(error instanceof Error ? error.message : String(error));
      for (const message of messages) log(message, 0, { outcome: 'gave_up', error: `the outbox could not store the message: ${reason}` });
    }
  };

  wake();
  const dispatcher: WebhookDispatcher = {
    enqueue(event) {
      if (closing !== undefined) return Promise.resolve();
      const stored = enqueue(event).catch(() => {});
      enqueuing.add(stored);
      void stored.finally(() => enqueuing.delete(stored));
      return stored;
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
