import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startRedisServer, type RedisServer } from '../../../../test/support/redis-server.ts';
import { createSessionPool, type SessionPool } from '../pool/session-pool.ts';
import { runResult } from '../testing/run-result.ts';
import type { AgentRunner } from './task-manager-types.ts';
import { openTaskBackend, type TaskBackend } from './task-backend.ts';
import { createTaskService } from './task-service.ts';

const answers: AgentRunner = async (options) => runResult(`answered: ${options.prompt}`);

let dir: string;
let pool: SessionPool;
let redis: RedisServer;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'klym-backend-'));
  pool = await createSessionPool({ upstreams: {} });
  redis = await startRedisServer();
});
afterAll(async () => {
  await pool.close();
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

/** Runs one task to its end on `backend` through a task service, and closes the service; returns the task's id. */
async function runOne(backend: TaskBackend, prompt: string): Promise<string> {
  const service = createTaskService({ pool, store: backend.store, queue: backend.queue, run: answers, shutdownGraceMs: 0 });
  const { task_id: taskId } = await service.start({ prompt }, 'grynya');
  await vi.waitFor(async () => expect((await service.status({ task_id: taskId }, 'grynya')).status).toBe('completed'));
  await service.close();
  return taskId;
}

describe('openTaskBackend', () => {
  it('opens the memory store with an in-process queue, and runs a task on them', async () => {
    await using backend = await openTaskBackend('memory');
    expect(backend.queue.shared).toBe(false);
    const taskId = await runOne(backend, 'hello');
    expect((await backend.store.get(taskId))?.result?.text).toBe('answered: hello');
  });

  it('opens a SQLite file, relative to the working directory, whose tasks outlive the backend', async () => {
    const file = path.relative(process.cwd(), path.join(dir, 'tasks.db'));
    const first = await openTaskBackend(`sqlite:${file}`, { log: { maxBytes: 65_536 } });
    const taskId = await runOne(first, 'kept');
    await first.close();
    await first.close();
    await using again = await openTaskBackend(`sqlite:${file}`);
    expect(again.queue.shared).toBe(false);
    expect((await again.store.get(taskId))?.result?.text).toBe('answered: kept');
  });

  it('opens the Redis store and a shared BullMQ queue in the same Redis', async () => {
    await using backend = await openTaskBackend(redis.url, { sharedQueue: { lockDurationMs: 5_000 } });
    expect(backend.queue.shared).toBe(true);
    expect(backend.warnings).toEqual([]);
    const taskId = await runOne(backend, 'shared');
    expect((await backend.store.get(taskId))?.result?.text).toBe('answered: shared');
  });

  it('refuses a spec of another scheme, naming it (never its password) and what is accepted', async () => {
    for (const spec of ['postgres://klym:hunter22@db:5432/klym', 'sqlite:', 'file:tasks.db', 'Memory']) {
      const refused = await openTaskBackend(spec).catch((error: unknown) => error);
      expect(refused).toMatchObject({
        code: 'CONFIG_INVALID',
        message: expect.stringContaining('Expected the task store to be "memory", "sqlite:<path>" or "redis://'),
      });
      expect((refused as Error).message).toContain(`got "${spec.replace('hunter22', '***')}"`);
      expect((refused as Error).message).not.toContain('hunter22');
    }
  });

  it("says which file or Redis cannot be opened, and never a Redis URL's password", async () => {
    const notADirectory = path.join(dir, 'plain-file');
    await writeFile(notADirectory, 'not a directory');
    await expect(openTaskBackend(`sqlite:${notADirectory}/tasks.db`)).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining(`${notADirectory}/tasks.db`),
    });
    const refused = await openTaskBackend(`redis://:s3cret-pw@127.0.0.1:${redis.port}/99`).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'STORE_UNAVAILABLE', message: expect.stringContaining(`127.0.0.1:${redis.port}/99`) });
    expect((refused as Error).message).not.toContain('s3cret-pw');
  });
});
