import { afterEach, describe, expect, it, vi } from 'vitest';
import { taskRecord } from '../../../../test/support/task-fixtures.ts';
import { startWebhookReceiver, webhookSecret, type ReceiverAnswer, type WebhookReceiver } from '../../../../test/support/webhook-receiver.ts';
import { createMemoryTaskStore } from '../tasks/store/memory-task-store.ts';
import type { TaskRecord, TaskStore } from '../tasks/store/task-types.ts';
import { createWebhookDispatcher, type WebhookDispatcher } from './webhook-dispatcher.ts';
import type { WebhookEndpoint } from './webhook-types.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/** Short delays, so that retries take milliseconds. */
const FAST = { retryDelayMs: 30, maxRetryDelayMs: 200, timeoutMs: 2_000 } as const;

async function receiver(
  answer?: (request: WebhookReceiver['requests'][number]) => ReceiverAnswer,
  secret = webhookSecret(),
): Promise<WebhookReceiver & { secret: string }> {
  const started = await startWebhookReceiver({ secret, ...(answer === undefined ? {} : { answer }) });
  cleanups.push(() => started.close());
  return Object.assign(started, { secret });
}

function dispatcher(store: TaskStore, endpoints: Record<string, WebhookEndpoint>, secrets: readonly string[] = []): WebhookDispatcher {
  const created = createWebhookDispatcher({ store, endpoints, secrets, pollMs: 50, closeGraceMs: 0 });
  cleanups.push(() => created.close());
  return created;
}

async function storedTask(store: TaskStore, fields: Partial<TaskRecord>): Promise<TaskRecord> {
  return store.insert(taskRecord('t1', { status: 'completed', startedAt: '2026-01-01T00:00:01.000Z', finishedAt: '2026-01-01T00:00:09.000Z', ...fields }));
}

const deliveries = async (store: TaskStore) =>
  (await store.readLog('t1', 0, 500)).entries.flatMap((entry) => (entry.type === 'webhook-delivery' ? [entry.data] : []));

/** Whether the outbox holds anything at all, due or not. */
const outboxEmpty = async (store: TaskStore): Promise<boolean> => (await store.claimWebhookMessages(Number.MAX_SAFE_INTEGER, 1, 100)).length === 0;

