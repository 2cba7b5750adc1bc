import type { ModelMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startRedisServer, type RedisServer } from '../../../../../../test/support/redis-server.ts';
import { artifactOf, checkpointOf, taskRecord, userMessage } from '../../../../../../test/support/task-fixtures.ts';
import type { AgentCheckpoint } from '../../../agent/types.ts';
import type { SessionPool } from '../../../pool/session-pool.ts';
import { runResult } from '../../../testing/run-result.ts';
import { createTaskManager } from '../../task-manager.ts';
import type { AgentRunner } from '../../task-manager-types.ts';
import { createRedisTaskStore, type RedisTaskStore, type RedisTaskStoreOptions } from './redis-task-store.ts';

let redis: RedisServer;
let prefixes = 0;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.close();
});

/** Two stores on one Redis and prefix: what two Klym processes sharing it have. */
async function twoProcesses(artifacts: RedisTaskStoreOptions['artifacts'] = {}): Promise<[RedisTaskStore, RedisTaskStore] & AsyncDisposable> {
  const prefix = `shared-${++prefixes}:`;
  const open = (): Promise<RedisTaskStore> => createRedisTaskStore({ url: redis.url, prefix, artifacts });
  const stores: [RedisTaskStore, RedisTaskStore] = [await open(), await open()];
  return Object.assign(stores, { [Symbol.asyncDispose]: async () => void (await Promise.all(stores.map((store) => store.close()))) });
}

/** A message that counts how often it is serialized, i.e. sent to Redis. */
function countedMessages(): { message: (text: string) => ModelMessage; sent: Map<string, number> } {
  const sent = new Map<string, number>();
  const message = (text: string): ModelMessage =>
    ({ role: 'user', content: text, toJSON: () => (sent.set(text, (sent.get(text) ?? 0) + 1), { role: 'user', content: text }) }) as ModelMessage;
  return { message, sent };
}

