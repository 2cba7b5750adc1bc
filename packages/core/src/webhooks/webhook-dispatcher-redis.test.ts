import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startRedisServer, type RedisServer } from '../../../../test/support/redis-server.ts';
import { taskRecord } from '../../../../test/support/task-fixtures.ts';
import { startWebhookReceiver, webhookSecret } from '../../../../test/support/webhook-receiver.ts';
import { createRedisTaskStore } from '../tasks/store/redis/redis-task-store.ts';
import { createWebhookDispatcher } from './webhook-dispatcher.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.close();
});

describe('createWebhookDispatcher on one Redis, in two processes', () => {
  it('attempts each message in one process at a time, and delivers it once', async () => {
    const secret = webhookSecret();
    // A slow receiver: while one process waits for its answer, the other looks at the outbox many times.
    await using receiver = await startWebhookReceiver({ secret, answer: () => ({ status: 200, delayMs: 150 }) });
    await using one = await createRedisTaskStore({ url: redis.url, prefix: 'two-processes:' });
    await using two = await createRedisTaskStore({ url: redis.url, prefix: 'two-processes:' });
    const endpoints = { ops: { url: receiver.url, secret, all: true, retryDelayMs: 50, timeoutMs: 2_000 } };
    await using first = createWebhookDispatcher({ store: one, endpoints, pollMs: 10, closeGraceMs: 0 });
    await using second = createWebhookDispatcher({ store: two, endpoints, pollMs: 10, closeGraceMs: 0 });

    const tasks = await Promise.all(
      Array.from({ length: 20 }, (_, index) => one.insert(taskRecord(`t${index}`, { status: 'completed', finishedAt: '2026-01-01T00:00:09.000Z' }))),
    );
    // Both processes hear each end (as they would without the `elsewhere` mark): one message each all the same.
    await Promise.all(tasks.flatMap((task) => [first.enqueue({ type: 'task-end', task }), second.enqueue({ type: 'task-end', task })]));

    await vi.waitFor(() => expect(receiver.accepted.size).toBe(20), { timeout: 10_000 });
    expect(receiver.requests).toHaveLength(20);
    expect(receiver.duplicates()).toBe(0);
    expect(new Set([...receiver.accepted.values()].map((payload) => payload.data.task_id)).size).toBe(20);
    await vi.waitFor(async () => {
      const logged = await Promise.all(tasks.map(async (task) => (await two.readLog(task.id)).entries.filter((entry) => entry.type === 'webhook-delivery')));
      expect(logged.map((entries) => entries.map((entry) => entry.data.outcome))).toEqual(tasks.map(() => ['delivered']));
    });
  });
});
