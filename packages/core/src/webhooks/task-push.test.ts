import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startPushReceiver, type PushReceiver } from '../../../../test/support/push-receiver.ts';
import { startRedisServer, type RedisServer } from '../../../../test/support/redis-server.ts';
import { taskRecord } from '../../../../test/support/task-fixtures.ts';
import { createSessionPool } from '../pool/session-pool.ts';
import { createMemoryTaskStore } from '../tasks/store/memory-task-store.ts';
import { createRedisTaskStore } from '../tasks/store/redis/redis-task-store.ts';
import { createSqliteTaskStore } from '../tasks/store/sqlite/sqlite-task-store.ts';
import type { AgentRunner } from '../tasks/task-manager-types.ts';
import { createTaskService, type TaskService, type TaskServiceOptions } from '../tasks/task-service.ts';
import type { TaskStore } from '../tasks/store/task-types.ts';
import { runResult } from '../testing/run-result.ts';
import type { PushFormat, PushOptions } from './push-types.ts';
import { createWebhookDispatcher } from './webhook-dispatcher.ts';
import { resolvePushOptions } from './push-delivery.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});
let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.close();
});

/** A body that says which event of which status it tells of; a result only when there is an answer. */
const format: PushFormat = {
  contentType: 'application/test+json',
  body: (type, task) => (type === 'task.result' && task.result === undefined ? undefined : { type, status: task.status }),
};
const CREDENTIALS = 'push-credentials-of-the-caller-0123456789';
const TOKEN = 'push-token-of-the-caller-0123456789';
/** Short delays, so that a retry takes milliseconds. */
const FAST = { retryDelayMs: 20, maxRetryDelayMs: 50, timeoutMs: 2_000 } as const;

async function receiver(answer?: Parameters<typeof startPushReceiver>[0]): Promise<PushReceiver> {
  const started = await startPushReceiver(answer);
  cleanups.push(() => started.close());
  return started;
}

/** A run that answers once `release` is called. */
function gated(): { run: AgentRunner; release: () => void } {
  const gate = Promise.withResolvers<void>();
  return { run: async () => (await gate.promise, runResult('All done.')), release: () => gate.resolve() };
}

async function service(options: Partial<TaskServiceOptions> & { push: PushOptions }): Promise<TaskService & { push: NonNullable<TaskService['push']> }> {
  const pool = await createSessionPool({ upstreams: {} });
  cleanups.push(() => pool.close());
  const created = createTaskService({ pool, shutdownGraceMs: 0, run: async () => runResult('All done.'), ...options });
  cleanups.push(() => created.close());
  if (created.push === undefined) throw new Error('the service has no push');
  return created as TaskService & { push: NonNullable<TaskService['push']> };
}

const typesOf = (requests: readonly { json: unknown }[]) => requests.map((request) => (request.json as { type: string; status: string }).type);