describe('createRedisTaskStore: one Redis, many processes', () => {
  it('shows each process what another wrote, at once', async () => {
    await using stores = await twoProcesses();
    const [front, worker] = stores;
    expect(front.where).toBe(`127.0.0.1:${redis.port}/0`);
    expect(front.warnings).toEqual([]);
    await front.insert(taskRecord('t1'));
    expect(await worker.get('t1')).toEqual(taskRecord('t1'));
    const running = await worker.transition('t1', ['pending'], { status: 'running', startedAt: '2026-01-01T00:00:01.000Z' });
    expect(await front.get('t1')).toEqual(running);
    expect(await front.counts()).toMatchObject({ pending: 0, running: 1 });
    for (let n = 1; n <= 3; n++) worker.appendLog('t1', 'step-start', { step: n });
    // Resolved once Redis holds it and the entries appended before it, so another process reads both.
    await worker.saveCheckpoint('t1', checkpointOf([userMessage('m1')]));
    expect((await front.readLog('t1')).entries.map((entry) => entry.data)).toEqual([{ step: 1 }, { step: 2 }, { step: 3 }]);
    expect(await front.loadCheckpoint('t1')).toEqual(checkpointOf([userMessage('m1')]));
    const done = await worker.transition('t1', ['running'], {
      status: 'completed',
      finishedAt: '2026-01-01T00:00:02.000Z',
      result: { text: 'ok', finalText: 'ok', finishReason: 'stop', model: 'scripted', toolCalls: 0 },
    });
    expect((await front.list({ principal: 'alice', status: 'completed' })).tasks).toEqual([done]);
  });

  it('applies one of 100 concurrent transitions out of a status made by two processes', async () => {
    await using stores = await twoProcesses();
    for (let index = 0; index < 5; index++) await stores[0].insert(taskRecord(`t${index}`));
    for (let index = 0; index < 5; index++) {
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, attempt) =>
          stores[attempt % 2]!.transition(`t${index}`, ['pending', 'running'], { status: 'cancelled', cancelReason: `by ${attempt}` }),
        ),
      );
      const applied = results.filter((result) => result !== undefined);
      expect(applied).toHaveLength(1);
      expect(await stores[1].get(`t${index}`)).toEqual(applied[0]);
    }
    expect(await stores[0].counts()).toMatchObject({ pending: 0, cancelled: 5 });
  });

  it('keeps artifacts under the caps when two processes save at once', async () => {
    await using stores = await twoProcesses({ maxBytesPerTask: 1_000, maxBytes: 1_500 });
    await stores[0].insert(taskRecord('t1', { status: 'running' }));
    await stores[0].insert(taskRecord('t2', { status: 'running' }));
    const save = (taskId: string, index: number) =>
      stores[index % 2]!.saveArtifact(taskId, artifactOf(`art_${taskId}${String(index).padStart(10, '0')}`, 'x'.repeat(200)));
    const first = await Promise.allSettled(Array.from({ length: 20 }, (_, index) => save('t1', index)));
    expect(first.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(5);
    expect(first.filter((outcome) => outcome.status === 'rejected').map((outcome) => (outcome as PromiseRejectedResult).reason.code)).toEqual(
      Array(15).fill('ARTIFACT_LIMIT'),
    );
    // The store's cap holds across processes too: 1,000 kept, room for two more of 200 in t2.
    const second = await Promise.allSettled(Array.from({ length: 20 }, (_, index) => save('t2', index)));
    expect(second.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(2);
    expect(await stores[1].artifactBytes()).toBe(1_400);
    expect((await stores[1].listArtifacts('t1')).length + (await stores[0].listArtifacts('t2')).length).toBe(7);
  });

  it('stores one task for concurrent starts with one idempotency key from two processes, and both answer it', async () => {
    await using stores = await twoProcesses();
    const starts = await Promise.all(
      Array.from({ length: 20 }, (_, index) => stores[index % 2]!.insert(taskRecord(`t${index}`, { request: { prompt: 'once', idempotencyKey: 'k' } }))),
    );
    expect(new Set(starts.map((task) => task.id)).size).toBe(1);
    expect((await stores[1].list()).total).toBe(1);
    expect((await stores[0].findByIdempotencyKey('alice', 'k'))?.id).toBe(starts[0]?.id);
  });

  it('lists by creation time, ties by insertion, whatever order tasks were inserted in (as the SQLite store)', async () => {
    await using stores = await twoProcesses();
    const [first, second] = stores;
    await first.insert(taskRecord('middle', { createdAt: '2026-01-01T00:00:02.000Z' }));
    await second.insert(taskRecord('newest', { createdAt: '2026-01-01T00:00:03.000Z', status: 'running' }));
    await first.insert(taskRecord('oldest', { createdAt: '2026-01-01T00:00:01.000Z' }));
    await second.insert(taskRecord('tie', { createdAt: '2026-01-01T00:00:02.000Z' }));
    expect((await first.list()).tasks.map((task) => task.id)).toEqual(['newest', 'tie', 'middle', 'oldest']);
    expect((await second.unfinished()).map((task) => task.id)).toEqual(['oldest', 'middle', 'tie', 'newest']);
  });

  it('evicts each finished task once, however many processes sweep', async () => {
    await using stores = await twoProcesses();
    for (let index = 0; index < 50; index++) await stores[0].insert(taskRecord(`t${index}`, { status: 'completed', finishedAt: '2026-01-01T00:00:00.000Z' }));
    const swept = await Promise.all([stores[0].evict(new Date('2026-01-02')), stores[1].evict(new Date('2026-01-02'))]);
    expect(
      swept
        .flat()
        .map((task) => task.id)
        .toSorted(),
    ).toEqual(Array.from({ length: 50 }, (_, index) => `t${index}`).toSorted());
    expect((await stores[1].list()).total).toBe(0);
  });
});