describe('createWebhookDispatcher', () => {
  it('delivers a task event, signed, to the endpoint its start named and to `all` endpoints; retries failures; logs every attempt', async () => {
    const store = createMemoryTaskStore();
    // Fails each message twice, then accepts it.
    const named = await receiver((request) => ({ status: request.attempt <= 2 ? 500 : 200 }));
    const everyone = await receiver();
    const other = await receiver();
    const hooks = dispatcher(store, {
      named: { url: named.url, secret: named.secret, ...FAST },
      everyone: { url: everyone.url, secret: everyone.secret, all: true, events: ['task.completed'], ...FAST },
      other: { url: other.url, secret: other.secret, ...FAST },
    });
    const task = await storedTask(store, {
      request: { prompt: 'p', webhook: 'named' },
      result: { text: 'a\n\nb', finalText: 'the answer', finishReason: 'stop', model: 'scripted', toolCalls: 0 },
    });

    await hooks.enqueue({ type: 'task-end', task });
    await vi.waitFor(() => expect([named.accepted.size, everyone.accepted.size]).toEqual([1, 1]), { timeout: 5_000 });
    expect(other.requests).toEqual([]);

    // Three attempts of one message: one id, each signature verified, the same body every time.
    expect(named.requests.map((request) => [request.attempt, request.invalid])).toEqual([
      [1, undefined],
      [2, undefined],
      [3, undefined],
    ]);
    expect(new Set(named.requests.map((request) => request.id)).size).toBe(1);
    expect(new Set(named.requests.map((request) => request.body)).size).toBe(1);
    expect(named.requests[0]?.id).toMatch(/^msg_/);
    expect(everyone.requests[0]?.id).not.toBe(named.requests[0]?.id);
    expect([...named.accepted.values()]).toEqual([
      {
        type: 'task.completed',
        timestamp: '2026-01-01T00:00:09.000Z',
        data: { task_id: 't1', status: 'completed', principal: 'alice', finish_reason: 'stop', result_preview: 'the answer' },
      },
    ]);

    await vi.waitFor(async () => expect(await deliveries(store)).toHaveLength(4));
    const log = await deliveries(store);
    const ofNamed = log.filter((entry) => entry.endpoint === 'named');
    expect(ofNamed).toEqual([
      {
        endpoint: 'named',
        event: 'task.completed',
        webhookId: named.requests[0]?.id,
        attempt: 1,
        outcome: 'retrying',
        status: 500,
        nextAttemptAt: expect.any(String),
      },
      {
        endpoint: 'named',
        event: 'task.completed',
        webhookId: named.requests[0]?.id,
        attempt: 2,
        outcome: 'retrying',
        status: 500,
        nextAttemptAt: expect.any(String),
      },
      { endpoint: 'named', event: 'task.completed', webhookId: named.requests[0]?.id, attempt: 3, outcome: 'delivered', status: 200 },
    ]);
    expect(log.filter((entry) => entry.endpoint === 'everyone')).toMatchObject([{ attempt: 1, outcome: 'delivered', status: 204 }]);
    expect(await outboxEmpty(store)).toBe(true);
  });

  it('sends a start only to endpoints that take `task.started`, and nothing for an end another process announced', async () => {
    const store = createMemoryTaskStore();
    const started = await receiver();
    const hooks = dispatcher(store, { ops: { url: started.url, secret: started.secret, events: ['task.started', 'task.failed'], ...FAST } });
    const task = await storedTask(store, { status: 'running', request: { prompt: 'p', webhook: 'ops' } });
    await hooks.enqueue({ type: 'task-start', task });
    await hooks.enqueue({ type: 'task-resume', task });
    await hooks.enqueue({ type: 'task-end', task: { ...task, status: 'completed' } });
    const failed = { ...task, status: 'error' as const, error: { code: 'MODEL_ERROR' as const, message: 'the model failed' } };
    await hooks.enqueue({ type: 'task-end', task: failed, elsewhere: true });
    await vi.waitFor(() => expect(started.accepted.size).toBe(1));
    expect([...started.accepted.values()]).toMatchObject([
      { type: 'task.started', timestamp: '2026-01-01T00:00:01.000Z', data: { task_id: 't1', status: 'running' } },
    ]);
    await hooks.enqueue({ type: 'task-end', task: failed });
    await vi.waitFor(() => expect(started.accepted.size).toBe(2));
    expect([...started.accepted.values()][1]).toMatchObject({
      type: 'task.failed',
      data: { status: 'error', error: { code: 'MODEL_ERROR', message: 'the model failed' } },
    });
  });

  it('cuts a slow receiver off at the endpoint timeout, and tries again', async () => {
    const store = createMemoryTaskStore();
    const slow = await receiver((request) => (request.attempt === 1 ? { status: 200, delayMs: 5_000 } : { status: 200 }));
    const hooks = dispatcher(store, { slow: { url: slow.url, secret: slow.secret, ...FAST, timeoutMs: 100 } });
    const task = await storedTask(store, { request: { prompt: 'p', webhook: 'slow' } });
    await hooks.enqueue({ type: 'task-end', task });
    await vi.waitFor(async () => expect((await deliveries(store)).map((entry) => entry.outcome)).toEqual(['retrying', 'delivered']), { timeout: 5_000 });
    expect((await deliveries(store))[0]).toMatchObject({ attempt: 1, error: 'no answer within 100 ms', nextAttemptAt: expect.any(String) });
    // The first attempt's late answer never counted: the second was accepted.
    expect(slow.requests.map((request) => request.attempt)).toEqual([1, 2]);
  });

  it('gives up when the retry window has passed, and keeps nothing in the outbox', async () => {
    const store = createMemoryTaskStore();
    const down = await receiver(() => ({ status: 503 }));
    const hooks = dispatcher(store, { down: { url: down.url, secret: down.secret, ...FAST, retryForMs: 150 } });
    await hooks.enqueue({ type: 'task-end', task: await storedTask(store, { request: { prompt: 'p', webhook: 'down' } }) });
    await vi.waitFor(async () => expect((await deliveries(store)).at(-1)).toMatchObject({ outcome: 'gave_up', status: 503, retriedForMs: 150 }), {
      timeout: 5_000,
    });
    const log = await deliveries(store);
    expect(log.slice(0, -1).every((entry) => entry.outcome === 'retrying')).toBe(true);
    expect(log.map((entry) => entry.attempt)).toEqual(log.map((_, index) => index + 1));
    expect(down.requests).toHaveLength(log.length);
    expect(await outboxEmpty(store)).toBe(true);
  });

  it('says why a receiver could not be reached, never naming its URL or secret, and keeps secrets out of the payload', async () => {
    const store = createMemoryTaskStore();
    const gone = await receiver();
    await gone.close();
    const secret = webhookSecret();
    const url = `${gone.url}?token=query-token-of-the-receiver`;
    const hooks = dispatcher(store, { gone: { url, secret, ...FAST, retryForMs: 60_000 } }, ['sk-provider-key-0123456789abcdef']);
    const task = await storedTask(store, {
      request: { prompt: 'p', webhook: 'gone' },
      result: { text: 'x', finalText: `key sk-provider-key-0123456789abcdef and ${secret}`, finishReason: 'stop', model: 'scripted', toolCalls: 0 },
    });
    await hooks.enqueue({ type: 'task-end', task });
    await vi.waitFor(async () => expect((await deliveries(store))[0]).toMatchObject({ outcome: 'retrying', error: expect.stringMatching(/ECONNREFUSED/) }), {
      timeout: 5_000,
    });
    const [message] = await store.claimWebhookMessages(Number.MAX_SAFE_INTEGER, 60_000, 1);
    expect(message?.payload).toContain('[redacted]');
    const everything = JSON.stringify([await store.readLog('t1', 0, 500), message?.payload]);
    for (const secretText of [secret, secret.slice('whsec_'.length), 'sk-provider-key-0123456789abcdef', 'query-token-of-the-receiver', url])
      expect(everything).not.toContain(secretText);
  });

  it('refuses an endpoint whose secret is not a Standard Webhooks secret, without showing it', () => {
    const store = createMemoryTaskStore();
    const bad = 'not-a-whsec-secret-at-all';
    expect(() => createWebhookDispatcher({ store, endpoints: { ops: { url: 'http://127.0.0.1:1/', secret: bad } } })).toThrow(
      expect.objectContaining({
        code: 'CONFIG_INVALID',
        message: expect.stringMatching(/^Expected `webhooks\.ops\.secret` to be a Standard Webhooks secret(?!.*not-a-whsec)/),
      }),
    );
    // Node's base64 decoder would take it; the signing library's would not.
    expect(() => createWebhookDispatcher({ store, endpoints: { ops: { url: 'http://x/', secret: `${webhookSecret()}A` } } })).toThrow(/`webhooks.ops.secret`/);
    expect(() => createWebhookDispatcher({ store, endpoints: { ops: { url: 'ftp://example.com/', secret: webhookSecret() } } })).toThrow(/`webhooks.ops.url`/);
    expect(() =>
      createWebhookDispatcher({ store, endpoints: { ops: { url: 'http://x/', secret: webhookSecret(), events: ['task.done' as 'task.started'] } } }),
    ).toThrow(/`webhooks.ops.events`/);
  });
});