describe('TaskService push targets', () => {
  it('tells a target given with the start of each transition in order, with its credentials, after a failed first attempt too', async () => {
    const hooks = await receiver((request, index) => (index === 0 ? 500 : 200));
    const { run, release } = gated();
    const klym = await service({ run, push: { allow: [`${hooks.origin}/hooks`], format, ...FAST } });
    const target = await klym.push.admit({ url: `${hooks.origin}/hooks/a2a`, token: TOKEN, authentication: { scheme: 'Bearer', credentials: CREDENTIALS } });
    const { task_id } = await klym.start({ prompt: 'p' }, 'grynya', { push: [target] });
    await vi.waitFor(() => expect(hooks.requests.length).toBeGreaterThanOrEqual(3), { timeout: 5_000 });
    release();
    await vi.waitFor(() => expect(hooks.requests).toHaveLength(5), { timeout: 5_000 });

    // The first attempt failed; the target still heard of everything, each once delivered, in order.
    expect(typesOf(hooks.requests)).toEqual(['task.snapshot', 'task.snapshot', 'task.started', 'task.result', 'task.completed']);
    expect(hooks.requests.map((request) => (request.json as { status: string }).status)).toEqual(['pending', 'pending', 'running', 'completed', 'completed']);
    expect(hooks.requests[0]?.headers['webhook-id']).toBe(hooks.requests[1]?.headers['webhook-id']);
    for (const request of hooks.requests) {
      expect(request.headers).toMatchObject({
        authorization: `Bearer ${CREDENTIALS}`,
        'x-a2a-notification-token': TOKEN,
        'content-type': 'application/test+json',
      });
      expect(request.headers).not.toHaveProperty('webhook-signature');
    }
    await vi.waitFor(async () => expect((await klym.logs({ task_id }, 'grynya')).entries.filter((entry) => entry.type === 'webhook-delivery')).toHaveLength(5));
    const log = await klym.logs({ task_id }, 'grynya');
    expect(log.entries.filter((entry) => entry.type === 'webhook-delivery').map((entry) => [entry.event, entry.outcome])).toEqual([
      ['task.snapshot', 'retrying'],
      ['task.snapshot', 'delivered'],
      ['task.started', 'delivered'],
      ['task.result', 'delivered'],
      ['task.completed', 'delivered'],
    ]);
    // The caller's credentials reach its receiver and nothing else: no log, view or list shows them.
    const seen = JSON.stringify([log, await klym.status({ task_id, full_result: true }, 'grynya'), await klym.list({}, 'grynya')]);
    for (const secret of [CREDENTIALS, TOKEN]) expect(seen).not.toContain(secret);
  });

  it('tells a target added later the task as it stands, then what follows; a deleted one hears nothing more', async () => {
    const hooks = await receiver();
    const { run, release } = gated();
    const klym = await service({ run, push: { allow: [hooks.origin], format, ...FAST, maxPerTask: 2 } });
    const { task_id } = await klym.start({ prompt: 'p' }, 'grynya');
    await vi.waitFor(async () => expect((await klym.status({ task_id }, 'grynya')).status).toBe('running'));

    const kept = await klym.push.set(task_id, { principal: 'grynya' }, { id: 'kept', url: `${hooks.origin}/kept` });
    const dropped = await klym.push.set(task_id, { principal: 'grynya' }, { url: `${hooks.origin}/dropped` });
    expect(kept).toEqual({ id: 'kept', url: `${hooks.origin}/kept` });
    expect(dropped.id).toMatch(/^[0-9a-f-]{36}$/);
    expect((await klym.push.list(task_id, { principal: 'grynya' })).map((target) => target.id)).toEqual(['kept', dropped.id]);
    await vi.waitFor(() => expect([hooks.to('/kept').length, hooks.to('/dropped').length]).toEqual([1, 1]), { timeout: 5_000 });
    expect(hooks.to('/kept')[0]?.json).toEqual({ type: 'task.snapshot', status: 'running' });

    await klym.push.delete(task_id, { principal: 'grynya' }, dropped.id);
    await klym.push.delete(task_id, { principal: 'grynya' }, dropped.id); // idempotent
    release();
    await vi.waitFor(() => expect(typesOf(hooks.to('/kept'))).toEqual(['task.snapshot', 'task.result', 'task.completed']), { timeout: 5_000 });
    expect(typesOf(hooks.to('/dropped'))).toEqual(['task.snapshot']);

    // On a finished task, a new target hears its end at once.
    await klym.push.set(task_id, { principal: 'grynya' }, { id: 'late', url: `${hooks.origin}/late` });
    await vi.waitFor(() => expect(hooks.to('/late').map((request) => request.json)).toEqual([{ type: 'task.snapshot', status: 'completed' }]), {
      timeout: 5_000,
    });

    // Refusals: another principal's task, a URL outside the list, one target too many.
    await expect(klym.push.set(task_id, { principal: 'other' }, { url: `${hooks.origin}/x` })).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await expect(klym.push.list(task_id, { principal: 'other' })).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await expect(klym.push.set(task_id, { principal: 'grynya' }, { url: 'http://127.0.0.1:1/x' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('matches no entry'),
    });
    await expect(klym.push.set(task_id, { principal: 'grynya' }, { url: `${hooks.origin}/third` })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('delete one first'),
    });
    await expect(klym.push.admit({ url: `${hooks.origin}/x`, authentication: { scheme: 'Bearer', credentials: 'a\r\nX-Injected: 1' } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });
});

/** A new store of each kind, closed by the test's cleanups. */
const stores: Record<string, () => Promise<TaskStore>> = {
  memory: async () => createMemoryTaskStore(),
  sqlite: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'klym-push-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    return createSqliteTaskStore({ path: join(dir, 'tasks.db') });
  },
  redis: () => createRedisTaskStore({ url: redis.url, prefix: `push-due-${crypto.randomUUID()}:` }),
};

describe('push configs changed concurrently, on each store', () => {
  for (const [kind, open] of Object.entries(stores)) {
    it(`${kind}: keeps all of 20 configs created at once on one task, and applies all of 10 deletes at once`, async () => {
      const hooks = await receiver();
      const store = await open();
      cleanups.push(() => store.close());
      const klym = await service({ store, push: { allow: [hooks.origin], format, ...FAST, maxPerTask: 25 } });
      const { task_id } = await klym.start({ prompt: 'p' }, 'grynya');
      const caller = { principal: 'grynya' };
      const ids = Array.from({ length: 20 }, (_, index) => `c${index}`);

      const created = await Promise.all(ids.map((id) => klym.push.set(task_id, caller, { id, url: `${hooks.origin}/${id}` })));
      // Each caller was told it worked: each config must be there.
      expect(created.map((target) => target.id)).toEqual(ids);
      expect(new Set((await klym.push.list(task_id, caller)).map((target) => target.id))).toEqual(new Set(ids));
      // And each was told of the task as it stands.
      await vi.waitFor(() => expect(new Set(hooks.requests.map((request) => request.path))).toEqual(new Set(ids.map((id) => `/${id}`))), { timeout: 10_000 });

      const deleted = ids.filter((_, index) => index % 2 === 0);
      await Promise.all(deleted.map((id) => klym.push.delete(task_id, caller, id)));
      expect(new Set((await klym.push.list(task_id, caller)).map((target) => target.id))).toEqual(new Set(ids.filter((id) => !deleted.includes(id))));
    });
  }
});

describe('push messages in the stores’ outboxes', () => {
  for (const [kind, open] of Object.entries(stores)) {
    it(`${kind}: says when stored messages are due, and forgets settled ones`, async () => {
      const store = await open();
      cleanups.push(() => store.close());
      const message = { taskId: 't1', endpoint: 'push:a', type: 'task.snapshot' as const, payload: '{}', createdAt: 1_000, attempts: 0 };
      await store.addWebhookMessages([
        { ...message, id: 'm1', nextAttemptAt: 1_000 },
        { ...message, id: 'm2', nextAttemptAt: 5_000 },
      ]);
      expect(await store.dueOfWebhookMessages([])).toEqual(new Map());
      expect(await store.dueOfWebhookMessages(['m1', 'm2', 'nope'])).toEqual(
        new Map([
          ['m1', 1_000],
          ['m2', 5_000],
        ]),
      );
      const [claim] = await store.claimWebhookMessages(2_000, 10_000, 10);
      expect(await store.dueOfWebhookMessages(['m1'])).toEqual(new Map([['m1', 12_000]]));
      if (claim !== undefined) await store.settleWebhookMessage(claim, 'done');
      expect(await store.dueOfWebhookMessages(['m1', 'm2'])).toEqual(new Map([['m2', 5_000]]));
    });
  }

  it('keeps a target’s order across two processes on one Redis: the worker’s messages wait for the front’s', async () => {
    // The first attempt of the first message fails: the worker's later ones must not overtake its retry.
    const hooks = await receiver((request, index) => (index === 0 ? 500 : 200));
    const prefix = `push-two-${crypto.randomUUID()}:`;
    const front = await createRedisTaskStore({ url: redis.url, prefix });
    const worker = await createRedisTaskStore({ url: redis.url, prefix });
    cleanups.push(
      () => front.close(),
      () => worker.close(),
    );
    const push = resolvePushOptions({ allow: [hooks.origin], format, ...FAST });
    const frontHooks = createWebhookDispatcher({ store: front, endpoints: {}, push, pollMs: 20, closeGraceMs: 0 });
    const workerHooks = createWebhookDispatcher({ store: worker, endpoints: {}, push, pollMs: 20, closeGraceMs: 0 });
    cleanups.push(
      () => frontHooks.close(),
      () => workerHooks.close(),
    );

    const created = await front.insert(taskRecord('t1', { push: [{ id: 'a', url: `${hooks.origin}/a` }] }));
    await frontHooks.enqueue({ type: 'task-create', task: created });
    const started = await worker.transition('t1', ['pending'], { status: 'running', startedAt: '2026-01-01T00:00:01.000Z' });
    await workerHooks.enqueue({ type: 'task-start', task: started ?? created });
    const ended = await worker.transition('t1', ['running'], {
      status: 'error',
      finishedAt: '2026-01-01T00:00:02.000Z',
      error: { code: 'TASK_INTERRUPTED', message: 'gone' },
    });
    await workerHooks.enqueue({ type: 'task-end', task: ended ?? created });
    // The front hears of the end too, from the queue: it stores nothing for it.
    await frontHooks.enqueue({ type: 'task-end', task: ended ?? created, elsewhere: true });

    await vi.waitFor(() => expect(typesOf(hooks.requests)).toEqual(['task.snapshot', 'task.snapshot', 'task.started', 'task.failed']), { timeout: 5_000 });
    expect(hooks.requests.map((request) => (request.json as { status: string }).status)).toEqual(['pending', 'pending', 'running', 'error']);
  });
});