describe('createRedisTaskStore: checkpoints', () => {
  it('sends only the messages a save adds, and from the first one that changed', async () => {
    await using stores = await twoProcesses();
    const [store] = stores;
    await store.insert(taskRecord('t1', { status: 'running' }));
    const { message, sent } = countedMessages();
    const [m1, m2, m3] = [message('m1'), message('m2'), message('m3')];
    await store.saveCheckpoint('t1', checkpointOf([m1, m2]));
    // Two saves in flight at once, as a run may make them: the second still appends to the first.
    await Promise.all([store.saveCheckpoint('t1', checkpointOf([m1, m2, m3])), store.saveCheckpoint('t1', checkpointOf([m1, m2, m3], 4))]);
    expect(Object.fromEntries(sent)).toEqual({ m1: 1, m2: 1, m3: 1 });
    await store.saveCheckpoint('t1', checkpointOf([m1, message('m2 again'), m3]));
    expect(Object.fromEntries(sent)).toEqual({ m1: 1, m2: 1, m3: 2, 'm2 again': 1 });
    expect((await store.loadCheckpoint('t1'))?.messages).toEqual([userMessage('m1'), userMessage('m2 again'), userMessage('m3')]);
  });

  it('stays whole when two processes save one run’s checkpoints, as when a worker takes over another’s task', async () => {
    await using stores = await twoProcesses();
    const [dead, taker] = stores;
    await dead.insert(taskRecord('t1', { status: 'running' }));
    const [m1, m2] = [userMessage('m1'), userMessage('m2')];
    await dead.saveCheckpoint('t1', checkpointOf([m1, m2]));
    const loaded = await taker.loadCheckpoint('t1');
    const resumed = [...(loaded?.messages ?? []), userMessage('m3 by the taker')];
    await taker.saveCheckpoint('t1', checkpointOf(resumed));
    expect((await dead.loadCheckpoint('t1'))?.messages).toEqual([m1, m2, userMessage('m3 by the taker')]);
    // A late save of the first process does not append to what the other stored: it is stored whole.
    await dead.saveCheckpoint('t1', checkpointOf([m1, m2, userMessage('m3 late')]));
    expect((await taker.loadCheckpoint('t1'))?.messages).toEqual([m1, m2, userMessage('m3 late')]);
    await taker.saveCheckpoint('t1', checkpointOf([...resumed, userMessage('m4')]));
    expect(await dead.loadCheckpoint('t1')).toEqual(checkpointOf([...resumed, userMessage('m4')]));
  });

  it('refuses a checkpoint of a task it does not keep, as the SQLite store', async () => {
    await using stores = await twoProcesses();
    await expect(stores[0].saveCheckpoint('missing', checkpointOf([]))).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
  });
});

describe('createRedisTaskStore: under a task manager', () => {
  const pool = { upstreams: [], openScope: () => ({ close: async () => {} }) } as unknown as SessionPool;
  const me = { principal: 'grynya' };

  it('runs a task one process started, and another process resumes a run whose process died', async () => {
    await using stores = await twoProcesses();
    const calls: Parameters<AgentRunner>[0][] = [];
    const run: AgentRunner = async (options) => {
      calls.push(options);
      await options.onCheckpoint?.(checkpointOf([userMessage(options.prompt)]));
      return runResult(`answer to ${options.prompt}`, {});
    };
    await using first = createTaskManager({ pool, run, store: stores[0] });
    const started = await first.start({ prompt: 'hello' }, me);
    await vi.waitFor(async () => expect((await first.get(started.id, me)).status).toBe('completed'));
    expect((await stores[1].readLog(started.id)).entries.map((entry) => entry.type)).toEqual(['task-create', 'task-start', 'task-end']);

    // What a process that died mid-run leaves: a running task with its checkpoint.
    const checkpoint: AgentCheckpoint = {
      ...checkpointOf([userMessage('interrupted')], 2),
      current: { step: 3, text: '', calls: [{ toolCallId: 'c1', toolName: 'grynya__add_node', input: {} }] },
    };
    await stores[0].insert(
      taskRecord('left-running', { principal: me.principal, request: { prompt: 'interrupted' }, status: 'running', startedAt: new Date().toISOString() }),
    );
    await stores[0].saveCheckpoint('left-running', checkpoint);
    await using second = createTaskManager({ pool, run, store: stores[1] });
    await vi.waitFor(async () => expect((await second.get('left-running', me)).status).toBe('completed'));
    expect(calls.find((call) => call.prompt === 'interrupted')?.resume).toEqual(checkpoint);
    expect(await stores[0].get('left-running')).toMatchObject({ resumes: [2], result: { finalText: 'answer to interrupted' } });
    const resumeEntry = (await stores[0].readLog('left-running')).entries.find((entry) => entry.type === 'task-resume');
    expect(resumeEntry?.data).toEqual({ fromStep: 2, interruptedCalls: ['grynya__add_node'] });
  });
});
